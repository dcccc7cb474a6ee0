"""Runs B1-B7, prints one table and writes `benchmarks/results.json` (machine description included)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from benchmarks import scenarios as sc
from benchmarks.server import crs_server, llm_server
from usersimcrs.engine.loop import resolve_loop

RESULTS = Path(__file__).resolve().parent / "results.json"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    memory_gb = None
    try:
        memory_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }


def table(rows: list[sc.Scenario]) -> str:
    """The results as a fixed-width text table."""
    header = ("", "scenario", "headline", "value", "target", "ok")
    lines = [header] + [
        (
            r.key,
            r.title,
            r.headline,
            "-" if r.value is None else f"{r.value:g}",
            r.target,
            {True: "yes", False: "NO", None: "-"}[r.passed],
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(header))]
    out = ["  ".join(str(v).ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def client_table(rows: list[sc.Scenario]) -> str:
    """B1 and B2 for each HTTP client (the main table shows the default one)."""
    by_key = {r.key: r.figures for r in rows}
    b1, b2, high = by_key.get("B1", {}), by_key.get("B2", {}), by_key.get("B1-128", {})
    high_cs = [f"C={c}" for c in sc.HIGH_CONCURRENCY]
    lines = [
        (
            "client",
            "B1 eff. C=1",
            "C=8",
            "C=32",
            "C=64",
            *(f"{c} (200 ms)" for c in high_cs),
            "CPU ms/call C=32",
            "C=128",
            "CPU ms/conv C=128",
            "conv/s C=128",
            "B2 speedup",
        )
    ]
    for client in sc.CLIENTS:
        per_c, per_high = b1.get(client, {}), high.get(client, {})
        eff = [f"{per_c[f'C={c}']['efficiency']:g}" if f"C={c}" in per_c else "-" for c in sc.CONCURRENCY]
        eff_high = [f"{per_high[c]['efficiency']:g}" if c in per_high else "-" for c in high_cs]
        cpu = f"{per_c['C=32']['cpu_ms_per_call']:g}" if "C=32" in per_c else "-"
        at = per_high.get("C=128", {})
        cpu_high = [
            f"{at[k]:g}" if k in at else "-"
            for k in ("cpu_ms_per_llm_call", "cpu_ms_per_conversation", "conversations_per_s")
        ]
        speedup = f"{b2[client]['speedup']:g}" if client in b2 else "-"
        lines.append((client, *eff, *eff_high, cpu, *cpu_high, speedup))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    out = ["  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def _guarded(key: str, title: str, fn: Callable[[], sc.Scenario]) -> sc.Scenario:
    """Run one scenario; a failure is reported in its row instead of ending the harness."""
    started = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
        result = sc.Scenario(key, title, "error", None, "-", False, {"error": f"{type(exc).__name__}: {exc}"[:500]})
    result.figures["scenario_wall_s"] = round(time.perf_counter() - started, 1)
    print(f"  {key} done in {result.figures['scenario_wall_s']}s", flush=True)
    return result


def _high_concurrency(sizes: sc.Sizes, work: Path, jitter_ms: float, crs_url: str) -> list[sc.Scenario]:
    """B1 at C = 128 and 256 against a second LLM server (200 ms) and the iEvaLM CRS server."""
    title = "B1 at C=128/256"
    started = time.perf_counter()
    try:
        with llm_server(sc.HIGH_LATENCY_S * 1000, jitter_ms=jitter_ms) as slow_url:
            rows = sc.b1_high_rows(sc.high_concurrency_figures(slow_url, crs_url, sizes, work))
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
        rows = [
            sc.Scenario("B1-128", title, "error", None, "-", False, {"error": f"{type(exc).__name__}: {exc}"[:500]})
        ]
    rows[0].figures["scenario_wall_s"] = round(time.perf_counter() - started, 1)
    print(f"  B1-128 done in {rows[0].figures['scenario_wall_s']}s", flush=True)
    return rows


def run_all(sizes: sc.Sizes, work: Path, jitter_ms: float) -> list[sc.Scenario]:
    """B1-B7 in one go, sharing one LLM server (50 ms) and the same conversations; B1 at C >= 128 and B7
    add a 200 ms LLM server and the iEvaLM test CRS server, each in its own process."""
    rows: list[sc.Scenario] = []
    with llm_server(sc.LATENCY_S * 1000, jitter_ms=jitter_ms) as url, crs_server() as crs_url:
        runs: dict[str, dict[Any, sc.RunFigures]] = {}
        retrieval: dict[str, dict[str, sc.RunFigures]] = {}

        def concurrency() -> sc.Scenario:
            for client in sc.CLIENTS:  # B1/B2 with each HTTP client of the openai backend
                runs[client] = sc.concurrency_runs(url, sizes, work, client)
                retrieval[client] = sc.retrieval_runs(url, sizes, work, client)
            return sc.b1_efficiency(runs, retrieval)

        rows.append(_guarded("B1", "concurrency efficiency", concurrency))
        rows.extend(_high_concurrency(sizes, work, jitter_ms, crs_url))
        rows.append(_guarded("B2", "speedup", lambda: sc.b2_speedup(runs)))
        rows.append(_guarded("B3", "cached rerun", lambda: sc.b3_cached_rerun(url, sizes, work)))
        rows.append(_guarded("B4", "engine overhead", lambda: sc.b4_overhead(runs, retrieval, sizes, work)))
        rows.append(_guarded("B5", "memory", lambda: sc.b5_memory(sizes, work)))
        rows.append(_guarded("B6", "judge cost", lambda: sc.b6_judge_cost(url, sizes, work)))
        rows.append(_guarded("B7", "time to first conversation", lambda: sc.b7_first_conversation(url, crs_url, work)))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m benchmarks` and `usersimcrs bench`."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description="toolkit performance benchmarks (B1-B7)")
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="smaller sizes, under 5 minutes on 2 cores")
    parser.add_argument("--output", default=str(RESULTS), help="where to write the results JSON")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="uniform extra latency of the LLM server")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (printed) instead of deleting them")


def run_from_args(args: argparse.Namespace) -> int:
    sizes = sc.QUICK if args.quick else sc.FULL
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-bench-"))
    started = time.perf_counter()
    load_at_start = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"usersimcrs benchmarks ({'quick' if args.quick else 'full'}); work folder {work}", flush=True)
    try:
        rows = run_all(sizes, work, args.jitter_ms)
    finally:
        if args.keep:
            print(f"run folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(table(rows))
    print()
    print(client_table(rows))
    results = {
        "mode": "quick" if args.quick else "full",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "event_loop": resolve_loop("auto"),  # the runs use the default `event_loop: auto`
        "llm_server": {
            "latency_ms": sc.LATENCY_S * 1000,
            "jitter_ms": args.jitter_ms,
            "protocol": "openai",
            "process": "separate",
            "clients": list(sc.CLIENTS),
        },
        "high_concurrency": {
            "llm_latency_ms": sc.HIGH_LATENCY_S * 1000,
            "crs": "iEvaLM test server, separate process",
            "default_client": sc.DEFAULT_CLIENT,
        },
        "sizes": asdict(sizes),
        "wall_s": round(time.perf_counter() - started, 1),
        "scenarios": {r.key: asdict(r) for r in rows},
    }
    Path(args.output).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    print(f"\nwrote {args.output} ({results['wall_s']}s)")
    return 0 if all(r.passed is not False for r in rows) else 1
