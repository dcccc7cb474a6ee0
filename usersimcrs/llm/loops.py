"""Async resources (HTTP clients, semaphores) belong to one event loop; rebuild them for a new one.

A provider may outlive an event loop (a CLI step that calls `asyncio.run` twice); clients and
semaphores bound to a closed loop would fail, so each is created lazily for the running loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerLoop(Generic[T]):
    """Holds one instance made by `factory` for the currently running event loop."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._loop: asyncio.AbstractEventLoop | None = None
        self._value: T | None = None

    def get(self) -> T:
        """The instance for the running loop (built on first use in that loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._value is None:
            self._value, self._loop = self._factory(), loop
        return self._value

    def take_current(self) -> T | None:
        """Remove and return the instance if it belongs to the running loop (else just forget it)."""
        value, loop = self._value, self._loop
        self._value, self._loop = None, None
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            return None
        return value if loop is running else None
