"""The toolkit's HTTP client (`usersimcrs.core.http_client`) against a real HTTP server in a thread.

The server is the standard library's `ThreadingHTTPServer` with routes that behave as servers in the
field do: keep-alive and HTTP/1.0 replies, chunked and gzip bodies, a body that runs to the close,
cookies with paths and expiry, a server that closes an idle connection, one that sends garbage or
hangs up. Every request records the client's port, so connection reuse is counted, not assumed.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httptools
import pytest

from usersimcrs.core.http_client import (
    ConnectFailed,
    ConnectionLost,
    HTTPClient,
    InvalidURL,
    ReplyTooLarge,
    SessionCookies,
    _Connection,
    encode_headers,
    parse_target,
)
from usersimcrs.engine.loop import run_coroutine

HEADERS = encode_headers({"User-Agent": "usersimcrs-test", "Accept": "application/json"})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _record(self, body: bytes) -> None:
        self.server.seen.append((self.path, self.client_address[1], dict(self.headers), body))  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self._route(b"")

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        self._route(self.rfile.read(length))

    def _route(self, body: bytes) -> None:
        self._record(body)
        path = self.path.split("?", 1)[0]
        if path == "/echo":
            self._send(200, json.dumps({"body": body.decode(), "path": self.path}).encode())
        elif path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b'{"parts": ', b"[1, 2, ", b"3]}"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/gzip":
            self._send(200, gzip.compress(b'{"zipped": true}'), {"Content-Encoding": "gzip"})
        elif path == "/bomb":  # 2 kB on the wire, 2 MB inflated
            self._send(200, gzip.compress(b"0" * 2_000_000), {"Content-Encoding": "gzip"})
        elif path == "/early-hints":  # an interim reply before the real one
            self.wfile.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            self._send(200, b'{"after": "hints"}')
        elif path == "/two-replies":  # one request, two replies: the second must change nothing
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Which: first\r\n\r\n{}"
                b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nX-Which: second\r\n\r\n"
            )
        elif path == "/to-close":  # HTTP/1.0, no length: the body ends with the connection
            self.wfile.write(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, up to the close")
            self.close_connection = True
        elif path == "/big":
            self._send(200, b"x" * 200_000)
        elif path == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(50):
                self.wfile.write(b"%x\r\n%s\r\n" % (4096, b"y" * 4096))
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/cookies":
            self.send_response(200)
            self.send_header("Set-Cookie", "session=abc.def; HttpOnly; Path=/")
            self.send_header("Set-Cookie", "scoped=1; Path=/cookies")
            self.send_header("Set-Cookie", "gone=1; Max-Age=0")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
        elif path == "/idle-close":  # keep-alive reply, then the server drops the idle connection
            self._send(200, b"{}")
            self.wfile.flush()
            time.sleep(0.05)
            self.close_connection = True
        elif path == "/garbage":
            self.wfile.write(b"this is not HTTP at all\r\n\r\n")
            self.close_connection = True
        elif path == "/endless-header":  # a hostile server: one header that never ends
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Pad: ")
            for _ in range(100):
                self.wfile.write(b"a" * 10_000)
            self.close_connection = True
        elif path == "/hang-up":
            self.close_connection = True
        elif path == "/slow":
            time.sleep(1.0)
            self._send(200, b"{}")
        elif path == "/redirect":
            self._send(302, b"", {"Location": "http://elsewhere.invalid/"})
        else:
            self._send(404, b"not here")


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up on a hostile reply breaks the handler's pipe: expected here


@pytest.fixture
def server():
    httpd = QuietServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def url(httpd: ThreadingHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}{path}"


def ports(httpd: ThreadingHTTPServer) -> list[int]:
    return [port for _, port, _, _ in httpd.seen]  # type: ignore[attr-defined]


def test_keep_alive_connections_are_reused_and_bodies_of_every_framing_are_read(server):
    async def main() -> list[bytes]:
        client = HTTPClient()
        bodies = []
        for path in ("/echo?q=1", "/chunked", "/gzip", "/echo"):
            reply = await client.request("GET", url(server, path), HEADERS)
            assert reply.status == 200
            bodies.append(reply.body)
        posted = await client.request("POST", url(server, "/echo"), HEADERS, b'{"a": 1}')
        bodies.append(posted.body)
        await client.aclose()
        return bodies

    bodies = asyncio.run(main())
    assert json.loads(bodies[0]) == {"body": "", "path": "/echo?q=1"}
    assert json.loads(bodies[1]) == {"parts": [1, 2, 3]}
    assert json.loads(bodies[2]) == {"zipped": True}
    assert json.loads(bodies[4])["body"] == '{"a": 1}'
    assert len(set(ports(server))) == 1  # five requests, one connection
    sent = server.seen[4][2]
    assert sent["Content-Length"] == "8" and sent["Host"] == f"127.0.0.1:{server.server_address[1]}"


def test_a_body_that_runs_to_the_close_is_read_whole_and_the_connection_is_not_kept(server):
    async def main() -> tuple[int, bytes, int]:
        client = HTTPClient()
        reply = await client.request("GET", url(server, "/to-close"), HEADERS)
        second = await client.request("GET", url(server, "/echo"), HEADERS)
        assert second.status == 200
        idle = sum(len(v) for v in client._state.idle.values())  # noqa: SLF001
        await client.aclose()
        return reply.status, reply.body, idle

    status, body, idle = asyncio.run(main())
    assert (status, body) == (200, b"all of it, up to the close")
    assert len(set(ports(server))) == 2 and idle == 1  # a new connection after the HTTP/1.0 reply


@pytest.mark.parametrize("kind", ["asyncio", "uvloop"])
def test_closed_connections_are_freed_at_once_not_left_to_the_cyclic_collector(server, kind):
    """An HTTP/1.0 CRS closes a connection every turn: the parser's callbacks and the transport must not
    keep a closed connection in a reference cycle (at C = 128 such cycles made every young collection
    of the cyclic GC take 40-60 ms). With the collector off, nothing of the closed connections is left."""
    if kind == "uvloop":
        pytest.importorskip("uvloop")

    async def main() -> None:
        client = HTTPClient()
        for path in ("/to-close", "/to-close", "/echo"):
            assert (await client.request("GET", url(server, path), HEADERS)).status == 200
        await client.aclose()
        await asyncio.sleep(0.05)  # the loop reports each close (connection_lost)

    gc.collect()
    gc.disable()
    try:
        run_coroutine(main(), kind)
        left = [type(o).__name__ for o in gc.get_objects() if type(o) in (_Connection, httptools.HttpResponseParser)]
    finally:
        gc.enable()
    assert left == []


@pytest.mark.parametrize("noticed", [True, False])
def test_an_idle_connection_the_server_dropped_is_not_reused_and_no_request_is_sent_twice(server, noticed):
    """Noticed: the loop saw the close while the connection sat idle, so a new connection is made. Not
    noticed (the loop was busy when the server closed it): the request goes out on it and fails as a lost
    connection, for the caller's retry (which counts it); the client never resends a request by itself."""

    async def main() -> int | str:
        client = HTTPClient()
        await client.request("GET", url(server, "/idle-close"), HEADERS)
        if noticed:
            await asyncio.sleep(0.3)
        else:
            time.sleep(0.3)  # blocks the loop: the server's close is read only after the next request is sent
        try:
            reply = await client.request("POST", url(server, "/echo"), HEADERS, b"{}")
        except ConnectionLost as exc:
            return exc.reason
        finally:
            await client.aclose()
        return reply.status

    assert asyncio.run(main()) == (200 if noticed else "connection reset")
    assert len(set(ports(server))) == (2 if noticed else 1)


def test_replies_over_the_limit_are_refused_whether_their_length_is_declared_or_not(server):
    async def main() -> list[str]:
        client = HTTPClient()
        reasons = []
        for path in ("/big", "/big-chunked", "/bomb"):  # the bomb is small on the wire, large inflated
            with pytest.raises(ReplyTooLarge) as caught:
                await client.request("GET", url(server, path), HEADERS, limit=100_000)
            reasons.append(caught.value.reason)
        fine = await client.request("GET", url(server, "/big"), HEADERS, limit=200_000)
        assert len(fine.body) == 200_000
        await client.aclose()
        return reasons

    assert asyncio.run(main()) == ["reply over 100000 bytes"] * 3


def test_an_interim_reply_is_skipped_and_a_second_reply_to_one_request_changes_nothing(server):
    async def main() -> tuple[int, bytes, int, str | None, int]:
        client = HTTPClient()
        hinted = await client.request("GET", url(server, "/early-hints"), HEADERS)
        doubled = await client.request("GET", url(server, "/two-replies"), HEADERS)
        idle = sum(len(v) for v in client._state.idle.values())  # noqa: SLF001
        await client.aclose()
        return hinted.status, hinted.body, doubled.status, doubled.header("X-Which"), idle

    status, body, doubled, which, idle = asyncio.run(main())
    assert (status, body) == (200, b'{"after": "hints"}')
    assert (doubled, which, idle) == (200, "first", 0)  # the connection that sent two replies is not kept


def test_garbage_a_hang_up_an_endless_header_and_a_refused_port_are_short_failures(server):
    import socket

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()

    async def main() -> list[tuple[type, str]]:
        client = HTTPClient()
        out = []
        targets = ("/garbage", "/hang-up", "/endless-header")
        for target in (*(url(server, t) for t in targets), f"http://127.0.0.1:{dead}/"):
            with pytest.raises((ConnectionLost, ConnectFailed)) as caught:
                await client.request("GET", target, HEADERS)
            out.append((type(caught.value), caught.value.reason))
        after = await client.request("GET", url(server, "/echo"), HEADERS)  # the client is still fine
        assert after.status == 200
        await client.aclose()
        return out

    (garbage, hang_up, endless, refused) = asyncio.run(main())
    assert endless == (ConnectionLost, "reply headers over 256000 bytes")
    assert garbage[0] is ConnectionLost and garbage[1].startswith("malformed HTTP reply")
    assert hang_up == (ConnectionLost, "connection reset")
    assert refused == (ConnectFailed, "Connection refused")


def test_a_timed_out_request_leaves_no_half_read_connection_behind(server):
    async def main() -> tuple[int, int]:
        client = HTTPClient()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await client.request("GET", url(server, "/slow"), HEADERS)
        idle = sum(len(v) for v in client._state.idle.values())  # noqa: SLF001
        reply = await client.request("GET", url(server, "/echo"), HEADERS)
        await client.aclose()
        return idle, reply.status

    idle, status = asyncio.run(main())
    assert idle == 0 and status == 200
    assert len(set(ports(server))) == 2  # the late reply of /slow can never be read as /echo's


def test_the_connection_cap_holds_and_a_second_event_loop_starts_afresh(server):
    client = HTTPClient(connections=3)

    async def burst() -> int:
        replies = await asyncio.gather(*(client.request("GET", url(server, "/echo"), HEADERS) for _ in range(12)))
        assert all(r.status == 200 for r in replies)
        return sum(len(v) for v in client._state.idle.values())  # noqa: SLF001

    assert asyncio.run(burst()) <= 3
    assert asyncio.run(burst()) <= 3  # another loop: the old loop's connections are let go
    assert len(set(ports(server))) <= 6
    client.let_go()


def test_a_redirect_is_a_reply_not_followed(server):
    async def main() -> tuple[int, str | None]:
        client = HTTPClient()
        reply = await client.request("GET", url(server, "/redirect"), HEADERS)
        await client.aclose()
        return reply.status, reply.header("Location")

    assert asyncio.run(main()) == (302, "http://elsewhere.invalid/")
    assert [path for path, *_ in server.seen] == ["/redirect"]


def test_session_cookies_keep_paths_and_expiry_and_go_back_only_to_their_host(server):
    jar = SessionCookies()

    async def main() -> None:
        client = HTTPClient()
        reply = await client.request("GET", url(server, "/cookies"), HEADERS)
        jar.update(reply.set_cookie, client.target(url(server, "/cookies")))
        for path in ("/echo", "/cookies/more"):
            cookie = jar.header(client.target(url(server, path)))
            headers = HEADERS + (f"Cookie: {cookie}\r\n".encode() if cookie else b"")
            await client.request("GET", url(server, path), headers)
        await client.aclose()

    asyncio.run(main())
    assert list(jar) == ["scoped", "session"]  # Max-Age=0 removed "gone"
    sent = [headers.get("Cookie") for _, _, headers, _ in server.seen[1:]]
    assert sent == ["session=abc.def", "scoped=1; session=abc.def"]  # the longer path first
    assert jar.header(parse_target("http://example.org/cookies")) is None  # another host gets nothing
    jar.update(["session=; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Path=/"], parse_target(url(server, "/")))
    assert list(jar) == ["scoped"]


def test_urls_and_headers_are_checked_before_anything_is_sent():
    target = parse_target("http://[::1]:8080/a b/ü?x=1")
    assert (target.host, target.port, target.path) == ("::1", 8080, b"/a%20b/%C3%BC?x=1")
    assert target.host_line == b"Host: [::1]:8080\r\n"
    assert parse_target("http://api.example.org/v1").host_line == b"Host: api.example.org\r\n"
    assert parse_target("http://api.example.org").port == 80 and parse_target("http://h/").path == b"/"
    for bad in ("ftp://h/", "http:///path", "http://h:99999/", "127.0.0.1:8000"):
        with pytest.raises(InvalidURL):
            parse_target(bad)
    with pytest.raises(InvalidURL, match="speaks plain http; https goes through httpx"):
        parse_target("https://api.example.org/v1")  # no TLS here: core/http_route.py sends https to httpx
    with pytest.raises(ValueError, match="line break"):
        encode_headers({"X-Token": "abc\r\nInjected: yes"})


UVICORN_APP = """
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


async def echo(request):
    body = await request.body()
    return JSONResponse({"port": request.client.port, "body": body.decode(), "encoding": request.headers.get("accept-encoding")})


async def stream(request):
    async def parts():
        for i in range(3):
            yield b'{"part": %d}\\n' % i
    return StreamingResponse(parts(), media_type="application/x-ndjson")


async def large(request):
    return JSONResponse({"port": request.client.port, "text": "recommend " * 5000})


app = Starlette(
    routes=[Route("/echo", echo, methods=["POST"]), Route("/stream", stream), Route("/large", large)],
    middleware=[Middleware(GZipMiddleware, minimum_size=500)],
)
"""


@pytest.fixture
def uvicorn_server(tmp_path: Path):
    """A production ASGI server (uvicorn, as vLLM and many CRS wrappers run) in a process of its own,
    closing idle keep-alive connections after 1 s."""
    import socket
    import sys

    pytest.importorskip("uvicorn", reason="uvicorn comes with the studio extra")
    (tmp_path / "asgi_app.py").write_text(UVICORN_APP)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "asgi_app:app",
        "--port",
        str(port),
        "--timeout-keep-alive",
        "1",
        "--ws",
        "none",
    ]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as attempt:
            if attempt.connect_ex(("127.0.0.1", port)) == 0:
                break
        if process.poll() is not None:
            pytest.fail(f"uvicorn did not start: {process.stderr.read().decode()[-500:]}")  # type: ignore[union-attr]
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


def test_against_uvicorn_keep_alive_chunked_gzip_and_its_idle_timeout(uvicorn_server):
    async def main() -> tuple[list[dict], bytes, dict, dict]:
        client = HTTPClient()
        headers = encode_headers({"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate"})
        first = [json.loads((await client.request("POST", f"{uvicorn_server}/echo", headers, b"{}")).body)]
        first.append(json.loads((await client.request("POST", f"{uvicorn_server}/echo", headers, b'{"n": 2}')).body))
        streamed = await client.request("GET", f"{uvicorn_server}/stream", headers)
        zipped = await client.request("GET", f"{uvicorn_server}/large", headers)
        assert zipped.header("Content-Encoding") == "gzip" and len(zipped.body) > 50_000
        await asyncio.sleep(1.6)  # past uvicorn's keep-alive timeout: it has closed the idle connection
        after = json.loads((await client.request("POST", f"{uvicorn_server}/echo", headers, b"{}")).body)
        await client.aclose()
        return first, streamed.body, json.loads(zipped.body), after

    first, streamed, large, after = asyncio.run(main())
    assert first[0]["port"] == first[1]["port"] == large["port"]  # one kept-alive connection
    assert first[1]["body"] == '{"n": 2}' and first[0]["encoding"] == "gzip, deflate"
    assert streamed == b'{"part": 0}\n{"part": 1}\n{"part": 2}\n'  # chunked on the wire
    assert large["text"].startswith("recommend recommend")
    assert after["port"] != first[0]["port"]  # a new connection, no failed request
