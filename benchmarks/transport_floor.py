"""Experiment behind docs/benchmarks.md (issue #22, sixth round): the CPU floor of the real workload's
HTTP traffic, beside the whole toolkit's CPU on the same servers. Not used by the toolkit; run it by hand::

    python -m benchmarks.transport_floor --rounds 3    # floor and toolkit alternated, medians of each

A short run of the real workload records every request the toolkit sends (method, URL, headers, body);
the floor then replays them, per conversation six LLM requests (keep-alive) each followed by one CRS
request (HTTP/1.0: a new connection each), with the toolkit's own HTTP client and orjson decoding each
reply, and nothing else: no simulator, prompts, parsing, title resolution, records, retries or timeouts.
Its CPU per conversation is what any toolkit in Python pays for the conversation's twelve exchanges
over asyncio on this machine (the kernel's loopback work included); its efficiency is the most a
toolkit doing that alone reaches with the servers on the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchmarks.high_concurrency import median_figures
from benchmarks.real_workload import LATENCY_MS, load_average, measured_run, run_figures
from benchmarks.reference import describe as describe_reference
from benchmarks.reference import reference_cpu_s
from benchmarks.server import ServedURL, crs_server, llm_server
from benchmarks.setups import REAL_TURNS, real_crs_options, real_workload_config
from benchmarks.timing import timed_run
from usersimcrs.core import wire_json
from usersimcrs.core.http_client import HTTPClient, Target
from usersimcrs.engine.loop import run_coroutine


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


TOOLKIT_KEYS = (
    "failed",
    "efficiency",
    "cpu_ms_per_conversation",
    "user_cpu_ms_per_conversation",
    "server_cpu_ms_per_conversation",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--conversations", type=int, default=1_024)
    parser.add_argument("--rounds", type=int, default=1, help="the floor, then the whole toolkit, this many times")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-floor-"))
    speed = reference_cpu_s()
    load = load_average()
    floor: list[dict[str, Any]] = []
    toolkit: list[dict[str, Any]] = []
    with (
        llm_server(LATENCY_MS, fixed_booleans=False) as llm,
        crs_server("ievalm", *real_crs_options()) as crs,
    ):
        exchanges = record_exchanges(llm, crs, work / "recorded")  # also the warm-up: first-use costs paid
        config = real_workload_config(llm, crs, conversations=args.conversations, concurrency=args.concurrency)
        for r in range(args.rounds):
            floor.append(
                floor_row(
                    replay(llm, crs, exchanges, conversations=args.conversations, concurrency=args.concurrency),
                    args.concurrency,
                )
            )
            figures, extra = measured_run(config, work / f"toolkit-{r}", llm, crs)
            row = run_figures(figures, args.concurrency, LATENCY_MS / 1000, extra.pop("servers"))
            toolkit.append({key: row[key] for key in TOOLKIT_KEYS})
    floor_median, toolkit_median = median_figures(floor), median_figures(toolkit)
    share = round(floor_median["cpu_ms_per_conversation"] / toolkit_median["cpu_ms_per_conversation"], 3)
    print(
        json.dumps(
            {
                "concurrency": args.concurrency,
                "conversations": args.conversations,
                "recorded_requests": {"llm": len(exchanges[0]), "crs": len(exchanges[1])},
                "floor": floor_median,
                "toolkit": toolkit_median,
                "floor_share_of_toolkit_cpu": share,
                "load_average_before": load,
                "load_average_after": load_average(),
                "machine_speed": {
                    "reference": describe_reference(),
                    "cpu_s_at_start": speed,
                    "cpu_s_at_end": reference_cpu_s(),
                },
            },
            indent=2,
        )
    )
    failed = toolkit_median["failed"]
    if failed:  # the toolkit's figures then time fewer conversations than they name
        print(
            f"{failed} conversation(s) of the toolkit's runs failed; see the run folders under {work}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
