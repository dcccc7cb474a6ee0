"""The scenarios (B1-B8). Each returns a Scenario with its figures, its headline ratio and target."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.embedded_grammar import (
    DEMO_TARGET_S,
    SPEEDUP_TARGET,
    demo_threads,
    demo_wall,
    speed_passed,
    tokens_per_second,
)
from benchmarks.experiments import floor_row, record_exchanges, replay
from benchmarks.first_conversation import time_startup_parts, timed_starts
from benchmarks.high_concurrency import high_concurrency_runs
from benchmarks.judge_cost import judge_costs
from benchmarks.real_workload import real_runs, workload
from benchmarks.setups import LATENCY_S, agenda_config, llm_user_config, real_workload_config
from benchmarks.timing import RunFigures, median_figures, timed_run
from usersimcrs.core.http_route import choose_route
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.errors import ConfigError
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.embedded_model import require_local_extra

CONCURRENCY = (1, 8, 32, 64)
CLIENTS = ("official", "lean")  # llm.client: the official openai library, or the lean transport
# the headline figures are the default client's: the one the default `llm.client` takes for these benchmarks'
# servers (plain http to 127.0.0.1: `auto` takes the lean client there, docs/llm.md)
DEFAULT_CLIENT: str = choose_route(
    "http://127.0.0.1/", LLMConfig.model_fields["client"].default, key="llm.client"
).client
HIGH_LATENCY_S = 0.2  # B1 at C = 128 and 256: the issue #15 workload (200 ms server, iEvaLM CRS server)
HIGH_CONCURRENCY = (128, 256)


@dataclass
class Sizes:
    """How big each scenario is (--quick keeps the whole harness under five minutes on 2 cores)."""

    conversations: int = 200  # B1/B2/B3: the same 200 conversations at every concurrency
    repeats: int = 1  # B1/B2: runs per concurrency (median)
    agenda_conversations: int = 500  # B4
    memory_sizes: tuple[int, int] = (1_000, 10_000)  # B5
    judged_conversations: int = 5  # B6
    retrieval_c1_conversations: int = 60  # B4: LLM user + BM25 CRS at C=1
    per_slot: int = 16  # B1: at least this many conversations per concurrency slot
    high_conversations: int = 1_024  # B1 at C = 128 / 256: at least this many conversations per run
    high_per_slot: int = 8  # ... and at least this many per slot
    high_repeats: int = 1  # ... runs of the default client at each C (median)
    clients: tuple[str, ...] = CLIENTS  # the openai backend's HTTP clients to compare
    real_conversations: int = 1_024  # the real workload (R rows): at least this many per run
    real_per_slot: int = 4  # ... and at least this many per slot
    real_repeats: int = 1  # ... runs at each C (median)
    real_memory_sizes: tuple[int, int] = (1_000, 10_000)  # R5: peak RSS of a fresh process, real workload
    first_repeats: int = 3  # B7 / R7: fresh `usersimcrs run` processes (median)
    startup_repeats: int = 5  # R7: fresh processes timing imports and data loading (median)
    embedded_rounds: int = 3  # B8: times each prompt is sent in each grammar mode (alternated)
    embedded_max_tokens: int = 48  # ... tokens per answer at most
    embedded_demo: bool = True  # B8-demo: time `usersimcrs quickstart` (a few minutes)


TINY = Sizes(  # a smoke test of every scenario (about half a minute); its figures mean nothing
    conversations=8,
    agenda_conversations=20,
    memory_sizes=(20, 40),
    judged_conversations=1,
    retrieval_c1_conversations=4,
    per_slot=1,
    high_conversations=0,
    high_per_slot=1,
    clients=(DEFAULT_CLIENT,),
    real_conversations=0,
    real_per_slot=1,
    real_memory_sizes=(16, 32),
    first_repeats=1,
    startup_repeats=1,
    embedded_rounds=1,
    embedded_max_tokens=8,
    embedded_demo=False,
)
QUICK = Sizes(
    real_memory_sizes=(500, 2_000),
    repeats=1,
    agenda_conversations=300,
    memory_sizes=(500, 5_000),
    judged_conversations=3,
    retrieval_c1_conversations=40,
    per_slot=8,
    high_per_slot=4,
)
FULL = Sizes(
    repeats=3,
    agenda_conversations=1_000,
    memory_sizes=(1_000, 10_000),
    judged_conversations=10,
    retrieval_c1_conversations=100,
    high_conversations=2_048,  # 16 per slot at C = 128: the ramp-down at the end weighs half as much as in --quick
    high_repeats=3,
    real_repeats=3,
)


@dataclass
class Scenario:
    """One row of the results table."""

    key: str
    title: str
    headline: str
    value: float | None
    target: str
    passed: bool | None
    figures: dict[str, Any] = field(default_factory=dict)


def _median_run(runs: list[RunFigures]) -> RunFigures:
    return sorted(runs, key=lambda r: r.wall_s)[len(runs) // 2]


def b1_conversations(sizes: Sizes, concurrency: int) -> int:
    """B1's conversations at concurrency C: several per slot, so the ramp-down at the end stays small."""
    return max(sizes.conversations, sizes.per_slot * concurrency)


def concurrency_runs(url: str, sizes: Sizes, work: Path, client: str = "official") -> dict[int | str, RunFigures]:
    """B1 at each concurrency, plus B2's 200 conversations at C=32 (after a warm-up that pays the imports)."""

    def run(n: int, c: int, name: str) -> RunFigures:
        return timed_run(llm_user_config(url, conversations=n, concurrency=c, client=client), work / f"{client}-{name}")

    run(8, 4, "warmup")
    out: dict[int | str, RunFigures] = {}
    for c in CONCURRENCY:
        n = b1_conversations(sizes, c)
        repeats = 1 if c == 1 else sizes.repeats
        out[c] = _median_run([run(n, c, f"c{c}-{r}") for r in range(repeats)])
    if b1_conversations(sizes, 32) != sizes.conversations:
        out["b2_c32"] = _median_run([run(sizes.conversations, 32, f"b2-{r}") for r in range(sizes.repeats)])
    else:
        out["b2_c32"] = out[32]
    return out


def retrieval_runs(url: str, sizes: Sizes, work: Path, client: str = "official") -> dict[str, RunFigures]:
    """The LLM user against the BM25 CRS: at C=32 (B1's CRS-bound variant) and at C=1 (B4's share)."""

    def run(n: int, c: int, name: str) -> RunFigures:
        config = llm_user_config(url, conversations=n, concurrency=c, crs="retrieval", client=client)
        return timed_run(config, work / f"{client}-{name}")

    return {"c32": run(sizes.conversations, 32, "r32"), "c1": run(sizes.retrieval_c1_conversations, 1, "r1")}


def _efficiency(r: RunFigures, c: int) -> dict[str, Any]:
    achieved = r.llm_calls / r.wall_s
    return {
        "calls": r.llm_calls,
        "wall_s": round(r.wall_s, 3),
        "calls_per_s": round(achieved, 1),
        "ideal_per_s": round(c / LATENCY_S, 1),
        "efficiency": round(achieved / (c / LATENCY_S), 3),
        "mean_call_ms": round(r.llm_wait_s / max(1, r.llm_calls) * 1000, 1),
        "cpu_ms_per_call": round(r.cpu_s / max(1, r.llm_calls) * 1000, 2),
    }


def _best_client(values: dict[str, float]) -> str:
    """The client with the highest value (the official one on a tie)."""
    return max(values, key=lambda client: (values[client], client == "official"))


def _headline_client(clients: Any) -> str:
    """The default client when it was run, else the first one."""
    clients = list(clients)
    return DEFAULT_CLIENT if DEFAULT_CLIENT in clients else clients[0]


def b1_efficiency(runs: dict[str, dict[Any, RunFigures]], retrieval: dict[str, dict[str, RunFigures]]) -> Scenario:
    """Achieved LLM calls/s over the ideal C/L at each concurrency, per client (echo CRS; BM25 CRS at C=32 too).

    The headline is the default client's efficiency at C=32, with the client named.
    """
    figures: dict[str, Any] = {}
    for client, by_c in runs.items():
        figures[client] = {f"C={c}": _efficiency(by_c[c], c) for c in CONCURRENCY}
        if client in retrieval:
            figures[client]["bm25_crs_C=32"] = _efficiency(retrieval[client]["c32"], 32)
    client = _headline_client(runs)
    figures["headline_client"] = client
    value = figures[client]["C=32"]["efficiency"]
    return Scenario(
        "B1",
        "concurrency efficiency (LLM user, L=50 ms)",
        f"efficiency at C=32 ({client} client)",
        value,
        ">= 0.9",
        value >= 0.9,
        figures,
    )


def high_concurrency_figures(llm_url: str, crs_url: str, sizes: Sizes, work: Path) -> dict[str, Any]:
    """B1 at C = 128 and 256 for each client: the LLM user against the iEvaLM test CRS, servers in their own processes."""
    return high_concurrency_runs(
        llm_url,
        crs_url,
        work,
        clients=sizes.clients,
        concurrency=HIGH_CONCURRENCY,
        per_slot=sizes.high_per_slot,
        minimum=sizes.high_conversations,
        latency_s=HIGH_LATENCY_S,
        repeats={DEFAULT_CLIENT: sizes.high_repeats},
    )


def b1_high_rows(figures: dict[str, Any]) -> list[Scenario]:
    """The C = 128 headlines of the default client: efficiency, CPU per LLM call, CPU per conversation."""
    client = _headline_client(figures)
    at = figures[client]["C=128"]
    where = f"C=128, L=200 ms, iEvaLM CRS, {client} client"
    eff, per_call, per_conv = at["efficiency"], at["cpu_ms_per_llm_call"], at["cpu_ms_per_conversation"]
    return [
        Scenario(
            "B1-128", "concurrency efficiency at C=128", f"efficiency ({where})", eff, ">= 0.85", eff >= 0.85, figures
        ),
        Scenario(
            "B1-cpu", "engine CPU per LLM call", f"CPU ms / LLM call ({where})", per_call, "<= 1", per_call <= 1.0
        ),
        Scenario(
            "B1-conv",
            "engine CPU per conversation",
            f"CPU ms / conversation ({where})",
            per_conv,
            "<= 8",
            per_conv <= 8.0,
        ),
    ]


def b7_first_conversation(llm_url: str, crs_url: str, work: Path, repeats: int = 3) -> Scenario:
    """Wall time from starting `usersimcrs run` to the first line of dialogues.jsonl (median of `repeats`)."""
    runs = timed_starts(llm_url, crs_url, work / "b7", repeats, pycache=work / "pycache")
    value = sorted(r["first_conversation_s"] for r in runs)[len(runs) // 2]
    figures = {"runs": runs, "llm_latency_ms": LATENCY_S * 1000, "crs": "iEvaLM test server (own process)"}
    return Scenario(
        "B7",
        "time to first conversation",
        "s from `usersimcrs run` start to the first record",
        value,
        "<= 1",
        value <= 1.0,
        figures,
    )


def _speedup(runs: dict[Any, RunFigures]) -> dict[str, Any]:
    c1, c32 = runs[1], runs["b2_c32"]
    assert c32.conversations == c1.conversations, "B2 compares the same conversations"
    return {
        "conversations": c1.conversations,
        "wall_s_c1": round(c1.wall_s, 2),
        "wall_s_c32": round(c32.wall_s, 2),
        "speedup": round(c1.wall_s / c32.wall_s, 2),
    }


def b2_speedup(runs: dict[str, dict[Any, RunFigures]]) -> Scenario:
    """Wall time at C=1 over wall time at C=32, same conversations, per client; headline the better one."""
    figures: dict[str, Any] = {client: _speedup(by_c) for client, by_c in runs.items()}
    best = _best_client({client: figures[client]["speedup"] for client in runs})
    figures["headline_client"] = best
    value = figures[best]["speedup"]
    return Scenario(
        "B2", "speedup C=1 -> C=32", f"wall(C=1) / wall(C=32) ({best} client)", value, ">= 25", value >= 25, figures
    )


def b3_cached_rerun(url: str, sizes: Sizes, work: Path) -> Scenario:
    """The same run twice against one response cache: the second must make no LLM call."""
    cache = str(work / "b3-cache")
    first = timed_run(
        llm_user_config(url, conversations=sizes.conversations, concurrency=32, cache_dir=cache), work / "b3-first"
    )
    second = timed_run(
        llm_user_config(url, conversations=sizes.conversations, concurrency=32, cache_dir=cache), work / "b3-second"
    )
    same = _texts(work / "b3-first") == _texts(work / "b3-second")
    figures = {
        "first": {"llm_calls": first.llm_calls, "cache_hits": first.cache_hits, "wall_s": round(first.wall_s, 3)},
        "second": {"llm_calls": second.llm_calls, "cache_hits": second.cache_hits, "wall_s": round(second.wall_s, 3)},
        "wall_ratio_first_over_second": round(first.wall_s / second.wall_s, 1),
        "identical_conversations": same,
    }
    return Scenario(
        "B3",
        "cached rerun",
        "LLM calls in the rerun",
        second.llm_calls,
        "== 0",
        second.llm_calls == 0 and same,
        figures,
    )


def _texts(run_dir: Path) -> dict[str, list[str]]:
    return {r["conversation_id"]: [u["text"] for u in r["utterances"]] for r in iter_jsonl(run_dir / "dialogues.jsonl")}


def _llm_share(llm: RunFigures) -> dict[str, Any]:
    return {
        "share_not_waiting_on_llm_call": round(1 - llm.llm_wait_s / llm.wall_s, 4),
        "share_beyond_server_latency": round(1 - llm.llm_calls * LATENCY_S / llm.wall_s, 4),
        "mean_call_ms": round(llm.llm_wait_s / max(1, llm.llm_calls) * 1000, 2),
    }


def b4_overhead(
    runs: dict[str, dict[Any, RunFigures]], retrieval: dict[str, dict[str, RunFigures]], sizes: Sizes, work: Path
) -> Scenario:
    """Engine share of wall time: agenda user without LLM, and the LLM user at C=1 against the 50 ms server.

    The headline uses the default client when it was run; the other client's share is listed too.
    """
    timed_run(agenda_config(conversations=20, concurrency=1, name="warmup"), work / "b4-warmup")  # pays first-use costs
    agenda = timed_run(agenda_config(conversations=sizes.agenda_conversations, concurrency=1), work / "b4-agenda")
    outside = 1 - (agenda.simulator_s + agenda.crs_s + agenda.profile_s) / agenda.wall_s
    headline_client = _headline_client(runs)
    figures: dict[str, Any] = {
        "agenda": {
            "conversations": agenda.conversations,
            "conversations_per_s": round(agenda.conversations / agenda.wall_s, 1),
            "share_outside_simulator_and_crs": round(outside, 4),
            "share_simulator": round(agenda.simulator_s / agenda.wall_s, 4),
            "share_crs": round(agenda.crs_s / agenda.wall_s, 4),
            "share_profile_generation": round(agenda.profile_s / agenda.wall_s, 4),
        },
        "headline_client": headline_client,
    }
    for client, by_c in runs.items():
        figures[f"llm_user_c1_{client}"] = _llm_share(by_c[1])
        if client in retrieval:
            bm25 = retrieval[client]["c1"]
            figures[f"llm_user_bm25_crs_c1_{client}"] = {
                "share_not_waiting_on_llm_call": round(1 - bm25.llm_wait_s / bm25.wall_s, 4),
                "share_in_crs": round(bm25.crs_s / bm25.wall_s, 4),
            }
    not_waiting = figures[f"llm_user_c1_{headline_client}"]["share_not_waiting_on_llm_call"]
    return Scenario(
        "B4",
        "engine overhead",
        f"toolkit share of wall (50 ms LLM, {headline_client} client)",
        not_waiting,
        "<= 0.05",
        not_waiting <= 0.05,
        figures,
    )


def b5_memory(sizes: Sizes, work: Path) -> Scenario:
    """Peak RSS of a fresh process running n conversations, for the two sizes, and the bytes per line it wrote.

    Lines are sized by the conversation (the profile is stored once per run in profiles.jsonl), so
    `line_bytes` (mean, max over dialogues.jsonl) stays the same from the small run to the large one.
    """
    small, large = sizes.memory_sizes
    peaks = {n: _child_peak(n, work / f"b5-{n}") for n in (small, large)}
    ratio = peaks[large]["peak_rss_mb"] / peaks[small]["peak_rss_mb"]
    figures: dict[str, Any] = {f"n={n}": p for n, p in peaks.items()}
    lines = figures["line_bytes"] = peaks[large]["line_bytes"]
    headline = f"peak RSS {large} / {small} (bytes per line: mean {lines['mean']:g}, max {lines['max']})"
    return Scenario("B5", "memory (streaming)", headline, round(ratio, 3), "<= 1.2", ratio <= 1.2, figures)


def _child_peak(conversations: int, out_dir: Path, *extra: str) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "benchmarks.memory_child",
        "--conversations",
        str(conversations),
        "--output",
        str(out_dir),
        *extra,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def b6_judge_cost(url: str, sizes: Sizes, work: Path) -> Scenario:
    """Tokens and calls per conversation for quality-5, core12 and core12+debate; cache and prompt reuse."""
    dialogues_path = work / "b4-agenda" / "dialogues.jsonl"
    figures = judge_costs(url, dialogues_path, sizes.judged_conversations, work)
    cached_calls = sum(f["rerun_llm_calls"] for f in figures.values())
    return Scenario(
        "B6", "judge cost", "LLM calls in cached re-judging", cached_calls, "== 0", cached_calls == 0, figures
    )


# --------------------------------------------------------------------------- the real workload (issue #22)

REAL_LATENCY_S = 0.2
REAL_CONCURRENCY = (128, 256)


def real_workload_figures(llm_url: Any, crs_url: Any, sizes: Sizes, work: Path) -> dict[str, Any]:
    """R1: the real workload at C = 128 and 256 (default client), with the servers' CPU beside the toolkit's."""
    runs = real_runs(
        llm_url,
        crs_url,
        work,
        concurrency=REAL_CONCURRENCY,
        minimum=sizes.real_conversations,
        per_slot=sizes.real_per_slot,
        repeats=sizes.real_repeats,
        latency_s=REAL_LATENCY_S,
    )
    return {"workload": workload(), "client": DEFAULT_CLIENT, **runs}


def r1_rows(figures: dict[str, Any]) -> list[Scenario]:
    """The real workload's targets (issue #22): efficiency at C = 128 and 256, CPU per LLM call and per
    conversation at C = 128, and the toolkit's share of all CPU (servers included) for context."""
    at, wide = figures["C=128"], figures["C=256"]
    fallback = " [FALLBACK 40-movie catalogue]" if figures["workload"]["fallback_catalogue"] else ""
    where = f"C=128, 6-call conversations, 13.8k items, HTTP/1.0 iEvaLM CRS{fallback}"
    eff, eff256 = at["efficiency"], wide["efficiency"]
    per_call, per_conv = at["cpu_ms_per_llm_call"], at["cpu_ms_per_conversation"]
    share = at["toolkit_share_of_cpu"]
    whole = at["failed"] == 0 and wide["failed"] == 0  # a failed conversation makes no figure of R1 pass
    return [
        Scenario(
            "R1", "real workload: efficiency", f"efficiency ({where})", eff, ">= 0.9", whole and eff >= 0.9, figures
        ),
        Scenario(
            "R1-256",
            "real workload: efficiency at C=256",
            "efficiency (C=256)",
            eff256,
            ">= 0.85",
            whole and eff256 >= 0.85,
        ),
        Scenario(
            "R1-cpu",
            "real workload: CPU per LLM call",
            f"toolkit CPU ms / LLM call ({where})",
            per_call,
            "<= 1",
            whole and per_call <= 1.0,
        ),  # fmt: skip
        Scenario(
            "R1-conv",
            "real workload: CPU per conversation",
            f"toolkit CPU ms / conversation ({where})",
            per_conv,
            "<= 6",
            whole and per_conv <= 6.0,
        ),  # fmt: skip
        Scenario(
            "R1-share",
            "real workload: toolkit share of CPU",
            "toolkit CPU / (toolkit + both servers), C=128",
            share,
            "-",
            None,
        ),  # fmt: skip
    ]


def r1_floor_rows(llm_url: Any, crs_url: Any, sizes: Sizes, work: Path) -> list[Scenario]:
    """R1-floor: the real workload's HTTP exchanges alone at C = 128 (the requests a short run sent,
    replayed with the toolkit's HTTP client and nothing else; `benchmarks/experiments.py`): the
    efficiency a toolkit doing no other work reaches with the servers on the same cores, and the CPU
    per conversation any toolkit pays for those twelve exchanges here. What R1 and R1-conv stand on."""
    exchanges = record_exchanges(llm_url, crs_url, work / "floor-recorded")
    n = max(sizes.real_conversations, sizes.real_per_slot * 128)
    runs = [
        floor_row(replay(llm_url, crs_url, exchanges, conversations=n, concurrency=128), 128, REAL_LATENCY_S)
        for _ in range(max(1, sizes.real_repeats))
    ]
    figures = median_figures(runs)
    where = "C=128, the real workload's 12 HTTP exchanges per conversation and no other work"
    return [
        Scenario(
            "R1-floor", "real workload: HTTP alone", f"efficiency ({where})", figures["efficiency"], "-", None, figures
        ),
        Scenario(
            "R1-floor-conv",
            "real workload: HTTP alone, CPU",
            "CPU ms / conversation of the HTTP exchanges alone (C=128)",
            figures["cpu_ms_per_conversation"],
            "-",
            None,
        ),
    ]


def r7_first_record(llm_url: Any, crs_url: Any, work: Path, repeats: int, startup_repeats: int) -> list[Scenario]:
    """R7: a fresh `usersimcrs run` of the real workload: seconds to its first LLM call (start-up) and to
    its first record, plus imports and data loading timed apart in fresh processes (medians)."""
    config = real_workload_config(llm_url, crs_url, conversations=4, concurrency=4, name="bench-real-first")
    pycache = work / "pycache"  # compiled modules, as after `pip install` or any earlier run
    cold = time_startup_parts(config, work / "r7-parts", None)  # nothing compiled yet: the worst first start
    runs = timed_starts(llm_url, None, work / "r7", repeats, pycache=pycache, config=config)
    parts = [time_startup_parts(config, work / "r7-parts", pycache) for _ in range(max(1, startup_repeats))]

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    first = median([r["first_conversation_s"] for r in runs])
    startup = median([r["first_llm_call_s"] for r in runs])
    figures = {
        "runs": runs,
        "startup_parts": {key: median([p[key] for p in parts]) for key in parts[0]},
        "startup_parts_runs": parts,
        "startup_parts_without_bytecode": cold,
        "bytecode": "cached (PYTHONPYCACHEPREFIX in the work folder, compiled by an untimed start)",
        "llm_latency_ms": REAL_LATENCY_S * 1000,
        "llm_calls_before_first_record": 6,
    }
    return [
        Scenario(
            "R7",
            "real workload: first record",
            "s from `usersimcrs run` start to the first record",
            first,
            "<= 1.5",
            first <= 1.5,
            figures,
        ),  # fmt: skip
        Scenario(
            "R7-start",
            "real workload: start-up",
            "s from `usersimcrs run` start to its first LLM call",
            startup,
            "<= 0.5",
            startup <= 0.5,
        ),  # fmt: skip
    ]


def r5_memory(llm_url: Any, crs_url: Any, sizes: Sizes, work: Path) -> Scenario:
    """R5: peak RSS of a fresh process running the real workload (C = 128) at two sizes: flat means streaming."""
    small, large = sizes.real_memory_sizes
    extra = ("--concurrency", str(REAL_CONCURRENCY[0]), "--llm-url", str(llm_url), "--crs-url", str(crs_url))
    peaks = {n: _child_peak(n, work / f"r5-{n}", *extra) for n in (small, large)}
    ratio = peaks[large]["peak_rss_mb"] / peaks[small]["peak_rss_mb"]
    figures: dict[str, Any] = {f"n={n}": p for n, p in peaks.items()}
    headline = f"peak RSS {large} / {small} conversations (real workload, C=128)"
    return Scenario("R5", "real workload: memory", headline, round(ratio, 3), "<= 1.2", ratio <= 1.2, figures)


# --------------------------------------------------------------------------- the embedded model (issue #36)


def b8_embedded(sizes: Sizes, work: Path) -> list[Scenario]:
    """B8: constrained tokens per second of the embedded model, lazy over eager grammar sampling on the
    same prompts in one run (alternated); B8-demo: the wall time of `usersimcrs quickstart`."""
    try:
        require_local_extra()
    except ConfigError as exc:
        return [Scenario("B8", "embedded structured output", f"not run: {exc}", None, f">= {SPEEDUP_TARGET}", None)]
    speed = tokens_per_second(sizes.embedded_rounds, sizes.embedded_max_tokens, demo_threads())  # as the demo runs
    threads = speed["n_threads"]
    narrow = ""
    if sizes.embedded_demo and threads != 1:  # not at --tiny: the same with one thread generating
        speed["one_thread"] = tokens_per_second(sizes.embedded_rounds, sizes.embedded_max_tokens, 1)
        narrow = f"; 1 thread: {speed['one_thread']['speedup']:g}x, ceiling {speed['one_thread']['ceiling']:g}"
    rows = [
        Scenario(
            "B8",
            "embedded structured output",
            f"lazy / eager constrained tokens per s, {threads} thread(s) as in the demo (same prompts, alternated: "
            f"eager {speed['eager_tokens_per_s']:g}, lazy {speed['lazy_tokens_per_s']:g}; ceiling {speed['ceiling']:g}; "
            f"same text {speed['same_text']}{narrow})",
            speed["speedup"],
            f">= {SPEEDUP_TARGET}, same text",
            speed_passed(speed),
            speed,
        )
    ]
    if not sizes.embedded_demo:
        rows.append(Scenario("B8-demo", "demo wall time", "not run at this size", None, f"< {DEMO_TARGET_S:g}", None))
        return rows
    demo = demo_wall(work / "b8")
    whole = demo["exit_code"] == 0
    slowest = demo["slowest_cell"]
    rows.append(
        Scenario(
            "B8-demo",
            "demo wall time",
            f"s of `usersimcrs quickstart` (slowest cell {slowest}: {demo['cells_wall_s'].get(slowest)} s; "
            f"CPU {demo['cpu_s']} s; load {demo['load_average_at_start'][0]:.2f})",
            demo["wall_s"] if whole else None,
            f"< {DEMO_TARGET_S:g}",
            whole and demo["wall_s"] < DEMO_TARGET_S,
            demo,
        )
    )
    return rows
