"""HTTP plumbing shared by the HTTP connectors: retries with seeded backoff, timeouts, a size limit,
per-conversation cookies, secret headers from the environment, and short failure reasons.

Whatever the CRS sends back passes the run's secret scrubber on the way in (`core/secrets.py`): the
body before it is parsed, and every failure reason (a 4xx body, a redirect's target, a URL), so a
CRS that echoes its bearer token puts it in no file. Redirects are not followed (a 3xx is a
failure naming its target), so a token is never sent on to another address.

Requests go through a `CRSPool`: the run's shared one when the engine put one in the context (one pool
per run), else the transport's own. Plain HTTP to a CRS on this machine or the local network goes
through the toolkit's lean client (`usersimcrs.core.http_client`): httpx cost about 1 ms of CPU per
request at C = 128 and aiohttp about 0.5 ms per new connection above a bare asyncio protocol, which
against an HTTP/1.0 CRS (a new connection every turn) made the CRS turn a third of the engine's CPU.
An `https://` CRS or one behind the environment's proxy goes through the pool's httpx client (TLS,
proxies and CA bundle from the environment): `client: auto`, the rule of `core/http_route.py`; `lean` or
`httpx` forces one. A context that hands an ``httpx.AsyncClient`` as ``http`` (tests, embedding code
with a custom transport) gets every request sent through that client instead. Either way cookies live
in a jar owned by one conversation, so a session cookie set for one conversation is never sent in another.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import TYPE_CHECKING, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from crs_connectors.base import ConnectorConfig
from usersimcrs.core import wire_json
from usersimcrs.core.env_headers import headers_from_env
from usersimcrs.core.http_client import (
    ACCEPTED_ENCODINGS,
    ConnectFailed,
    ConnectionLost,
    HTTPClient,
    InvalidURL,
    ReplyTooLarge,
    SessionCookies,
    encode_headers,
)
from usersimcrs.core.http_route import Route, choose_route
from usersimcrs.core.json_types import JSON
from usersimcrs.core.retry import RetryableFailure, RetryPolicy, parse_retry_after
from usersimcrs.core.secrets import Secrets
from usersimcrs.errors import ConnectorError
from usersimcrs.llm.loops import PerLoop

if TYPE_CHECKING:  # imported on first use: only a run with an https or proxied CRS (or a context's client) pays
    import httpx

    from usersimcrs.runtime.context import RunContext

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
POOL_KEY = "crs_connectors.transport:CRSPool"  # where the engine keeps the run's pool (RunContext.shared)
PREPARED_KEY = "crs_connectors.transport:prepared"  # per-run: options object -> its headers, secrets, policy


CRSClient = Literal["auto", "lean", "httpx"]


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
    client: CRSClient = Field(
        "auto",
        description=(
            "HTTP client: auto takes the lean client for plain http to localhost or a local address with no "
            "proxy set and httpx for anything else (https, a proxy, a host name); lean or httpx forces one"
        ),
    )

    @field_validator("client")
    @classmethod
    def _lean_speaks_http(cls, value: str, info: ValidationInfo) -> str:
        """`client: lean` with an https URL fails when the config is read (the lean client has no TLS)."""
        if value == "lean":
            for key in ("url", "health_url"):
                url = info.data.get(key)
                if isinstance(url, str) and urlsplit(url).scheme.lower() == "https":
                    raise ValueError(f"lean speaks plain HTTP only; the https {key} needs client auto or httpx")
        return value


class Retryable(RetryableFailure):
    """A failed attempt worth retrying; `reason` is the short text recorded on the conversation."""


@dataclass
class HTTPAnswer:
    """One HTTP response, read within the size limit."""

    status: int
    body: bytes
    content_type: str
    latency_s: float
    location: str | None = None  # where a 3xx points

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> JSON:
        """The body as JSON; a non-JSON body is a retryable 'non-JSON reply'."""
        try:
            return wire_json.decode(self.body)
        except wire_json.TooDeep:
            raise Retryable("JSON reply nested too deeply") from None
        except ValueError:  # not JSON, or not UTF-8 (UnicodeDecodeError is a ValueError)
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


class CRSPool:
    """The run's HTTP clients for CRS requests, no cookies of their own: the lean client (keep-alive
    connections per event loop) and, made on first use in each loop, an httpx client for the URLs the route
    rule sends there. Cookies never go into the pool: each conversation's transport keeps its own jar and
    sends the Cookie header itself.
    """

    def __init__(self, connections: int = 0) -> None:
        self.connections = max(0, connections)  # 0: no cap (the engine's concurrency bounds it)
        self.client = HTTPClient(connections=self.connections)
        self._httpx: PerLoop[httpx.AsyncClient] = PerLoop(self._new_httpx)
        self._routes: dict[tuple[str, str], Route] = {}  # (url, client setting) -> route
        self._origins: dict[str, Route] = {}  # scheme://host:port -> its route, for the manifest

    def route(self, url: str, setting: CRSClient) -> Route:
        """Which client sends to `url` under `crs.client` (decided once per URL: the environment is read then)."""
        known = self._routes.get((url, setting))
        if known is not None:
            return known
        try:
            known = choose_route(url, "official" if setting == "httpx" else setting, key="crs.client")
        except ValueError as exc:
            raise ConnectorError(str(exc)) from None
        if len(self._routes) < 1024:  # a connector talks to a handful of URLs
            self._routes[(url, setting)] = known
        self._origins.setdefault(_origin(url), known)
        return known

    def routes(self) -> dict[str, dict[str, str]]:
        """scheme://host[:port] of every CRS endpoint used -> the client that spoke to it and why (manifest)."""
        return {
            origin: {key: value for key, value in route.record("httpx").items() if key != "url"}
            for origin, route in sorted(self._origins.items())
        }

    def httpx_client(self) -> httpx.AsyncClient:
        """The running loop's httpx client (https and proxied CRSs)."""
        return self._httpx.get()

    def _new_httpx(self) -> httpx.AsyncClient:
        import httpx  # only a run with an https or proxied CRS pays for the import

        cap = self.connections or None
        return httpx.AsyncClient(
            follow_redirects=False,
            limits=httpx.Limits(max_connections=cap, max_keepalive_connections=cap),
            cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),  # stores no cookie: the jars do
        )

    async def aclose(self) -> None:
        """Close the idle connections of the running loop (both clients)."""
        await self.client.aclose()
        client = self._httpx.take_current()
        if client is not None:
            await client.aclose()

    def __del__(self) -> None:
        # a pool its owner never closed (e.g. a probe that gave up early) goes quietly, like an httpx client
        self.client.let_go()


def _origin(url: str) -> str:
    """scheme://host[:port] of `url` (no user info, path or query)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _header_block(headers: dict[str, str]) -> bytes:
    try:
        return encode_headers(headers)
    except ValueError as exc:
        raise ConnectorError(f"crs.headers: {exc}") from None


@dataclass(frozen=True)
class _Prepared:
    """What a transport derives from its options alone (one per run and options object)."""

    headers: dict[str, str]
    secrets: Secrets
    request_headers: dict[str, str]
    json_headers: dict[str, str]
    request_block: bytes  # the same headers as lines for the lean client, checked and encoded once
    json_block: bytes
    policy: RetryPolicy

    @classmethod
    def of(cls, options: HTTPOptions, run_secrets: Secrets) -> _Prepared:
        secret_headers = headers_from_env(options.headers_env, section="crs")
        headers = {**options.headers, **secret_headers}
        # the same headers on both clients, Accept-Encoding included (httpx would offer br and zstd as well)
        request_headers = {
            **ACCEPTED_ENCODINGS,
            "User-Agent": "usersimcrs",
            "Accept": "application/json, text/plain;q=0.9",
            **headers,
        }
        json_headers = {"Content-Type": "application/json", **request_headers}
        return cls(
            headers=headers,
            secrets=Secrets(secret_headers.values()) + run_secrets,
            request_headers=request_headers,
            json_headers=json_headers,
            request_block=_header_block(request_headers),
            json_block=_header_block(json_headers),
            policy=RetryPolicy(attempts=options.retries + 1, base_s=options.backoff_s, cap_s=options.max_backoff_s),
        )


class HTTPTransport:
    """One conversation's HTTP channel: retries, timeouts, size limit and (optionally) its own cookies."""

    def __init__(
        self, options: HTTPOptions, context: RunContext, *, keep_cookies: bool = False, seed_key: str = ""
    ) -> None:
        self.options = options
        self._httpx_client: httpx.AsyncClient | None = getattr(context, "http", None)
        run_cache = getattr(context, "cache", None)
        shared_pool = run_cache.get(POOL_KEY) if isinstance(run_cache, dict) else None
        self._pool: CRSPool | None = shared_pool if isinstance(shared_pool, CRSPool) else None
        self._own_pool = self._pool is None and self._httpx_client is None
        if self._own_pool:
            self._pool = CRSPool()
        self.keep_cookies = keep_cookies
        self._jar: SessionCookies | None = None  # made on first use (the lean client's requests)
        self._httpx_jar: httpx.Cookies | None = None  # the same on the httpx path
        run_secrets = getattr(context, "secrets", None)
        run_secrets = run_secrets if isinstance(run_secrets, Secrets) else Secrets()
        # what depends on the options alone (headers, secrets, retry policy) is built once per run, not per
        # conversation: the options object is the run's, shared by every conversation's connector
        memo = run_cache.setdefault(PREPARED_KEY, {}) if isinstance(run_cache, dict) else {}
        known = memo.get(id(options))
        if known is None or known[0] is not options or known[1] is not run_secrets:
            known = memo[id(options)] = (options, run_secrets, _Prepared.of(options, run_secrets))
        prepared: _Prepared = known[2]
        self._headers = prepared.headers
        self.secrets = prepared.secrets
        self._request_headers = prepared.request_headers
        self._json_headers = prepared.json_headers
        self._request_block = prepared.request_block
        self._json_block = prepared.json_block
        self._seed = (getattr(context, "run_seed", 0), seed_key)
        self._rng_made: random.Random | None = None  # made from `_seed` when a retry first waits
        self._policy = prepared.policy
        self.attempts = 0

    def reset_session(self, seed_key: str, run_seed: int = 0) -> None:
        """Forget cookies and reseed the backoff jitter for a new conversation."""
        self._jar = self._httpx_jar = None
        self._seed = (run_seed, seed_key)
        self._rng_made = None

    @property
    def _rng(self) -> random.Random:
        """This conversation's backoff jitter, seeded by (run seed, conversation): made only when needed."""
        if self._rng_made is None:
            self._rng_made = random.Random(seed_for(*self._seed))
        return self._rng_made

    @property
    def cookies(self) -> list[str]:
        """Names of the cookies this conversation holds."""
        names = list(self._jar or [])
        if self._httpx_jar is not None:
            names += [name for name in self._httpx_jar if name not in names]
        return names

    async def aclose(self) -> None:
        """Close the pool this transport opened itself (never the run's shared one)."""
        if self._own_pool and self._pool is not None:
            await self._pool.aclose()

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
        json_body: JSON = None,
        retries: int | None = None,
    ) -> T:
        """Send a request and parse its answer, retrying transient failures; raises ConnectorError."""
        policy = self.policy(retries)

        scrub = self.secrets.scrub

        async def attempt(number: int) -> T:
            try:
                return parse(await self._attempt(method, url, json_body))
            except Retryable as exc:
                exc.reason = scrub(exc.reason)
                log.debug(
                    "%s %s failed (%s), attempt %d of %d", method, scrub(url), exc.reason, number, policy.attempts
                )
                raise

        try:
            return await policy.run(attempt, rng=lambda: self._rng)
        except RetryableFailure as exc:
            suffix = f" (after {policy.attempts} attempts)" if policy.attempts > 1 else ""
            raise ConnectorError(f"{scrub(exc.reason)}{suffix}") from None
        except ConnectorError as exc:
            raise ConnectorError(scrub(str(exc))) from None

    async def _attempt(self, method: str, url: str, json_body: JSON) -> HTTPAnswer:
        """One request within the timeout; failures become Retryable or (for 4xx) ConnectorError."""
        self.attempts += 1
        content = None if json_body is None else wire_json.encode(json_body)
        as_json = json_body is not None and "Content-Type" not in self._request_headers
        client = self._httpx_client
        if client is None:
            assert self._pool is not None  # made in __init__ when the context hands in no client
            if self._pool.route(url, self.options.client).client == "lean":
                block = self._json_block if as_json else self._request_block
                return await self._attempt_pooled(method, url, block, content)
            client = self._pool.httpx_client()
        headers = self._json_headers if as_json else self._request_headers
        return await self._attempt_httpx(client, method, url, headers, content)

    async def _attempt_pooled(self, method: str, url: str, headers: bytes, content: bytes | None) -> HTTPAnswer:
        timeout = self.options.timeout_s
        limit = self.options.max_response_bytes
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange_pooled(method, url, headers, content, started)
        except TimeoutError:
            raise Retryable(f"timeout after {format_seconds(timeout)}") from None
        except InvalidURL:
            raise ConnectorError(f"invalid URL {url!r}") from None
        except ConnectFailed as exc:
            raise Retryable(f"cannot connect to {url} ({exc.reason})") from None
        except ReplyTooLarge:
            raise Retryable(f"reply over {format_size(limit)}") from None
        except (ConnectionLost, OSError):
            raise Retryable("connection reset") from None  # one stable reason, whatever the OS says

    async def _exchange_pooled(
        self, method: str, url: str, headers: bytes, content: bytes | None, started: float
    ) -> HTTPAnswer:
        assert self._pool is not None
        client = self._pool.client
        target = client.target(url)
        if self.keep_cookies and self._jar:
            cookie = self._jar.header(target)
            if cookie:
                headers += b"Cookie: " + cookie.encode("latin-1", "replace") + b"\r\n"
        reply = await client.request(method, target, headers, content, limit=self.options.max_response_bytes)
        if self.keep_cookies and reply.set_cookie:
            if self._jar is None:
                self._jar = SessionCookies()
            self._jar.update(reply.set_cookie, target)
        answer = HTTPAnswer(
            status=reply.status,
            body=self.secrets.scrub_bytes(reply.body),
            content_type=reply.header("content-type") or "",
            latency_s=time.perf_counter() - started,
            location=reply.header("location"),
        )
        return _checked(answer, reply.header("retry-after"))

    async def _attempt_httpx(
        self, client: httpx.AsyncClient, method: str, url: str, headers: dict[str, str], content: bytes | None
    ) -> HTTPAnswer:
        import httpx

        timeout = self.options.timeout_s
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange_httpx(client, method, url, headers, content, started)
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

    async def _exchange_httpx(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        headers: dict[str, str],
        content: bytes | None,
        started: float,
    ) -> HTTPAnswer:
        import httpx

        timeout = httpx.Timeout(self.options.timeout_s)
        request = httpx.Request(
            method, url, headers=headers, content=content, extensions={"timeout": timeout.as_dict()}
        )
        jar = None
        if self.keep_cookies:
            jar = self._httpx_jar = self._httpx_jar if self._httpx_jar is not None else httpx.Cookies()
            jar.set_cookie_header(request)
        response = await client.send(request, stream=True, follow_redirects=False)
        try:
            if jar is not None:
                jar.extract_cookies(response)
            _forget_cookies(client, response)
            body = await _read_limited_httpx(response, self.options.max_response_bytes)
        finally:
            await response.aclose()
        answer = HTTPAnswer(
            status=response.status_code,
            body=self.secrets.scrub_bytes(body),
            content_type=response.headers.get("content-type", ""),
            latency_s=time.perf_counter() - started,
            location=response.headers.get("location"),
        )
        return _checked(answer, response.headers.get("retry-after"))


def _checked(answer: HTTPAnswer, retry_after: str | None) -> HTTPAnswer:
    """The answer when its status is a success; 5xx and retryable 4xx are Retryable, other 4xx ConnectorError."""
    status = answer.status
    if status in RETRY_STATUSES or status >= 500:
        raise Retryable(f"HTTP {status}", parse_retry_after(retry_after))
    if status >= 400:
        snippet = answer.text().strip().replace("\n", " ")[:80]
        raise ConnectorError(f"HTTP {status}" + (f": {snippet}" if snippet else ""))
    if 300 <= status < 400:
        target = f" to {answer.location}" if answer.location else ""
        raise ConnectorError(f"HTTP {status}: redirected{target}, not followed (set crs.url to the final address)")
    return answer


def _over_limit(declared: str | None, limit: int) -> bool:
    return bool(declared and declared.isdigit() and int(declared) > limit)


async def _read_limited_httpx(response: httpx.Response, limit: int) -> bytes:
    """The body, reading at most `limit` bytes; more is a retryable 'reply over <limit>'."""
    if _over_limit(response.headers.get("content-length"), limit):
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
    import httpx

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
