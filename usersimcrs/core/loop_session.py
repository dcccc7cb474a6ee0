"""One aiohttp session per running event loop, shared by the LLM client and the CRS transport.

A session belongs to the loop it was made in. It is made lazily inside the running loop, made anew
when a later `asyncio.run` brings another loop (the old one is let go without touching its loop),
and closed by `aclose` when its loop is the running one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import aiohttp


class LoopSession:
    """Holds the session of the current loop; `make` builds a new one (connector, headers, timeouts)."""

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._make = make
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> aiohttp.ClientSession:
        """The session of the running loop (made on first use there; a stale one is dropped)."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is not None and self._loop is loop and not session.closed:
            return session
        if session is not None and self._loop is not loop:
            drop(session)
        self._session, self._loop = self._make(), loop
        return self._session

    async def aclose(self) -> None:
        """Close the session if it belongs to the running loop, else just let go of it."""
        session, loop = self._session, self._loop
        self._session, self._loop = None, None
        if session is None or session.closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is running:
            await session.close()
        else:
            drop(session)

    def let_go(self) -> None:
        """Drop an unclosed session without its loop (for owners collected without `aclose`)."""
        if self._session is not None and not self._session.closed:
            drop(self._session)
        self._session, self._loop = None, None


def drop(session: aiohttp.ClientSession) -> None:
    """Let go of a session whose loop has ended: detach it and close its connector synchronously."""
    connector = session.connector
    session.detach()  # marks the session closed, so it warns about nothing when collected
    if connector is not None and not connector.closed:
        connector._close()  # noqa: SLF001 - the synchronous half of close(); its loop cannot await any more
