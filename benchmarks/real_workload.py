"""The real workload (issue #22): what a researcher runs, not a benchmark-shaped one.

The single-prompt LLM user makes 6 LLM calls per conversation against an OpenAI-protocol server
answering in 200 ms; the CRS is the iEvaLM-protocol test server speaking HTTP/1.0 (a new connection
every turn, as CRS Arena's Flask server did), recommending from the 13,816-movie MovieLens sample on
every turn and naming a share of its titles in other spellings or not in the collection at all; user
profiles come from the sample's 20 users (about 166 rated movies each). Both servers run in their
own processes; their CPU time is measured too, since they share the machine's cores with the toolkit.
Run by hand (also the profiling target of docs/benchmarks.md)::

    python -m benchmarks.real_workload --concurrency 128 --conversations 1024

On a machine with more cores, `--toolkit-cpus 0,1 --server-cpus 2-7` gives the toolkit two cores of its
own and the servers others (Linux), as when the CRS and the LLM server run elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.reference import machine_speed, reference_cpu_s
from benchmarks.server import ServedURL, crs_server, listed_cpus, llm_server, parse_cpus
from benchmarks.setups import REAL_TURNS, real_catalogue, real_crs_options, real_workload_config
from benchmarks.timing import RunFigures, call_figures, load_average, median_figures, timed_run
from usersimcrs.core.jsonl import iter_jsonl

LATENCY_MS = 200.0
CONCURRENCY = (128, 256)


@contextmanager
def real_servers(
    latency_ms: float = LATENCY_MS, *, jitter_ms: float = 0.0, cpus: frozenset[int] | None = None
) -> Iterator[tuple[ServedURL, ServedURL]]:
    """The real workload's two servers, each in its own process: the LLM server (booleans varied by the
    prompt) and the HTTP/1.0 iEvaLM CRS recommending from the MovieLens sample; yields (LLM URL, CRS URL)."""
    with (
        llm_server(latency_ms, jitter_ms=jitter_ms, fixed_booleans=False, cpus=cpus) as llm,
        crs_server("ievalm", *real_crs_options(), cpus=cpus) as crs,
    ):
        yield llm, crs


def resolution_shares(run_dir: Path) -> dict[str, Any]:
    """How the CRS's recommended titles resolved against the collection (shares of all recommended items)."""
    counts: Counter[str] = Counter()
    for record in iter_jsonl(run_dir / "dialogues.jsonl"):
        for utterance in record.get("utterances", []):
            for item in utterance.get("items") or []:
                if isinstance(item, dict):
                    counts[item.get("resolution") or ("id" if item.get("id") else "unresolved")] += 1
    total = sum(counts.values())
    return {"items": total, **{k: round(v / total, 3) for k, v in sorted(counts.items())}} if total else {"items": 0}


def cpu_ceiling(
    toolkit_ms: float, servers_ms: float | None, calls_per_conversation: float, ideal_calls_per_s: float
) -> dict[str, float | None]:
    """What two idle cores allow (the targets' machine): the cores the toolkit and both servers would keep
    busy at the ideal rate (C / L calls per second), the efficiency their CPU caps a run at, and the cap
    of the servers' CPU alone (what a toolkit costing no CPU would meet). Holds for this workload only."""
    if servers_ms is None:
        return dict.fromkeys(
            ("cores_needed_at_ideal_rate", "efficiency_ceiling_on_two_cores", "servers_efficiency_ceiling_on_two_cores")
        )
    per_s = ideal_calls_per_s / max(calls_per_conversation, 1e-9)  # conversations per second at the ideal rate
    needed = (toolkit_ms + servers_ms) / 1000 * per_s
    return {
        "cores_needed_at_ideal_rate": round(needed, 2),
        "efficiency_ceiling_on_two_cores": round(min(1.0, 2 / needed), 3),
        "servers_efficiency_ceiling_on_two_cores": round(min(1.0, 2 / (servers_ms / 1000 * per_s)), 3),
    }


def run_figures(
    r: RunFigures, concurrency: int, latency_s: float, servers_cpu_s: dict[str, float | None]
) -> dict[str, Any]:
    """Efficiency, the toolkit's CPU per LLM call and per conversation, and the servers' CPU beside it."""
    known = [v for v in servers_cpu_s.values() if v is not None]
    servers = sum(known) if len(known) == len(servers_cpu_s) else None
    toolkit_ms = r.cpu_s / max(1, r.conversations) * 1000
    servers_ms = None if servers is None else servers / max(1, r.conversations) * 1000
    return {
        **call_figures(r, concurrency, latency_s),
        # a conversation's slot waits on CRS turns too: at a share s of its time, efficiency is at most 1 - s
        # whatever the toolkit does (the CRS server shares the machine's cores, as its CPU below shows)
        "crs_ms_per_conversation": round(r.crs_s / max(1, r.conversations) * 1000, 1),
        "crs_share_of_conversation_time": round(r.crs_s / max(1e-9, r.simulator_s + r.crs_s + r.profile_s), 3),
        # the kernel's share (socket work; on a busy machine it also bills other traffic's softirqs here)
        "user_cpu_ms_per_conversation": round(r.cpu_user_s / max(1, r.conversations) * 1000, 2),
        "toolkit_cpu_s": round(r.cpu_s, 2),
        "server_cpu_s": {k: None if v is None else round(v, 2) for k, v in servers_cpu_s.items()},
        "server_cpu_ms_per_conversation": None if servers_ms is None else round(servers_ms, 2),
        "toolkit_share_of_cpu": None if servers is None else round(r.cpu_s / (r.cpu_s + servers), 3),
        "cpu_share_of_two_cores": None if servers is None else round((r.cpu_s + servers) / (2 * r.wall_s), 3),
        # efficiency cannot exceed what the cores allow: at C = 256 the servers alone need about 2 cores
        **cpu_ceiling(toolkit_ms, servers_ms, r.llm_calls / max(1, r.conversations), concurrency / latency_s),
    }


def measured_run(config: Any, out_dir: Path, llm: ServedURL, crs: ServedURL) -> tuple[RunFigures, dict[str, Any]]:
    """One timed run with the servers' CPU over it and the machine's load before and after."""
    load_before = load_average()
    before = {"llm_server": llm.cpu_s(), "crs_server": crs.cpu_s()}
    figures = timed_run(config, out_dir)
    after = {"llm_server": llm.cpu_s(), "crs_server": crs.cpu_s()}
    servers = {k: None if before[k] is None or after[k] is None else after[k] - before[k] for k in before}  # type: ignore[operator]
    extra = {"servers": servers, "load_average_before": load_before, "load_average_after": load_average()}
    return figures, extra


def real_runs(
    llm: ServedURL,
    crs: ServedURL,
    work: Path,
    *,
    concurrency: tuple[int, ...],
    minimum: int,
    per_slot: int,
    repeats: int = 1,
    client: str | None = None,
    latency_s: float = LATENCY_MS / 1000,
) -> dict[str, Any]:
    """For each C: max(minimum, per_slot * C) conversations, `repeats` times (median of each figure),
    after a small warm-up that pays first-use costs."""
    timed_run(real_workload_config(llm, crs, conversations=16, concurrency=8, client=client), work / "real-warmup")
    out: dict[str, Any] = {}
    for c in concurrency:
        n = max(minimum, per_slot * c)
        config = real_workload_config(llm, crs, conversations=n, concurrency=c, client=client)
        runs = []
        for r in range(max(1, repeats)):
            figures, extra = measured_run(config, work / f"real-c{c}-{r}", llm, crs)
            row = run_figures(figures, c, latency_s, extra.pop("servers"))
            row.update(extra)
            runs.append(row)
        merged = median_figures(runs)
        merged["recommended_items"] = resolution_shares(work / f"real-c{c}-0")
        out[f"C={c}"] = merged
    return out


def workload() -> dict[str, Any]:
    """What the real workload is, as recorded with its figures."""
    catalogue = real_catalogue()
    return {
        "items": catalogue["items"],
        "ratings": catalogue["ratings"],
        "fallback_catalogue": catalogue["fallback"],
        "llm_calls_per_conversation": REAL_TURNS,
        "llm_latency_ms": LATENCY_MS,
        "crs": "iEvaLM test server, own process, HTTP/1.0 (new connection per turn), "
        + " ".join(real_crs_options()[2:]),
    }


def _cpus(text: str) -> frozenset[int]:
    try:
        return parse_cpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    parser.add_argument("--conversations", type=int, default=1_024, help="at least this many per run")
    parser.add_argument("--per-slot", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--latency-ms", type=float, default=LATENCY_MS)
    parser.add_argument("--client", default=None)
    parser.add_argument(
        "--toolkit-cpus", type=_cpus, default=None, help="CPUs the toolkit runs on (e.g. 0,1; default: any)"
    )
    parser.add_argument(
        "--server-cpus", type=_cpus, default=None, help="CPUs both servers run on (e.g. 2-7; default: any)"
    )
    args = parser.parse_args(argv)
    if args.toolkit_cpus is not None:  # before anything starts: threads made later keep to them too
        os.sched_setaffinity(0, args.toolkit_cpus)
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-real-"))
    started = time.perf_counter()
    speed_at_start = reference_cpu_s()
    with real_servers(args.latency_ms, cpus=args.server_cpus) as (llm_url, crs_url):
        figures = real_runs(
            llm_url,
            crs_url,
            work,
            concurrency=tuple(args.concurrency),
            minimum=args.conversations,
            per_slot=args.per_slot,
            repeats=args.repeats,
            client=args.client,
            latency_s=args.latency_ms / 1000,
        )
    print(
        json.dumps(
            {
                "workload": workload(),
                "cpus": {"toolkit": listed_cpus(args.toolkit_cpus), "servers": listed_cpus(args.server_cpus)},
                "runs": figures,
                "machine_speed": machine_speed(speed_at_start),
                "wall_s": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )
    failed = sum(run["failed"] for run in figures.values())
    if failed:  # the figures above then time fewer conversations than they name
        print(f"{failed} conversation(s) failed; see the run folders under {work}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
