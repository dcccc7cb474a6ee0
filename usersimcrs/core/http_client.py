"""The toolkit's HTTP/1.1 client, for LLM servers and CRSs: asyncio connections, llhttp's parser.

Why not aiohttp: on the real workload (docs/benchmarks.md, issue #22) aiohttp's per-request work
(request and response objects, connector bookkeeping, cookie parsing, a timer per request) was
2.5-5.5 ms of the toolkit's 11-13.5 ms of CPU per conversation, and importing it about 0.3 s of
start-up. Parsing replies is left to httptools (llhttp, the parser of Node.js and uvicorn); this
module writes requests, keeps idle keep-alive connections per event loop and host, and turns
failures into four exceptions. It does what the toolkit's callers need and no more: plain HTTP to
servers the user runs (no TLS: `https://` and proxied URLs go to httpx and the official clients, chosen
by `core/http_route.py`), no redirects (a 3xx is a reply like any other), no proxies, no cookie jar (the
CRS transport keeps one per conversation), no streaming; a reply is read whole, within a size limit.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import httptools

# without Accept-Encoding a server may use any coding (RFC 9110 12.5.3); these two the client inflates
ACCEPTED_ENCODINGS = {"Accept-Encoding": "gzip, deflate"}
MAX_HEAD_BYTES = 256_000  # status line and headers of one reply, at most (the size limit bounds the body)
KEEPALIVE_S = 15.0  # an idle connection older than this is closed rather than reused (aiohttp's default)
PATH_SAFE = "/?&=%:@!$'()*+,;~-._[]"  # kept as written; spaces, line breaks and non-ASCII are %-escaped
DNS_TTL_S = 10.0  # a host name's addresses are remembered this long per event loop (aiohttp's default)


class HTTPClientError(Exception):
    """A request that got no usable reply; `reason` is a short text for a failure record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidURL(HTTPClientError, ValueError):
    """A URL this client cannot send to (not http, no host, a bad port)."""


class ConnectFailed(HTTPClientError):
    """No connection: refused, unreachable, a name that does not resolve."""


class ConnectionLost(HTTPClientError):
    """The connection closed (or sent garbage) before the whole reply arrived."""


class ReplyTooLarge(HTTPClientError):
    """The reply's body is longer than the caller's limit (the connection is dropped, not drained)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"reply over {limit} bytes")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class Target:
    """A parsed URL, made once per URL text: where to connect and the request line's parts."""

    host: str
    port: int
    path: bytes  # as sent: path and query, %-escaped
    route: str  # the path alone, as cookie paths are matched against it
    host_line: bytes  # b"Host: ...\r\n"

    @property
    def key(self) -> tuple[str, int]:
        return (self.host, self.port)


def parse_target(url: str) -> Target:
    """`url` as a Target; InvalidURL for anything but an absolute http URL with a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidURL(f"invalid URL {url!r} ({exc})") from None
    if parts.scheme == "https":
        raise InvalidURL(f"invalid URL {url!r} (the lean client speaks plain http; https goes through httpx)")
    if parts.scheme != "http" or not parts.hostname:
        raise InvalidURL(f"invalid URL {url!r} (an http:// URL with a host is needed)")
    default = 80
    host = parts.hostname
    try:
        shown = f"[{host}]" if ":" in host else host.encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidURL(f"invalid URL {url!r} (a host name that cannot be encoded)") from None
    path = quote((parts.path or "/") + (f"?{parts.query}" if parts.query else ""), safe=PATH_SAFE)
    host_header = shown if port in (None, default) else f"{shown}:{port}"
    host_line = f"Host: {host_header}\r\n".encode("ascii")
    return Target(host, port or default, path.encode("ascii"), path.split("?", 1)[0], host_line)


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """Header lines for a request, checked once (a line break in a name or value would split the request)."""
    lines = []
    for name, value in headers.items():
        if any(c in name for c in ":\r\n ") or any(c in value for c in "\r\n"):
            raise ValueError(f"header {name!r} has a line break or a character not allowed in it")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode("utf-8")


class Reply:
    """Status, headers (lower-case names; a repeated header's values joined by ", "), Set-Cookie lines, body."""

    __slots__ = ("body", "headers", "set_cookie", "status")

    def __init__(self, status: int, headers: dict[str, str], set_cookie: list[str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.set_cookie = set_cookie
        self.body = body

    def header(self, name: str) -> str | None:
        """A header's value by name, in any case."""
        return self.headers.get(name.lower())


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection: the reply to the request in flight, fed to llhttp as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser: httptools.HttpResponseParser | None = None  # made with the connection, dropped with it
        self._waiter: asyncio.Future[Reply] | None = None
        self._limit = 0
        self._reset()

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._set_cookie: list[str] = []
        self._chunks: list[bytes] = []
        self._size = 0
        self._headers_done = False
        self._head_bytes = 0  # bytes received before the headers were complete
        self._status = 0
        self._framed = False  # the body's end is known (Content-Length or chunked), not the connection's close
        self._keep_alive = False

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._parser = httptools.HttpResponseParser(self)

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done() or self._parser is None:
            self.drop()  # bytes nobody asked for: the connection cannot be trusted with another request
            return
        if not self._headers_done:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:  # the parser would hold an endless status line or header
                self._fail(ConnectionLost(f"reply headers over {MAX_HEAD_BYTES} bytes"))
                return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionLost(f"malformed HTTP reply ({_short(exc)})"))

    def eof_received(self) -> bool:
        self._ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended()
        # the parser calls back into this object and the transport holds it: without these references a
        # closed connection is freed at once rather than by the cyclic collector (an HTTP/1.0 CRS closes
        # one per turn; at C = 128 their cycles made young collections take 40-60 ms each)
        self._parser = None
        self.transport = None

    def _ended(self) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done and not self._framed:  # a body that runs to the close (HTTP/1.0 without a length)
            self._finish()
        else:
            self._fail(ConnectionLost("connection reset"))

    # llhttp callbacks
    def on_message_begin(self) -> None:
        if self._waiter is None or self._waiter.done():
            self.drop()  # a second reply to one request: nothing more is read from this connection

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        if key == "set-cookie":
            self._set_cookie.append(text)
        known = self._headers.get(key)
        self._headers[key] = text if known is None else f"{known}, {text}"

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code() if self._parser is not None else 0
        length = self._headers.get("content-length")
        self._framed = length is not None or "chunked" in self._headers.get("transfer-encoding", "").lower()
        if length is not None and length.isdigit() and int(length) > self._limit:
            self._fail(ReplyTooLarge(self._limit))

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._limit:
            self._fail(ReplyTooLarge(self._limit))
            return
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        assert parser is not None  # called by the parser itself
        # an interim reply (100 Continue, 103 Early Hints): the reply itself follows
        if 100 <= self._status < 200 and self._status != 101:
            self._reset()
            return
        self._keep_alive = parser.should_keep_alive()
        self._finish()

    # the request in flight
    def send(self, data: bytes, limit: int) -> asyncio.Future[Reply]:
        """Write one request; the future gets its reply (or a ConnectionLost / ReplyTooLarge)."""
        if self.transport is None:
            raise ConnectionLost("connection closed")
        self._reset()
        self._limit = limit
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self._waiter

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed

    def _finish(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        body = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        try:
            body = _decoded(body, self._headers.get("content-encoding"), self._limit)
        except (zlib.error, ValueError) as exc:
            self._fail(ConnectionLost(f"malformed HTTP reply ({_short(exc)})"))
            return
        except ReplyTooLarge as exc:
            self._fail(exc)
            return
        waiter.set_result(Reply(self._status, self._headers, self._set_cookie, body))
        self._headers, self._set_cookie, self._chunks = {}, [], []  # the reply's now: nothing read later changes it

    def _fail(self, error: HTTPClientError) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.drop()

    def drop(self) -> None:
        """Close the connection; it is never reused."""
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _decoded(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body without its Content-Encoding (gzip or deflate), inflated to at most `limit` bytes: a small
    compressed body cannot grow past the caller's limit (a decompression bomb is ReplyTooLarge)."""
    if not encoding or encoding.lower() == "identity" or not body:
        return body
    kind = encoding.lower().strip()
    if kind in ("gzip", "x-gzip"):
        return _inflated(body, 47, limit)  # 47: a gzip or zlib header, found by zlib
    if kind == "deflate":
        try:
            return _inflated(body, 15, limit)
        except zlib.error:
            return _inflated(body, -15, limit)  # raw deflate, as some servers send it
    raise ValueError(f"unsupported Content-Encoding {encoding}")


def _inflated(body: bytes, wbits: int, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(body, limit + 1)
    if len(out) <= limit and not inflater.unconsumed_tail:
        out += inflater.flush()
    if len(out) > limit or inflater.unconsumed_tail:
        raise ReplyTooLarge(limit)
    return out


class _LoopState:
    """A client's connections and name lookups in one event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connections: int) -> None:
        self.loop = loop
        self.idle: dict[tuple[str, int], list[_Connection]] = {}
        self.addresses: dict[tuple[str, int], tuple[float, list[Any]]] = {}
        self.slots = asyncio.Semaphore(connections) if connections > 0 else None

    def close(self) -> None:
        for connections in self.idle.values():
            for connection in connections:
                try:
                    connection.drop()
                except RuntimeError:  # the loop is gone; its sockets go with it
                    pass
        self.idle.clear()


class HTTPClient:
    """Keep-alive connections per event loop and host, at most `connections` requests at once (0: no cap).

    A connection the server keeps alive is reused (the most recently used first); an HTTP/1.0 reply or
    `Connection: close` closes it, and one the server closed while it sat idle is not taken. A request
    is never sent twice by this client: one that fails (a server that closed the connection just as the
    request went out included) is the caller's to retry, so its retry and usage counts stay true. The
    state of a loop is made inside it and dropped when a later `asyncio.run` brings another loop.
    """

    def __init__(self, *, connections: int = 0, connect_timeout_s: float | None = None) -> None:
        self.connections = max(0, connections)
        self.connect_timeout_s = connect_timeout_s
        self._state: _LoopState | None = None
        self._targets: dict[str, Target] = {}

    def target(self, url: str) -> Target:
        """The parsed URL (remembered: a client talks to a handful of URLs)."""
        known = self._targets.get(url)
        if known is None:
            known = parse_target(url)
            if len(self._targets) < 1024:
                self._targets[url] = known
        return known

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            if state is not None:
                state.close()
            state = self._state = _LoopState(loop, self.connections)
        return state

    async def request(
        self, method: str, url: str | Target, headers: bytes, body: bytes | None = None, *, limit: int = 1 << 30
    ) -> Reply:
        """Send one request (`headers` from `encode_headers`) and read the whole reply, at most `limit` bytes."""
        target = url if isinstance(url, Target) else self.target(url)
        head = b"%s %s HTTP/1.1\r\n%s%s" % (method.encode("ascii"), target.path, target.host_line, headers)
        if body is not None:
            data = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(body), body)
        else:
            data = head + b"\r\n"
        state = self._loop_state()
        if state.slots is None:
            return await self._exchange(state, target, data, limit)
        async with state.slots:
            return await self._exchange(state, target, data, limit)

    async def _exchange(self, state: _LoopState, target: Target, data: bytes, limit: int) -> Reply:
        connection = self._idle_connection(state, target) or await self._connect(state, target)
        try:
            reply = await connection.send(data, limit)
        except BaseException:  # a failure, timeout or cancellation mid-reply: the connection cannot be reused
            connection.drop()
            raise
        if connection.reusable:
            connection.idle_since = time.monotonic()
            state.idle.setdefault(target.key, []).append(connection)
        else:
            connection.drop()
        return reply

    def _idle_connection(self, state: _LoopState, target: Target) -> _Connection | None:
        pool = state.idle.get(target.key)
        if not pool:
            return None
        now = time.monotonic()
        while pool:
            connection = pool.pop()
            if not connection.closed and now - connection.idle_since < KEEPALIVE_S:
                return connection
            connection.drop()
        return None

    async def _connect(self, state: _LoopState, target: Target) -> _Connection:
        addresses = await self._addresses(state, target)
        failure: OSError | None = None
        for family, address in addresses:
            try:
                if self.connect_timeout_s is not None:
                    async with asyncio.timeout(self.connect_timeout_s):
                        return await self._open(state, family, address)
                return await self._open(state, family, address)
            except TimeoutError:
                failure = TimeoutError(f"connect timed out after {self.connect_timeout_s:g}s")
            except OSError as exc:
                failure = exc
        raise ConnectFailed(_os_reason(failure))

    async def _open(self, state: _LoopState, family: int, address: Any) -> _Connection:
        _, connection = await state.loop.create_connection(_Connection, host=address[0], port=address[1], family=family)
        return connection

    async def _addresses(self, state: _LoopState, target: Target) -> list[tuple[int, Any]]:
        """Where the host is: an IP literal as it is, a name looked up (remembered for DNS_TTL_S)."""
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                socket.inet_pton(family, target.host)
            except OSError:
                continue
            return [(family, (target.host, target.port))]
        key = (target.host, target.port)
        known = state.addresses.get(key)
        now = time.monotonic()
        if known is not None and now - known[0] < DNS_TTL_S:
            return known[1]
        try:
            infos = await state.loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConnectFailed(_os_reason(exc)) from None
        found: list[tuple[int, Any]] = [(info[0], info[4]) for info in infos]
        if not found:
            raise ConnectFailed(f"no address for {target.host}")
        state.addresses[key] = (now, found)
        return found

    async def aclose(self) -> None:
        """Close the idle connections of the running loop (a client of another loop is just let go)."""
        self.let_go()

    def let_go(self) -> None:
        """Drop every idle connection and forget the loop's state."""
        if self._state is not None:
            self._state.close()
            self._state = None


def _os_reason(exc: BaseException | None) -> str:
    """The OS's words for a failed connect ("Connection refused"), the same under asyncio and uvloop."""
    if exc is None:
        return "no address to connect to"
    if isinstance(exc, OSError) and not isinstance(exc, socket.gaierror) and exc.errno:
        return os.strerror(exc.errno)
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(reason)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:80]


class SessionCookies:
    """The cookies one conversation holds (RFC 6265's host-only cookies): set by a host, sent back to it.

    A CRS keeps its per-conversation state in a cookie (CRS Arena's signed `session`), so each
    conversation has a jar of its own and no cookie reaches another conversation. Honoured: Path,
    Max-Age and Expires (a cookie past them is dropped). Domain is not widened: a cookie goes back only
    to the host that set it, which is all a conversation with one CRS needs.
    """

    def __init__(self) -> None:
        self._cookies: dict[tuple[str, str, str], tuple[str, float | None]] = {}  # (host, path, name) -> value, expiry

    def __iter__(self) -> Iterator[str]:
        return iter(sorted({name for _, _, name in self._cookies}))

    def __bool__(self) -> bool:
        return bool(self._cookies)

    def update(self, lines: list[str], target: Target) -> None:
        """Take the Set-Cookie lines of a reply from `target`."""
        now = time.time()
        for line in lines:
            parsed = _set_cookie(line, target, now)
            if parsed is None:
                continue
            key, value, expires = parsed
            if expires is not None and expires <= now:
                self._cookies.pop(key, None)
            else:
                self._cookies[key] = (value, expires)

    def header(self, target: Target) -> str | None:
        """The Cookie header's value for a request to `target`, or None when no cookie applies."""
        if not self._cookies:
            return None
        now = time.time()
        path = target.route
        pairs = [
            (len(cookie_path), f"{name}={value}")
            for (host, cookie_path, name), (value, expires) in self._cookies.items()
            if host == target.host and _path_matches(path, cookie_path) and (expires is None or expires > now)
        ]
        pairs.sort(key=lambda pair: -pair[0])  # longer paths first, as RFC 6265 asks
        return "; ".join(pair for _, pair in pairs) or None


def _set_cookie(line: str, target: Target, now: float) -> tuple[tuple[str, str, str], str, float | None] | None:
    """((host, path, name), value, expiry) of one Set-Cookie line; None for one without a name=value pair."""
    pair, *attributes = line.split(";")
    name, sep, value = pair.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        return None
    path: str | None = None
    expires: float | None = None
    max_age: float | None = None
    for attribute in attributes:
        key, _, text = attribute.partition("=")
        key, text = key.strip().lower(), text.strip()
        if key == "path" and text.startswith("/"):
            path = text
        elif key == "max-age" and text.lstrip("-").isdigit():
            max_age = now + int(text)
        elif key == "expires":
            expires = _http_date(text)
    if path is None:  # RFC 6265 5.1.4: the request path up to its last "/"
        path = target.route[: target.route.rfind("/")] or "/"
    return (target.host, path, name), value, max_age if max_age is not None else expires


def _http_date(text: str) -> float | None:
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(text).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _path_matches(request_path: str, cookie_path: str) -> bool:
    if request_path == cookie_path:
        return True
    if request_path.startswith(cookie_path):
        return cookie_path.endswith("/") or request_path[len(cookie_path)] == "/"
    return False
