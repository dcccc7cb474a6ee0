"""B6: what judging costs per conversation, what the response cache saves, how much prompt text repeats."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.run_folder import load_run
from usersimcrs.runtime.context import RunContext
from usersimcrs.judges.base import judges
from usersimcrs.judges.estimate import estimate
from usersimcrs.judges.runner import JudgeRunSummary, judge_run
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider

SETUPS = {"quality-5": "quality", "core12": "core12", "core12+debate": "debate"}
CORE_PAPER_TOKENS = {"core12": 21_100, "core12+debate": 51_300}  # CoRE: tokens per log (12 factors; 4-round debate)


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of two strings."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def prefix_reuse(prompts: list[str]) -> float:
    """Share of prompt characters a prefix cache could reuse: each prompt's longest prefix seen before."""
    total = sum(len(p) for p in prompts)
    if not total:
        return 0.0
    reused = sum(max((common_prefix(p, q) for q in prompts[:i]), default=0) for i, p in enumerate(prompts))
    return reused / total


async def _judge(judge_name: str, url: str, dialogues: list[Dialogue], cache_dir: Path) -> dict[str, Any]:
    cls = judges.get(judge_name)
    judge = cls(cls.Config())
    provider = LLMProvider(
        LLMConfig(backend="openai", model="test-model", base_url=url, cache_dir=str(cache_dir), max_concurrency=32, retries=0)
    )
    context = RunContext(llms=provider)
    summary = JudgeRunSummary()
    try:
        await judge_run(judge, [(d, {}) for d in dialogues], context, cache_dir / f"{judge_name}.jsonl", summary, concurrency=8)
    finally:
        await provider.aclose()
    return {"usage": summary.usage, "llm": provider.usage_summary(), "statuses": dict(summary.statuses)}


def judge_costs(url: str, dialogues_path: Path, limit: int, work: Path) -> dict[str, dict[str, Any]]:
    """Per setup: planned calls/tokens per conversation (chars/4), calls made, cache rerun, prefix reuse."""
    dialogues = load_run(dialogues_path.parent).dialogues[:limit]  # profiles attached (ground truth, preferences)
    out: dict[str, dict[str, Any]] = {}
    for label, judge_name in SETUPS.items():
        cls = judges.get(judge_name)
        judge = cls(cls.Config())
        plans = [judge.plan(d) for d in dialogues]
        planned = [estimate(p) for p in plans]
        reuse = [prefix_reuse(["\n".join(m.content for m in call.messages) for call in p]) for p in plans]
        cache_dir = work / f"b6-{judge_name}"
        first = asyncio.run(_judge(judge_name, url, dialogues, cache_dir))
        second = asyncio.run(_judge(judge_name, url, dialogues, cache_dir))
        n = max(1, len(dialogues))
        tokens = sum(p["total_tokens"] for p in planned) / n
        figures = {
            "conversations": len(dialogues),
            "planned_calls_per_conversation": round(sum(p["calls"] for p in planned) / n, 2),
            "estimated_tokens_per_conversation": round(tokens),
            "calls_made_per_conversation": round(first["llm"].get("calls", 0) / n, 2),
            "statuses": first["statuses"],
            "rerun_llm_calls": int(second["llm"].get("calls", 0)),
            "rerun_cache_hits": int(second["llm"].get("cache_hits", 0)),
            "prompt_prefix_reuse": round(sum(reuse) / n, 3),
        }
        if label in CORE_PAPER_TOKENS:
            figures["core_paper_tokens_per_log"] = CORE_PAPER_TOKENS[label]
            figures["ratio_to_core_paper"] = round(tokens / CORE_PAPER_TOKENS[label], 3)
        out[label] = figures
    return out
