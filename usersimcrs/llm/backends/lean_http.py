"""The `client: lean` transport: JSON POSTs over the toolkit's HTTP client, one per backend.

The official `openai` / `ollama` clients spend about 3 ms of CPU per call on request building,
response models and pool bookkeeping, and aiohttp (this transport's library until issue #22) about
0.15 ms per keep-alive request above a bare asyncio protocol; against a fast server at high
concurrency that CPU, not the server, bounds throughput. This transport speaks the same wire
protocol through `usersimcrs.core.http_client` (keep-alive connections per event loop, llhttp's
parser) and classifies failures the way the official paths do (timeouts, lost connections and
malformed bodies are transient; HTTP statuses go through `status_error`, Retry-After included; a
URL that cannot be sent to is permanent). Redirects are not followed: the API key is never sent on to
another address, and a 3xx is a permanent failure naming its (scrubbed) target.
"""

from __future__ import annotations

from typing import Any

from usersimcrs.core import wire_json
from usersimcrs.core.http_client import (
    ACCEPTED_ENCODINGS,
    ConnectFailed,
    ConnectionLost,
    HTTPClient,
    InvalidURL,
    Reply,
    ReplyTooLarge,
    encode_headers,
)
from usersimcrs.core.retry import parse_retry_after
from usersimcrs.errors import LLMError
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, redact, redirect_error, status_error

MAX_REPLY_BYTES = 64_000_000  # far above any chat completion; a server streaming without end is cut off


class LeanHTTP:
    """One HTTP client (keep-alive pool of `connections`) for one backend, per event loop."""

    def __init__(
        self, backend: str, *, connections: int, timeout_s: float, headers: dict[str, str], secrets: list[str]
    ) -> None:
        self.backend = backend
        self.connections = max(1, connections)
        # reads are bounded by the per-attempt asyncio.timeout of the LLM layer; connecting by timeout_s
        self.client = HTTPClient(connections=self.connections, connect_timeout_s=timeout_s)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        try:
            self._header_block = encode_headers({"User-Agent": "usersimcrs", **ACCEPTED_ENCODINGS, **self.headers})
        except ValueError as exc:
            raise PermanentLLMError(f"{backend}: {redact(str(exc), secrets)}") from None
        self.secrets = secrets

    async def post(self, url: str, payload: dict[str, Any]) -> Reply:
        """POST `payload` as JSON; connection trouble and timeouts come out as TransientLLMError."""
        data = wire_json.encode(payload)
        try:
            return await self.client.request("POST", url, self._header_block, data, limit=MAX_REPLY_BYTES)
        except TimeoutError:
            raise TransientLLMError(f"{self.backend}: request timed out") from None
        except InvalidURL as exc:
            raise PermanentLLMError(f"{self.backend}: {redact(exc.reason, self.secrets)}") from None
        except ConnectFailed as exc:
            raise TransientLLMError(f"{self.backend}: connection failed ({exc.reason})") from None
        except ReplyTooLarge:
            raise TransientLLMError(f"{self.backend}: reply over {MAX_REPLY_BYTES} bytes") from None
        except (ConnectionLost, OSError) as exc:
            raise TransientLLMError(f"{self.backend}: connection failed ({type(exc).__name__})") from None

    async def post_ok_json(self, url: str, payload: dict[str, Any], message_of: Any) -> Any:
        """POST and decode a 2xx JSON answer; an HTTP error status is classified with its Retry-After."""
        reply = await self.post(url, payload)
        if 300 <= reply.status < 400:
            raise redirect_error(self.backend, reply.status, reply.header("Location"), self.secrets)
        if reply.status >= 400:
            retry_after = parse_retry_after(reply.header("Retry-After"))
            raise self._status_error(reply, message_of, retry_after)
        return decode_json(self.backend, reply.body)

    def _status_error(self, reply: Reply, message_of: Any, retry_after: float | None) -> LLMError:
        try:
            message = message_of(wire_json.decode(reply.body))
        except ValueError:
            message = reply.body[:200].decode("utf-8", "replace")
        return status_error(self.backend, reply.status, message, retry_after, self.secrets)

    async def aclose(self) -> None:
        """Close the idle connections of the running loop."""
        await self.client.aclose()


def decode_json(backend: str, body: bytes) -> Any:
    """The JSON document of a 2xx body, or TransientLLMError (a truncated or garbled body is retried)."""
    try:
        return wire_json.decode(body)
    except ValueError as exc:
        raise TransientLLMError(f"{backend}: malformed response body ({type(exc).__name__})") from None
