"""The `client: aiohttp` transport: JSON POSTs over one pooled aiohttp session per backend.

The official `openai` / `ollama` clients spend about 3 ms of CPU per call on request building,
response models and pool bookkeeping; against a fast server at high concurrency that CPU, not the
server, bounds throughput. This transport speaks the same wire protocol with less work per call and
classifies failures the way the official paths do (timeouts, lost connections and malformed bodies
are transient; HTTP statuses go through `status_error`, Retry-After included). Redirects are not
followed: the API key is never sent on to another address, and a 3xx is a permanent failure
naming its (scrubbed) target.

Sessions belong to one event loop: the session is made lazily inside the running loop and made anew
when a later `asyncio.run` brings another loop (the old one is detached without touching its loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from usersimcrs.core import wire_json
from usersimcrs.core.loop_session import LoopSession
from usersimcrs.core.retry import parse_retry_after
from usersimcrs.errors import LLMError
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, redact, status_error


class LeanReply:
    """Status, headers and raw body of one HTTP answer."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class LeanHTTP:
    """One aiohttp session (keep-alive pool of `connections`) for one backend, per event loop."""

    def __init__(
        self, backend: str, *, connections: int, timeout_s: float, headers: dict[str, str], secrets: list[str]
    ) -> None:
        self.backend = backend
        self.connections = max(1, connections)
        # reads are bounded by the per-attempt asyncio.timeout of the LLM layer; a per-read timer here
        # would be re-armed on every chunk of every reply for nothing
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self.secrets = secrets
        self._sessions = LoopSession(self._new_session)

    def _new_session(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self.connections, limit_per_host=0, enable_cleanup_closed=False)
        return aiohttp.ClientSession(
            connector=connector,
            headers=self.headers,
            timeout=self.timeout,
            cookie_jar=aiohttp.DummyCookieJar(),  # LLM APIs need no cookies; no jar lookups per request
            auto_decompress=True,
        )

    def session(self) -> aiohttp.ClientSession:
        """The session of the running loop (made on first use there; a stale one is dropped)."""
        return self._sessions.get()

    async def post(self, url: str, payload: dict[str, Any]) -> LeanReply:
        """POST `payload` as JSON; connection trouble and timeouts come out as TransientLLMError."""
        data = wire_json.encode(payload)
        try:
            async with self.session().post(url, data=data, allow_redirects=False) as response:
                body = await response.read()
                return LeanReply(response.status, response.headers, body)
        except TimeoutError:  # aiohttp's read/connect timeouts (ServerTimeoutError) included
            raise TransientLLMError(f"{self.backend}: request timed out") from None
        except aiohttp.ClientError as exc:
            raise TransientLLMError(f"{self.backend}: connection failed ({type(exc).__name__})") from None

    async def post_ok_json(self, url: str, payload: dict[str, Any], message_of: Any) -> Any:
        """POST and decode a 2xx JSON answer; an HTTP error status is classified with its Retry-After."""
        reply = await self.post(url, payload)
        if 300 <= reply.status < 400:
            target = reply.headers.get("Location")
            where = f" to {redact(target, self.secrets)}" if target else ""
            raise PermanentLLMError(
                f"{self.backend}: HTTP {reply.status}: redirected{where}, not followed (set llm.base_url to the final address)"
            )
        if reply.status >= 400:
            retry_after = parse_retry_after(reply.headers.get("Retry-After"))
            raise self._status_error(reply, message_of, retry_after)
        return decode_json(self.backend, reply.body)

    def _status_error(self, reply: LeanReply, message_of: Any, retry_after: float | None) -> LLMError:
        try:
            message = message_of(wire_json.decode(reply.body))
        except ValueError:
            message = reply.body[:200].decode("utf-8", "replace")
        return status_error(self.backend, reply.status, message, retry_after, self.secrets)

    async def aclose(self) -> None:
        """Close the session if it belongs to the running loop, else just let go of it."""
        await self._sessions.aclose()


def decode_json(backend: str, body: bytes) -> Any:
    """The JSON document of a 2xx body, or TransientLLMError (a truncated or garbled body is retried)."""
    try:
        return wire_json.decode(body)
    except ValueError as exc:
        raise TransientLLMError(f"{backend}: malformed response body ({type(exc).__name__})") from None
