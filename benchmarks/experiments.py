"""The one-off experiments behind docs/benchmarks.md, in one module (the harness runs the first as R1-floor).

    python -m benchmarks.experiments floor --rounds 3             # issue #22, sixth round
    python -m benchmarks.experiments minimal-client --rounds 2    # issue #22, second and third rounds
    python -m benchmarks.experiments profile-shares prof.txt      # "Where the time went" (both workloads)

- `floor`: the CPU floor of the real workload's HTTP traffic beside the whole toolkit's CPU on the same
  servers, alternated, medians of the rounds. A short run records every request the toolkit sends; the
  floor replays them, per conversation six LLM requests (keep-alive) each followed by one CRS request
  (HTTP/1.0: a new connection each), with the toolkit's own HTTP client and a JSON decode of each reply
  and nothing else (no simulator, prompts, parsing, title resolution, records, retries or timeouts).
  Its CPU per conversation is what any toolkit in Python pays for the twelve exchanges over asyncio on
  this machine (the kernel's loopback work included); its efficiency is the most a toolkit doing that
  alone reaches with the servers on the same cores. `usersimcrs bench` reports it as R1-floor(-conv).
- `minimal-client`: the real workload with both HTTP paths, the LLM client (`LeanHTTP.post`) and the CRS
  transport (`HTTPTransport._exchange_pooled`), swapped for a minimal asyncio HTTP/1.x client, alternated
  with the toolkit's own client (a process per measurement: the swap is for the whole process), to size
  the toolkit's CPU per conversation that is its HTTP client's per-request work (aiohttp's when first
  run; the toolkit's own client on llhttp since). The minimal client keeps idle keep-alive connections
  per event loop and host (last in, first out), closes a connection the server answers with HTTP/1.0 or
  `Connection: close`, writes each request in one write, reads `Content-Length` bodies or a body up to
  the close, and keeps CRS cookies as `name=value` pairs per conversation: no TLS, redirects, chunked
  bodies, compression, timeouts, size limit or error mapping; enough for the test servers, not a product.
- `profile-shares`: the shares of a py-spy raw profile per component (a sample, a whole stack, goes to
  the first component whose marker occurs in it, in the order of COMPONENTS; start-up is counted but
  left out of the shares); the profile comes from::

      py-spy record -r 250 --format raw -o prof.txt -- python -m benchmarks.real_workload --concurrency 128

None is used by the toolkit. Dropped: `transport_experiment.py` (B1 with the openai backend's transport
swapped for a minimal client; no doc or command used it any more; last at commit 0a5803a).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.real_workload import LATENCY_MS, measured_run, real_servers, run_figures
from benchmarks.reference import machine_speed, reference_cpu_s
from benchmarks.server import ServedURL
from benchmarks.setups import REAL_TURNS, real_workload_config
from benchmarks.timing import load_average, median_figures, timed_run
from crs_connectors import transport
from usersimcrs.core import wire_json
from usersimcrs.core.http_client import HTTPClient, Reply, Target
from usersimcrs.engine.loop import run_coroutine
from usersimcrs.llm.backends import lean_http

# --------------------------------------------------------------------------- floor: the HTTP exchanges alone


@dataclass(frozen=True)
class Exchange:
    """One request as the toolkit sent it."""

    method: str
    target: Target
    headers: bytes
    body: bytes | None


@contextmanager
def recorded_requests(into: list[Exchange]) -> Iterator[None]:
    """Append every request the toolkit's HTTP client sends, while the block runs, to `into`."""
    original = HTTPClient.request

    async def request(
        self: HTTPClient, method: str, url: str | Target, headers: bytes, body: bytes | None = None, **kw: Any
    ) -> Any:
        into.append(Exchange(method, url if isinstance(url, Target) else self.target(url), headers, body))
        return await original(self, method, url, headers, body, **kw)

    HTTPClient.request = request  # type: ignore[method-assign]
    try:
        yield
    finally:
        HTTPClient.request = original  # type: ignore[method-assign]


def record_exchanges(
    llm: ServedURL, crs: ServedURL, work: Path, conversations: int = 8
) -> tuple[list[Exchange], list[Exchange]]:
    """The LLM requests and the CRS requests of a short real-workload run, in the order they were sent."""
    sent: list[Exchange] = []
    with recorded_requests(sent):
        figures = timed_run(real_workload_config(llm, crs, conversations=conversations, concurrency=4), work)
    if figures.failed:  # a replay of a failing run's requests would time the failure, not the workload
        raise RuntimeError(f"{figures.failed} conversation(s) of the recording run failed; see {work}")
    llm_port = urlsplit(llm).port
    llm_sent = [x for x in sent if x.target.port == llm_port]
    crs_sent = [x for x in sent if x.target.port != llm_port]
    if not llm_sent or not crs_sent:
        raise RuntimeError("the recording run sent no LLM or no CRS request")
    return llm_sent, crs_sent


@dataclass(frozen=True)
class FloorFigures:
    """What the replay cost: wall time, the process's CPU (all and user mode), the servers' CPU."""

    conversations: int
    wall_s: float
    cpu_s: float
    cpu_user_s: float
    servers_cpu_s: float | None


async def _replay(
    llm_sent: list[Exchange], crs_sent: list[Exchange], conversations: int, concurrency: int
) -> tuple[float, float, float]:
    client = HTTPClient()
    slots = asyncio.Semaphore(concurrency)

    async def conversation(index: int) -> None:
        async with slots:
            for turn in range(REAL_TURNS):
                for sent in (llm_sent, crs_sent):
                    x = sent[(index * REAL_TURNS + turn) % len(sent)]
                    reply = await client.request(x.method, x.target, x.headers, x.body)
                    if reply.status != 200:  # a floor of failed requests would be no floor
                        raise RuntimeError(f"replayed request to port {x.target.port} got HTTP {reply.status}")
                    wire_json.decode(reply.body)

    cpu, user, started = time.process_time(), os.times().user, time.perf_counter()
    try:
        await asyncio.gather(*(conversation(i) for i in range(conversations)))
    finally:
        client.let_go()
    return time.perf_counter() - started, time.process_time() - cpu, os.times().user - user


def replay(
    llm: ServedURL,
    crs: ServedURL,
    exchanges: tuple[list[Exchange], list[Exchange]],
    *,
    conversations: int,
    concurrency: int,
) -> FloorFigures:
    """Replay `conversations` conversations' exchanges, `concurrency` at once, and time them."""
    before = (llm.cpu_s(), crs.cpu_s())
    wall, cpu, user = run_coroutine(_replay(*exchanges, conversations, concurrency))
    after = (llm.cpu_s(), crs.cpu_s())
    servers = None if None in before or None in after else sum(after) - sum(before)  # type: ignore[arg-type]
    return FloorFigures(conversations, wall, cpu, user, servers)


def floor_row(f: FloorFigures, concurrency: int, latency_s: float = LATENCY_MS / 1000) -> dict[str, Any]:
    """The floor's figures in the real workload's terms (per conversation; efficiency against C / L calls/s)."""
    calls = f.conversations * REAL_TURNS
    return {
        "conversations": f.conversations,
        "efficiency": round(calls / f.wall_s / (concurrency / latency_s), 3),
        "cpu_ms_per_conversation": round(f.cpu_s / f.conversations * 1000, 2),
        "user_cpu_ms_per_conversation": round(f.cpu_user_s / f.conversations * 1000, 2),
        "server_cpu_ms_per_conversation": None
        if f.servers_cpu_s is None
        else round(f.servers_cpu_s / f.conversations * 1000, 2),
    }


# --------------------------------------------------------------------------- minimal-client


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
        # the plain dict lives in the toolkit jar's slot, so that reset_session forgets it per conversation
        jar: dict[str, str] = self._jar or {}  # type: ignore[assignment]
        if self.keep_cookies and jar:
            headers = {**headers, "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
        status, reply_headers, cookies, body = await client().request(method, url, headers, content)
        if self.keep_cookies and cookies:
            jar = dict(jar)
            for cookie in cookies:
                name, _, value = cookie.split(";", 1)[0].partition("=")
                jar[name.strip()] = value.strip()
            self._jar = jar  # type: ignore[assignment]
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


# --------------------------------------------------------------------------- profile-shares


STARTUP = "start-up (imports, data load)"
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (STARTUP, ("_find_and_load", "build_context", "load_items", "load_ratings")),
    ("connection set-up worker threads", ("concurrent/futures/thread.py",)),
    ("openai SDK call path", ("openai/",)),
    ("ollama SDK call path", ("ollama/",)),
    ("CRS transport", ("crs_connectors/transport.py", "httpx/", "httpcore/")),  # before the client it shares
    ("LLM client (lean_http, http_client)", ("lean_http.py", "http_client.py", "aiohttp/")),
    ("difflib", ("difflib",)),
    ("title resolution", ("item_parsing.py", "core/items.py")),
    ("profile generation", ("user_model/", "profile")),
    ("LLM layer (retries, cache, structured output)", ("llm/managed.py", "llm/structured.py", "llm/cache.py")),
    ("simulator (prompt, parsing)", ("simulators/",)),
    ("records / JSONL", ("jsonl", "recorder", "dialogue.py")),
    ("event loop and sockets (unattributed)", ("uvloop", "asyncio/", "engine/loop.py")),
)


def shares(lines: list[str]) -> tuple[Counter[str], int]:
    """Samples per component and the number of samples outside start-up."""
    counts: Counter[str] = Counter()
    for line in lines:
        stack, _, number = line.rstrip().rpartition(" ")
        if not number.isdigit():
            continue
        name = next((name for name, markers in COMPONENTS if any(m in stack for m in markers)), "other")
        counts[name] += int(number)
    return counts, sum(counts.values()) - counts[STARTUP]


# --------------------------------------------------------------------------- the command line

TOOLKIT_KEYS = (
    "failed",
    "efficiency",
    "cpu_ms_per_conversation",
    "user_cpu_ms_per_conversation",
    "server_cpu_ms_per_conversation",
)


def floor(args: argparse.Namespace) -> int:
    """The floor, then the whole toolkit, `--rounds` times; medians of each as JSON. Exit 1 when any
    of the toolkit's conversations failed (its figures then time fewer conversations than they name)."""
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-floor-"))
    speed, load = reference_cpu_s(), load_average()
    floors: list[dict[str, Any]] = []
    toolkit: list[dict[str, Any]] = []
    with real_servers() as (llm, crs):
        exchanges = record_exchanges(llm, crs, work / "recorded")  # also the warm-up: first-use costs paid
        config = real_workload_config(llm, crs, conversations=args.conversations, concurrency=args.concurrency)
        for r in range(args.rounds):
            floors.append(
                floor_row(
                    replay(llm, crs, exchanges, conversations=args.conversations, concurrency=args.concurrency),
                    args.concurrency,
                )
            )
            figures, extra = measured_run(config, work / f"toolkit-{r}", llm, crs)
            row = run_figures(figures, args.concurrency, LATENCY_MS / 1000, extra.pop("servers"))
            toolkit.append({key: row[key] for key in TOOLKIT_KEYS})
    floor_median, toolkit_median = median_figures(floors), median_figures(toolkit)
    share = round(floor_median["cpu_ms_per_conversation"] / toolkit_median["cpu_ms_per_conversation"], 3)
    result = {
        "concurrency": args.concurrency,
        "conversations": args.conversations,
        "recorded_requests": {"llm": len(exchanges[0]), "crs": len(exchanges[1])},
        "floor": floor_median,
        "toolkit": toolkit_median,
        "floor_share_of_toolkit_cpu": share,
        "load_average_before": load,
        "load_average_after": load_average(),
        "machine_speed": machine_speed(speed),
    }
    print(json.dumps(result, indent=2))
    if failed := toolkit_median["failed"]:
        print(
            f"{failed} conversation(s) of the toolkit's runs failed; see the run folders under {work}", file=sys.stderr
        )
        return 1
    return 0


def minimal_client(args: argparse.Namespace) -> int:
    """Without --client: the toolkit's client, then the minimal one, `--rounds` times, each in a child
    process. With it: one measurement, printed as a JSON line."""
    if args.client is None:
        for _ in range(args.rounds):
            for name in ("toolkit", "minimal"):
                command = [sys.executable, "-m", "benchmarks.experiments", "minimal-client", "--client", name]
                command += ["--concurrency", str(args.concurrency), "--conversations", str(args.conversations)]
                subprocess.run(command, check=True)
        return 0
    if args.client == "minimal":
        install()
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-transport-"))
    with real_servers() as (llm, crs):
        timed_run(real_workload_config(llm, crs, conversations=16, concurrency=8), work / "warm-up")  # first-use costs
        config = real_workload_config(llm, crs, conversations=args.conversations, concurrency=args.concurrency)
        figures, extra = measured_run(config, work / "run", llm, crs)
        row = run_figures(figures, args.concurrency, LATENCY_MS / 1000, extra.pop("servers"))
    keys = ("failed", "cpu_ms_per_conversation", "cpu_ms_per_llm_call", "server_cpu_ms_per_conversation", "efficiency")
    shown = {key: row[key] for key in keys}
    print(
        json.dumps(
            {"client": args.client, **shown, "load_average": load_average(), "machine_speed_s": reference_cpu_s()}
        )
    )
    return 1 if row["failed"] else 0


def profile_shares(args: argparse.Namespace) -> int:
    """Print the samples and share of each component of a py-spy raw profile."""
    with open(args.profile, encoding="utf-8") as handle:
        counts, run_total = shares(handle.readlines())
    print(f"{run_total} samples outside start-up")
    for name, number in counts.most_common():
        share = "" if name == STARTUP else f"{number / max(1, run_total):7.1%}"
        print(f"{name:48s} {number:7d} {share}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.experiments", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="experiment", required=True)
    for name, run, help_text in (
        ("floor", floor, "the real workload's HTTP exchanges alone, alternated with the whole toolkit"),
        ("minimal-client", minimal_client, "the real workload on a minimal HTTP client, alternated with the toolkit's"),
    ):
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--concurrency", type=int, default=128)
        sub.add_argument("--conversations", type=int, default=1_024)
        sub.add_argument("--rounds", type=int, default=1, help="alternations of the two measurements (median)")
        sub.set_defaults(run=run)
    commands.choices["minimal-client"].add_argument(
        "--client", choices=("toolkit", "minimal"), help="only this one, in this process"
    )
    shares_parser = commands.add_parser("profile-shares", help="shares of a py-spy raw profile per component")
    shares_parser.add_argument("profile", help="the file of `py-spy record --format raw`")
    shares_parser.set_defaults(run=profile_shares)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
