"""Timed runs: an LLM source that times every call, to split wall time into 'waiting on the LLM' and the
rest, `timed_run`, which runs a config and collects its timings (every scenario module uses it), and the
figures every scenario derives from a run: per-call costs, the median of repeats, the load average."""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from usersimcrs.config import RunConfig
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.engine.loop import run_coroutine
from usersimcrs.engine.runner import build_context, close_context, run_async
from usersimcrs.llm.base import LLM, LLMResult


class TimedLLM(LLM):
    """Forwards to an LLM and adds the wall time of each call to its source's total."""

    def __init__(self, inner: LLM, source: TimedLLMs) -> None:
        self.inner = inner
        self.source = source
        self.backend = getattr(inner, "backend", "")
        self.model = getattr(inner, "model", "")

    async def complete(self, messages: Any, **kwargs: Any) -> LLMResult:
        started = time.perf_counter()
        try:
            return await self.inner.complete(messages, **kwargs)
        finally:
            self.source.wait_s += time.perf_counter() - started
            self.source.calls += 1


class TimedLLMs:
    """Wraps an LLMProvider: same components, same usage summary, plus summed call time."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.wait_s = 0.0
        self.calls = 0
        self._llms: dict[str, TimedLLM] = {}

    def get(self, component: str) -> TimedLLM:
        if component not in self._llms:
            self._llms[component] = TimedLLM(self.provider.get(component), self)
        return self._llms[component]

    def usage_summary(self) -> dict[str, Any]:
        return self.provider.usage_summary()

    async def aclose(self) -> None:
        await self.provider.aclose()


@dataclass
class RunFigures:
    """What one timed run did."""

    wall_s: float
    conversations: int
    failed: int
    llm_calls: int
    cache_hits: int
    llm_wait_s: float
    simulator_s: float
    crs_s: float
    profile_s: float
    cpu_s: float = 0.0
    cpu_user_s: float = 0.0  # of cpu_s: in user mode (the rest is the kernel's, socket work included)


async def _timed_run_async(config: RunConfig, out_dir: Path) -> RunFigures:
    context = build_context(config, out_dir)
    timed = TimedLLMs(context.llms)
    context.llms = timed  # type: ignore[assignment]
    cpu_started, times_started = time.process_time(), os.times()
    try:
        summary = await run_async(config, out_dir, overwrite=True, context=context)
    finally:
        cpu_s = time.process_time() - cpu_started
        cpu_user_s = os.times().user - times_started.user
        await close_context(context)
    sim_s = crs_s = profile_s = 0.0
    for record in iter_jsonl(out_dir / "dialogues.jsonl"):
        timings = record.get("timings", {})
        sim_s += float(timings.get("simulator_s", 0.0))
        crs_s += float(timings.get("crs_s", 0.0))
        profile_s += float(timings.get("profile_s", 0.0))
    return RunFigures(
        wall_s=summary.wall_s,
        conversations=summary.completed + summary.failed,
        failed=summary.failed,
        llm_calls=int(summary.llm.get("calls", 0)),
        cache_hits=int(summary.llm.get("cache_hits", 0)),
        llm_wait_s=timed.wait_s,
        simulator_s=sim_s,
        crs_s=crs_s,
        profile_s=profile_s,
        cpu_s=cpu_s,
        cpu_user_s=cpu_user_s,
    )


def timed_run(config: RunConfig, out_dir: Path) -> RunFigures:
    """Run `config` into `out_dir` (replacing it) and collect timings and LLM counts."""
    return run_coroutine(_timed_run_async(config, out_dir), config.event_loop)


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, rounded (None where the OS has none)."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def call_figures(r: RunFigures, concurrency: int, latency_s: float) -> dict[str, Any]:
    """Conversations/s, efficiency (achieved LLM calls/s over C / L) and CPU per call and per conversation."""
    achieved = r.llm_calls / r.wall_s
    ideal = concurrency / latency_s
    return {
        "conversations": r.conversations,
        "failed": r.failed,
        "llm_calls": r.llm_calls,
        "llm_calls_per_conversation": round(r.llm_calls / max(1, r.conversations), 2),
        "wall_s": round(r.wall_s, 2),
        "conversations_per_s": round(r.conversations / r.wall_s, 1),
        "calls_per_s": round(achieved, 1),
        "ideal_calls_per_s": round(ideal, 1),
        "efficiency": round(achieved / ideal, 3),
        "mean_call_ms": round(r.llm_wait_s / max(1, r.llm_calls) * 1000, 1),
        "cpu_ms_per_llm_call": round(r.cpu_s / max(1, r.llm_calls) * 1000, 2),
        "cpu_ms_per_conversation": round(r.cpu_s / max(1, r.conversations) * 1000, 2),
    }


def median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run's figures, or for several: the median of each number with every run's headline values
    listed, except `failed`, the sum (a conversation that failed in any run is not hidden by a median);
    values that are not numbers (load averages, server CPU by process) are the first run's."""
    if len(runs) == 1:
        return runs[0]
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [run[key] for run in runs]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        out[key] = (sum(values) if key == "failed" else statistics.median(values)) if numbers else value
    out["repeats"] = len(runs)
    for key in ("efficiency", "cpu_ms_per_llm_call", "cpu_ms_per_conversation", "toolkit_share_of_cpu"):
        if key in runs[0]:
            out[f"{key}_runs"] = [run[key] for run in runs]
    return out
