"""Runs the real workload (R rows), B1-B7 (the fixed-length workload and the rest) and B8 (the embedded model),
prints one table and, when asked, writes `results.json` into the folder named (machine description and load
averages included).

`python -m benchmarks ...` is `usersimcrs bench ...` (same options, one parser: usersimcrs/cli/bench.py).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from benchmarks import scenarios as sc
from benchmarks.real_workload import real_servers
from benchmarks.reference import describe as describe_reference
from benchmarks.reference import machine_speed, reference_cpu_s
from benchmarks.server import crs_server, listed_cpus, llm_server, parse_cpus
from benchmarks.timing import load_average
from usersimcrs.cli import main as cli_main
from usersimcrs.engine.loop import resolve_loop
from usersimcrs.errors import UserError

RESULTS = Path(__file__).resolve().parent / "results.json"  # the committed figures docs/benchmarks.md quotes
SIZES = {"tiny": sc.TINY, "quick": sc.QUICK, "full": sc.FULL}


@dataclass(frozen=True)
class ServerSettings:
    """How the benchmark servers run: the LLM servers' extra latency, and the CPUs they keep to (None: any)."""

    jitter_ms: float = 0.0
    cpus: frozenset[int] | None = None


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


def ceiling_line(rows: list[sc.Scenario]) -> str | None:
    """The efficiency the CPU of the toolkit and both servers allows the real workload on 2 idle cores
    (R1's figures), so that a missed R1 target reads beside what the cores allow; None without R1."""
    real = next((r.figures for r in rows if r.key == "R1"), {})
    parts = [
        f"{c}: {at['efficiency_ceiling_on_two_cores']:g} (servers' CPU alone {at['servers_efficiency_ceiling_on_two_cores']:g})"
        for c in ("C=128", "C=256")
        if isinstance(at := real.get(c), dict) and at.get("efficiency_ceiling_on_two_cores") is not None
    ]
    if not parts:
        return None
    return "real workload: the efficiency its CPU allows on 2 idle cores, " + "; ".join(parts)


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
    for client in [c for c in sc.CLIENTS if c in b1 or c in high]:
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


def _high_concurrency(sizes: sc.Sizes, work: Path, servers: ServerSettings, crs_url: str) -> list[sc.Scenario]:
    """B1 at C = 128 and 256 against a second LLM server (200 ms) and the iEvaLM CRS server."""
    title = "B1 at C=128/256"
    started = time.perf_counter()
    try:
        with llm_server(sc.HIGH_LATENCY_S * 1000, jitter_ms=servers.jitter_ms, cpus=servers.cpus) as slow_url:
            rows = sc.b1_high_rows(sc.high_concurrency_figures(slow_url, crs_url, sizes, work))
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
        rows = [
            sc.Scenario("B1-128", title, "error", None, "-", False, {"error": f"{type(exc).__name__}: {exc}"[:500]})
        ]
    rows[0].figures["scenario_wall_s"] = round(time.perf_counter() - started, 1)
    print(f"  B1-128 done in {rows[0].figures['scenario_wall_s']}s", flush=True)
    return rows


def _real_workload(sizes: sc.Sizes, work: Path, servers: ServerSettings) -> list[sc.Scenario]:
    """R1 and R7: the real workload against its own servers (200 ms LLM server with varied booleans,
    HTTP/1.0 iEvaLM server recommending from the MovieLens sample)."""
    rows: list[sc.Scenario] = []
    started = time.perf_counter()
    try:
        with real_servers(sc.REAL_LATENCY_S * 1000, jitter_ms=servers.jitter_ms, cpus=servers.cpus) as (
            llm_url,
            crs_url,
        ):
            rows.extend(sc.r1_rows(sc.real_workload_figures(llm_url, crs_url, sizes, work)))
            print(f"  R1 done in {round(time.perf_counter() - started, 1)}s", flush=True)
            rows.extend(
                _guarded_rows(
                    "R1-floor", "real workload: HTTP alone", lambda: sc.r1_floor_rows(llm_url, crs_url, sizes, work)
                )
            )
            rows.extend(
                _guarded_rows("R5", "real workload: memory", lambda: [sc.r5_memory(llm_url, crs_url, sizes, work)])
            )
            rows.extend(
                _guarded_rows(
                    "R7",
                    "real workload: first record",
                    lambda: sc.r7_first_record(llm_url, crs_url, work, sizes.first_repeats, sizes.startup_repeats),
                )
            )
    except Exception as exc:  # noqa: BLE001 - one broken scenario must not hide the others
        rows.append(
            sc.Scenario(
                "R1", "real workload", "error", None, "-", False, {"error": f"{type(exc).__name__}: {exc}"[:500]}
            )
        )
    rows[0].figures["scenario_wall_s"] = round(time.perf_counter() - started, 1)
    return rows


def _guarded_rows(key: str, title: str, fn: Callable[[], list[sc.Scenario]]) -> list[sc.Scenario]:
    """Several rows of one scenario; a failure becomes one error row."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return [sc.Scenario(key, title, "error", None, "-", False, {"error": f"{type(exc).__name__}: {exc}"[:500]})]


def run_all(sizes: sc.Sizes, work: Path, servers: ServerSettings) -> list[sc.Scenario]:
    """The real workload (R rows) first, then B1-B7 in one go, sharing one LLM server (50 ms) and the same
    conversations; B1 at C >= 128 and B7 add a 200 ms LLM server and the iEvaLM test CRS server, each in
    its own process; B8 (the embedded model, no server) last."""
    rows: list[sc.Scenario] = _real_workload(sizes, work, servers)
    with (
        llm_server(sc.LATENCY_S * 1000, jitter_ms=servers.jitter_ms, cpus=servers.cpus) as url,
        crs_server(cpus=servers.cpus) as crs_url,
    ):
        runs: dict[str, dict[Any, sc.RunFigures]] = {}
        retrieval: dict[str, dict[str, sc.RunFigures]] = {}

        def concurrency() -> sc.Scenario:
            for client in sizes.clients:  # B1/B2 with each HTTP client of the openai backend
                runs[client] = sc.concurrency_runs(url, sizes, work, client)
                retrieval[client] = sc.retrieval_runs(url, sizes, work, client)
            return sc.b1_efficiency(runs, retrieval)

        rows.append(_guarded("B1", "concurrency efficiency", concurrency))
        rows.extend(_high_concurrency(sizes, work, servers, crs_url))
        rows.append(_guarded("B2", "speedup", lambda: sc.b2_speedup(runs)))
        rows.append(_guarded("B3", "cached rerun", lambda: sc.b3_cached_rerun(url, sizes, work)))
        rows.append(_guarded("B4", "engine overhead", lambda: sc.b4_overhead(runs, retrieval, sizes, work)))
        rows.append(_guarded("B5", "memory", lambda: sc.b5_memory(sizes, work)))
        rows.append(_guarded("B6", "judge cost", lambda: sc.b6_judge_cost(url, sizes, work)))
        rows.append(
            _guarded(
                "B7",
                "time to first conversation",
                lambda: sc.b7_first_conversation(url, crs_url, work, sizes.first_repeats),
            )
        )
    rows.extend(_guarded_rows("B8", "embedded structured output", lambda: sc.b8_embedded(sizes, work)))
    return rows


def _cpu_list(option: str, text: str | None) -> frozenset[int] | None:
    """A CPU list option, or a one-line error naming it."""
    if text is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise UserError(f"{option}: CPU affinity needs Linux")
    try:
        return parse_cpus(text)
    except ValueError as exc:
        raise UserError(f"{option}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    """`python -m benchmarks [options]`: the same command as `usersimcrs bench [options]`."""
    import sys

    return int(cli_main(["bench", *(sys.argv[1:] if argv is None else argv)]) or 0)


def run(
    mode: str,
    output: Path | None,
    *,
    jitter_ms: float = 0.0,
    keep: bool = False,
    toolkit_cpus: str | None = None,
    server_cpus: str | None = None,
) -> int:
    """Run every scenario at the sizes of `mode` (tiny, quick, full); print the tables; write
    `output/results.json` when a folder is named. Exit status 1 when a target was missed.
    `toolkit_cpus` / `server_cpus` (CPU lists such as 0,1 and 2-7): the CPUs this process (and the runs
    it starts) and the servers keep to; None: any (the committed figures share the machine's cores)."""
    sizes = SIZES[mode]
    toolkit, servers = _cpu_list("--toolkit-cpus", toolkit_cpus), _cpu_list("--server-cpus", server_cpus)
    if toolkit is not None:  # before any thread or child process starts: they keep to them too
        os.sched_setaffinity(0, toolkit)
    work = Path(tempfile.mkdtemp(prefix="usersimcrs-bench-"))
    started = time.perf_counter()
    load_at_start = load_average()
    speed_at_start = reference_cpu_s()
    print(
        f"usersimcrs benchmarks ({mode}); load average {load_at_start}; machine speed {speed_at_start} "
        f"({describe_reference()}); work folder {work}",
        flush=True,
    )
    try:
        rows = run_all(sizes, work, ServerSettings(jitter_ms, servers))
    finally:
        if keep:
            print(f"run folders kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    load_at_end = load_average()
    speed = machine_speed(speed_at_start)
    print()
    print(table(rows))
    print()
    print(client_table(rows))
    ceiling = ceiling_line(rows) if servers is None else None  # the servers on cores of their own: no ceiling
    if ceiling:
        print(f"\n{ceiling}")
    print(f"\nload average at the start {load_at_start}, at the end {load_at_end} (2 idle cores read about 0)")
    print(
        f"machine speed at the start {speed_at_start} s, at the end {speed['cpu_s_at_end']} s ({describe_reference()}; "
        "divide a CPU figure by it to compare machines)"
    )
    results = {
        "mode": mode,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": load_at_end,
        "machine_speed": speed,
        "event_loop": resolve_loop("auto"),  # the runs use the default `event_loop: auto`
        "llm_server": {
            "latency_ms": sc.LATENCY_S * 1000,
            "jitter_ms": jitter_ms,
            "protocol": "openai",
            "process": "separate",
            "clients": list(sizes.clients),
        },
        "high_concurrency": {
            "llm_latency_ms": sc.HIGH_LATENCY_S * 1000,
            "crs": "iEvaLM test server, separate process",
            "default_client": sc.DEFAULT_CLIENT,
        },
        "cpus": {"toolkit": listed_cpus(toolkit), "servers": listed_cpus(servers)},
        "sizes": asdict(sizes),
        "wall_s": round(time.perf_counter() - started, 1),
        "scenarios": {r.key: asdict(r) for r in rows},
    }
    if output is None:
        print(f"\nresults not written (name a folder with --output DIR); {results['wall_s']}s")
    else:
        output.mkdir(parents=True, exist_ok=True)
        path = output / "results.json"
        path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"\nwrote {path} ({results['wall_s']}s)")
    return 0 if all(r.passed is not False for r in rows) else 1
