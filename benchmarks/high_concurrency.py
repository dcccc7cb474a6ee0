"""B1 at high concurrency: the LLM user against the iEvaLM-protocol test CRS, both servers in their own processes.

The workload of issue #15: single-prompt LLM user, an OpenAI-protocol server answering in 200 ms,
an iEvaLM-protocol CRS over HTTP (`crs_arena` connector, one cookie jar per conversation). Every
figure is a ratio or a per-call cost measured in one run, so load on the machine moves it little.
Run by hand (also the profiling target of docs/benchmarks.md, "Where the time went")::

    python -m benchmarks.high_concurrency --concurrency 128 --conversations 1024 --client lean
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.server import crs_server, llm_server
from benchmarks.setups import llm_user_config
from benchmarks.timing import call_figures, median_figures, timed_run

LATENCY_MS = 200.0
HIGH_CONCURRENCY = (128, 256)


def high_concurrency_runs(
    llm_url: str,
    crs_url: str,
    work: Path,
    *,
    clients: tuple[str, ...],
    concurrency: tuple[int, ...],
    per_slot: int,
    minimum: int = 1_000,
    latency_s: float = LATENCY_MS / 1000,
    repeats: dict[str, int] | None = None,
) -> dict[str, dict[str, Any]]:
    """For each client and C: max(minimum, per_slot * C) conversations after a small warm-up, run
    `repeats[client]` times (default once; several: the median of each figure, as B1 at C <= 64 does,
    because CPU per call moves by about 10% between runs on a shared 2-core machine)."""
    out: dict[str, dict[str, Any]] = {}
    for client in clients:
        warm = llm_user_config(llm_url, conversations=16, concurrency=8, client=client, crs_url=crs_url)
        timed_run(warm, work / f"hc-{client}-warmup")
        out[client] = {}
        for c in concurrency:
            n = max(minimum, per_slot * c)
            config = llm_user_config(llm_url, conversations=n, concurrency=c, client=client, crs_url=crs_url)
            runs = [
                call_figures(timed_run(config, work / f"hc-{client}-c{c}"), c, latency_s)
                for _ in range(max(1, (repeats or {}).get(client, 1)))
            ]
            out[client][f"C={c}"] = median_figures(runs)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(HIGH_CONCURRENCY))
    parser.add_argument("--conversations", type=int, default=1_000, help="at least this many per run")
    parser.add_argument("--per-slot", type=int, default=8)
    parser.add_argument("--client", nargs="+", default=["lean", "official"])
    parser.add_argument("--latency-ms", type=float, default=LATENCY_MS)
    parser.add_argument("--repeats", type=int, default=1, help="runs per client and C (median of each figure)")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-hc-"))
    with llm_server(args.latency_ms) as llm_url, crs_server() as crs_url:
        figures = high_concurrency_runs(
            llm_url,
            crs_url,
            work,
            clients=tuple(args.client),
            concurrency=tuple(args.concurrency),
            per_slot=args.per_slot,
            minimum=args.conversations,
            latency_s=args.latency_ms / 1000,
            repeats={client: args.repeats for client in args.client},
        )
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
