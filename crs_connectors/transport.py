"""HTTP plumbing shared by the HTTP connectors: retries with seeded backoff, timeouts, a size limit,
per-conversation cookies, secret headers from the environment, and short failure reasons.

Requests go through the run's shared ``httpx.AsyncClient`` (one connection pool) when the context
has one. Requests are built by hand and cookies are kept in a jar owned by one conversation, so
a session cookie set for one conversation is never sent in another.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import httpx
from pydantic import Field

from crs_connectors.base import ConnectorConfig
from usersimcrs.core.env_headers import headers_from_env
from usersimcrs.core.retry import RetryableFailure, RetryPolicy, parse_retry_after
from usersimcrs.errors import ConnectorError

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class HTTPOptions(ConnectorConfig):
    """Connection options common to every HTTP connector."""

    url: str
    timeout_s: float = Field(30.0, gt=0, description="seconds per attempt (connect, send and read)")
    retries: int = Field(2, ge=0, description="extra attempts after a failed one")
    backoff_s: float = Field(0.5, ge=0, description="first retry delay; doubles each retry, with seeded jitter")
    max_backoff_s: float = Field(10.0, ge=0)
    max_response_bytes: int = Field(1_000_000, ge=1, description="longer replies are cut off and count as failures")
    headers: dict[str, str] = Field(default_factory=dict, description="fixed, non-secret headers")
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> environment variable holding its (secret) value"
    )
    health_url: str | None = None


class Retryable(RetryableFailure):
    """A failed attempt worth retrying; `reason` is the short text recorded on the conversation."""


@dataclass
class HTTPAnswer:
    """One HTTP response, read within the size limit."""

    status: int
    body: bytes
    content_type: str
    latency_s: float

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; a non-JSON body is a retryable 'non-JSON reply'."""
        try:
            return json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Retryable("non-JSON reply") from None


def format_size(size: int) -> str:
    """1000000 -> '1 MB', 2048 -> '2 kB' (decimal units, as people read limits)."""
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size} bytes"


def format_seconds(seconds: float) -> str:
    return f"{seconds:g}s"


def seed_for(*parts: object) -> int:
    """A stable integer seed from strings/numbers (Python's hash() is salted per process)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class HTTPTransport:
    """One conversation's HTTP channel: retries, timeouts, size limit and (optionally) its own cookies."""

    def __init__(self, options: HTTPOptions, context: Any, *, keep_cookies: bool = False, seed_key: str = "") -> None:
        self.options = options
        self._shared_client: httpx.AsyncClient | None = getattr(context, "http", None)
        self._own_client: httpx.AsyncClient | None = None
        self.keep_cookies = keep_cookies
        self.cookies = httpx.Cookies()
        self._headers = {**options.headers, **headers_from_env(options.headers_env, section="crs")}
        self._rng = random.Random(seed_for(getattr(context, "run_seed", 0), seed_key))
        self._policy = RetryPolicy(attempts=options.retries + 1, base_s=options.backoff_s, cap_s=options.max_backoff_s)
        self.attempts = 0

    def reset_session(self, seed_key: str, run_seed: int = 0) -> None:
        """Forget cookies and reseed the backoff jitter for a new conversation."""
        self.cookies = httpx.Cookies()
        self._rng = random.Random(seed_for(run_seed, seed_key))

    @property
    def client(self) -> httpx.AsyncClient:
        if self._shared_client is not None:
            return self._shared_client
        if self._own_client is None:
            self._own_client = httpx.AsyncClient(follow_redirects=False)
        return self._own_client

    async def aclose(self) -> None:
        """Close the client this transport opened itself (never the run's shared one)."""
        if self._own_client is not None:
            await self._own_client.aclose()
            self._own_client = None

    def policy(self, retries: int | None = None) -> RetryPolicy:
        """The shared retry policy with this connector's limits (`retries` overrides the configured count)."""
        if retries is None or retries == self._policy.attempts - 1:
            return self._policy
        return replace(self._policy, attempts=retries + 1)

    def backoff(self, retry: int) -> float:
        """Delay before retry `retry` (1-based), drawn from this conversation's seeded RNG."""
        return self.policy().delay(retry, self._rng)

    async def call(
        self,
        method: str,
        url: str,
        parse: Callable[[HTTPAnswer], T],
        *,
        json_body: Any = None,
        retries: int | None = None,
    ) -> T:
        """Send a request and parse its answer, retrying transient failures; raises ConnectorError."""
        policy = self.policy(retries)

        async def attempt(number: int) -> T:
            try:
                return parse(await self._attempt(method, url, json_body))
            except Retryable as exc:
                log.debug("%s %s failed (%s), attempt %d of %d", method, url, exc.reason, number, policy.attempts)
                raise

        try:
            return await policy.run(attempt, rng=lambda: self._rng)
        except RetryableFailure as exc:
            suffix = f" (after {policy.attempts} attempts)" if policy.attempts > 1 else ""
            raise ConnectorError(f"{exc.reason}{suffix}") from None

    async def _attempt(self, method: str, url: str, json_body: Any) -> HTTPAnswer:
        """One request within the timeout; failures become Retryable or (for 4xx) ConnectorError."""
        self.attempts += 1
        timeout = self.options.timeout_s
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(method, url, json_body, started)
        except (TimeoutError, httpx.TimeoutException):
            raise Retryable(f"timeout after {format_seconds(timeout)}") from None
        except httpx.ConnectError as exc:
            raise Retryable(f"cannot connect to {url} ({_short(exc) or 'connection refused'})") from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
            raise Retryable(f"connection reset ({_short(exc)})" if _short(exc) else "connection reset") from None
        except httpx.InvalidURL:
            raise ConnectorError(f"invalid URL {url!r}") from None
        except httpx.HTTPError as exc:
            raise Retryable(f"HTTP error ({_short(exc)})") from None

    async def _exchange(self, method: str, url: str, json_body: Any, started: float) -> HTTPAnswer:
        client = self.client
        headers = {"User-Agent": "usersimcrs", "Accept": "application/json, text/plain;q=0.9", **self._headers}
        if json_body is not None:
            headers.setdefault("Content-Type", "application/json")
        content = None if json_body is None else json.dumps(json_body).encode("utf-8")
        timeout = httpx.Timeout(self.options.timeout_s)
        request = httpx.Request(method, url, headers=headers, content=content, extensions={"timeout": timeout.as_dict()})
        if self.keep_cookies:
            self.cookies.set_cookie_header(request)
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            if self.keep_cookies:
                self.cookies.extract_cookies(response)
            if client is self._shared_client:
                _forget_cookies(client, response)
            body = await _read_limited(response, self.options.max_response_bytes)
        finally:
            await response.aclose()
        answer = HTTPAnswer(
            status=response.status_code,
            body=body,
            content_type=response.headers.get("content-type", ""),
            latency_s=time.perf_counter() - started,
        )
        if response.status_code in RETRY_STATUSES or response.status_code >= 500:
            raise Retryable(f"HTTP {response.status_code}", parse_retry_after(response.headers.get("retry-after")))
        if response.status_code >= 400:
            snippet = answer.text().strip().replace("\n", " ")[:80]
            raise ConnectorError(f"HTTP {response.status_code}" + (f": {snippet}" if snippet else ""))
        return answer


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    """The body, reading at most `limit` bytes; more is a retryable 'reply over <limit>'."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise Retryable(f"reply over {format_size(limit)}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise Retryable(f"reply over {format_size(limit)}")
        chunks.append(chunk)
    return b"".join(chunks)


def _forget_cookies(client: httpx.AsyncClient, response: httpx.Response) -> None:
    """Drop cookies the shared client stored from this response, so they reach no other conversation."""
    jar = httpx.Cookies()
    jar.extract_cookies(response)
    for cookie in jar.jar:
        try:
            client.cookies.jar.clear(cookie.domain, cookie.path, cookie.name)
        except KeyError:
            pass


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text[:80]
