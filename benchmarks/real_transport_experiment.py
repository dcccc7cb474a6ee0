"""Experiment behind docs/benchmarks.md (issue #22, "What is left"): the real workload with both HTTP
paths, the LLM client (`LeanHTTP.post`) and the CRS transport (`HTTPTransport._exchange_pooled`),
swapped for a minimal asyncio HTTP/1.x client, to size how much of the toolkit's CPU per conversation
is its HTTP client's per-request work (aiohttp's, when this experiment was written; the toolkit's own
client on llhttp since). Not used by the toolkit; run it by hand::

    python -m benchmarks.real_transport_experiment --rounds 2   # the toolkit's client and the minimal one, alternated

The minimal client keeps idle keep-alive connections per event loop and host (last in, first out),
closes a connection the server answers with HTTP/1.0 or `Connection: close`, writes each request in
one write, and reads `Content-Length` bodies or a body up to the close. The CRS side keeps its
cookies as `name=value` pairs per conversation. It has no TLS, redirects, chunked bodies, compression,
timeouts of its own, size limit or error mapping: enough for the test servers, not for a product. The
conversations it produces are the same (checked against the toolkit path's dialogues.jsonl).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.real_workload import LATENCY_MS, measured_run, run_figures
from benchmarks.reference import reference_cpu_s
from benchmarks.scenarios import timed_run
from benchmarks.server import crs_server, llm_server
from benchmarks.setups import real_crs_options, real_workload_config
from crs_connectors import transport
from usersimcrs.core import wire_json
from usersimcrs.core.http_client import Reply
from usersimcrs.llm.backends import lean_http

RawReply = tuple[int, dict[str, str], list[str], bytes]


class _Connection(asyncio.Protocol):
    """One HTTP/1.x connection: the answer to the request in flight, parsed when complete."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[RawReply, bool]] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._answer()

    def eof_received(self) -> bool:
        self.closed = True
        self._answer()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._answer()

    def _answer(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if self.closed:
                waiter.set_exception(ConnectionError("connection closed before the answer"))
            return
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for line in lines[1:]:
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "set-cookie":
                cookies.append(value.strip())
            headers[name.strip().title()] = value.strip()
        start, length = end + 4, headers.get("Content-Length")
        if length is not None:
            if len(self.buffer) - start < int(length):
                return
            body = bytes(self.buffer[start : start + int(length)])
            del self.buffer[: start + int(length)]
        elif not self.closed:
            return
        else:
            body = bytes(self.buffer[start:])
            self.buffer.clear()
        close = lines[0].startswith(b"HTTP/1.0") or headers.get("Connection", "").lower() == "close"
        waiter.set_result(((int(lines[0].split(b" ", 2)[1]), headers, cookies, body), close))


class MinimalClient:
    """Requests over idle keep-alive connections per host (a new one when none is idle)."""

    def __init__(self) -> None:
        self.idle: dict[tuple[str, int], list[_Connection]] = {}

    async def request(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> RawReply:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        loop = asyncio.get_running_loop()
        pool = self.idle.setdefault((host, port), [])
        connection = None
        while pool and connection is None:
            candidate = pool.pop()
            connection = None if candidate.closed else candidate
        if connection is None:
            _, connection = await loop.create_connection(_Connection, host, port)
        lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", *(f"{k}: {v}" for k, v in headers.items())]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        connection.waiter = loop.create_future()
        assert connection.transport is not None
        connection.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        reply, close = await connection.waiter
        connection.waiter = None
        if close or connection.closed:
            connection.transport.close()
        else:
            pool.append(connection)
        return reply


def install() -> None:
    """Swap both HTTP paths of this process for `MinimalClient` (one per event loop)."""
    clients: dict[int, MinimalClient] = {}

    def client() -> MinimalClient:
        return clients.setdefault(id(asyncio.get_running_loop()), MinimalClient())

    async def post(self: lean_http.LeanHTTP, url: str, payload: dict[str, Any]) -> Reply:
        status, headers, _, body = await client().request("POST", url, dict(self.headers), wire_json.encode(payload))
        return Reply(status, {k.lower(): v for k, v in headers.items()}, [], body)

    async def exchange(
        self: transport.HTTPTransport,
        method: str,
        url: str,
        headers_block: bytes,
        content: bytes | None,
        started: float,
    ) -> transport.HTTPAnswer:
        headers = self._request_headers if content is None else self._json_headers  # noqa: SLF001
        jar: dict[str, str] = self._jar or {}
        if self.keep_cookies and jar:
            headers = {**headers, "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
        status, reply_headers, cookies, body = await client().request(method, url, headers, content)
        if self.keep_cookies and cookies:
            jar = dict(jar)
            for cookie in cookies:
                name, _, value = cookie.split(";", 1)[0].partition("=")
                jar[name.strip()] = value.strip()
            self._jar = jar
        answer = transport.HTTPAnswer(
            status=status,
            body=self.secrets.scrub_bytes(body),
            content_type=reply_headers.get("Content-Type", ""),
            latency_s=time.perf_counter() - started,
            location=reply_headers.get("Location"),
        )
        return transport._checked(answer, reply_headers.get("Retry-After"))  # noqa: SLF001 - the same check

    lean_http.LeanHTTP.post = post  # type: ignore[method-assign]
    transport.HTTPTransport._exchange_pooled = exchange  # type: ignore[method-assign,assignment]  # noqa: SLF001


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--conversations", type=int, default=1_024)
    parser.add_argument(
        "--rounds", type=int, default=1, help="the toolkit's client, then the minimal one, this many times"
    )
    parser.add_argument("--client", choices=("toolkit", "minimal"), help="only this one (a process per client)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-transport-"))
    clients = [args.client] if args.client else ["toolkit", "minimal"]
    if args.client is None and args.rounds:
        # the swap is for the whole process: each measurement runs in a child of its own
        import subprocess
        import sys

        for _ in range(args.rounds):
            for name in clients:
                command = [sys.executable, "-m", "benchmarks.real_transport_experiment", "--client", name]
                command += ["--concurrency", str(args.concurrency), "--conversations", str(args.conversations)]
                subprocess.run(command, check=True)
        return 0
    if args.client == "minimal":
        install()
    with (
        llm_server(LATENCY_MS, fixed_booleans=False) as llm,
        crs_server("ievalm", *real_crs_options()) as crs,
    ):
        timed_run(real_workload_config(llm, crs, conversations=16, concurrency=8), work / "warm-up")  # first-use costs
        config = real_workload_config(llm, crs, conversations=args.conversations, concurrency=args.concurrency)
        figures, extra = measured_run(config, work / "run", llm, crs)
        row = run_figures(figures, args.concurrency, LATENCY_MS / 1000, extra.pop("servers"))
    keys = ("cpu_ms_per_conversation", "cpu_ms_per_llm_call", "server_cpu_ms_per_conversation", "efficiency")
    shown = {key: row[key] for key in keys}
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(json.dumps({"client": args.client, **shown, "load_average": load, "machine_speed_s": reference_cpu_s()}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
