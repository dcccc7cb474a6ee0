"""B6: what judging costs per conversation, what the response cache saves, how much prompt text repeats."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.run_folder import load_run
from usersimcrs.judges.base import judges
from usersimcrs.judges.estimate import estimate
from usersimcrs.judges.runner import JudgeRunSummary, judge_run, prefix_chars
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext

SETUPS = {"quality-5": "quality", "core12": "core12", "core12+debate": "debate"}
BATCHED = {"quality-5 batched": "quality", "core12 batched": "core12"}
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


def run_prefix_reuse(plans: list[list[Any]]) -> float:
    """`prefix_reuse` over every prompt of a run in call order (what one server's prefix cache sees)."""
    return prefix_reuse(["\n".join(m.content for m in call.messages) for plan in plans for call in plan])


def _config(judge_name: str, batch: bool) -> Any:
    cls = judges.get(judge_name)
    if not batch:
        return cls(cls.Config())
    # a judge built on others (the debate over CoRE's factors) batches through the options of those
    options = {"factors": {"batch": True}} if "factors" in cls.Config.model_fields else {"batch": True}
    return cls(cls.Config.model_validate(options))


def judge_components(judge: Any) -> list[str]:
    """The LLM components whose prompts belong to `judge` (criteria, batched calls, debate roles)."""
    return [*judge.component_chains(), f"judge.{judge.name}", *(f"judge.{n}" for n in judge.reused_judges())]


async def _judge(
    judge_name: str, url: str, dialogues: list[Dialogue], cache_dir: Path, batch: bool = False
) -> dict[str, Any]:
    judge = _config(judge_name, batch)
    provider = LLMProvider(
        LLMConfig(
            backend="openai", model="test-model", base_url=url, cache_dir=str(cache_dir), max_concurrency=32, retries=0
        )
    )
    context = RunContext(llms=provider)
    summary = JudgeRunSummary()
    try:
        await judge_run(
            judge, [(d, {}) for d in dialogues], context, cache_dir / f"{judge_name}.jsonl", summary, concurrency=8
        )
    finally:
        await provider.aclose()
    llm = provider.usage_summary()
    chars = prefix_chars(llm, judge_components(judge))
    share = chars["prefix_reused_chars"] / chars["prompt_chars"] if chars["prompt_chars"] else 0.0
    return {"usage": summary.usage, "llm": llm, "statuses": dict(summary.statuses), "prefix_reuse": share}


def judge_costs(url: str, dialogues_path: Path, limit: int, work: Path) -> dict[str, dict[str, Any]]:
    """Per setup: planned calls/tokens per conversation (chars/4), calls made, cache rerun, prefix reuse.

    Prefix reuse, from the real prompt builder: `prompt_prefix_reuse` = what the LLM layer counted
    on the first (uncached) run, every call against the prompts sent before it to the same model
    (run-wide, as a server's prefix cache sees them); `prompt_prefix_reuse_plan` = the same over the
    planned prompts, character-exact; `prompt_prefix_reuse_within_conversation` = only across the
    calls of one conversation (averaged), which bounds what one conversation gains on its own.
    """
    dialogues = load_run(dialogues_path.parent).dialogues[:limit]  # profiles attached (ground truth, preferences)
    out: dict[str, dict[str, Any]] = {}
    setups = [(label, name, False) for label, name in SETUPS.items()] + [
        (label, name, True) for label, name in BATCHED.items()
    ]
    for label, judge_name, batch in setups:
        judge = _config(judge_name, batch)
        plans = [judge.plan(d) for d in dialogues]
        planned = [estimate(p) for p in plans]
        reuse = [prefix_reuse(["\n".join(m.content for m in call.messages) for call in p]) for p in plans]
        cache_dir = work / f"b6-{judge_name}{'-batched' if batch else ''}"
        first = asyncio.run(_judge(judge_name, url, dialogues, cache_dir, batch))
        second = asyncio.run(_judge(judge_name, url, dialogues, cache_dir, batch))
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
            "prompt_prefix_reuse": round(first["prefix_reuse"], 3),
            "prompt_prefix_reuse_plan": round(run_prefix_reuse(plans), 3),
            "prompt_prefix_reuse_within_conversation": round(sum(reuse) / n, 3),
        }
        if label in CORE_PAPER_TOKENS:
            figures["core_paper_tokens_per_log"] = CORE_PAPER_TOKENS[label]
            figures["ratio_to_core_paper"] = round(tokens / CORE_PAPER_TOKENS[label], 3)
        out[label] = figures
    return out
