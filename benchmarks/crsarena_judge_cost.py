"""The CRSArena-Eval judge's cost and prompt-prefix reuse, measured the way B6 measures the other judges.

    python -m benchmarks.crsarena_judge_cost [--conversations 30]

Judges the first N conversations of the converted ReDial half of CRSArena-Eval (../shared/data)
against the benchmark LLM server (a subprocess with scripted latency) and prints, per conversation,
the calls and estimated tokens, and the three prefix-reuse figures of B6: `prompt_prefix_reuse`
(what the LLM layer counted, run-wide), `prompt_prefix_reuse_plan` (character-exact over the planned
prompts) and `prompt_prefix_reuse_within_conversation` (calls of one conversation only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.judge_cost import judge_components, prefix_reuse, run_prefix_reuse
from benchmarks.server import llm_server
from usersimcrs.judges.base import judges
from usersimcrs.judges.estimate import estimate
from usersimcrs.judges.runner import JudgeRunSummary, judge_run, prefix_chars
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.pipeline.convert import convert_dataset
from usersimcrs.pipeline.sources import load_sources
from usersimcrs.runtime.context import RunContext

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "data" / "raw" / "crsarena_eval" / "crs_arena_eval_redial.json"


async def _judge(url: str, dialogues: list, cache_dir: Path) -> dict:
    cls = judges.get("crsarena")
    judge = cls(cls.Config())
    provider = LLMProvider(
        LLMConfig(backend="openai", model="test-model", base_url=url, cache_dir=str(cache_dir), retries=0)
    )
    summary = JudgeRunSummary()
    try:
        await judge_run(
            judge,
            [(d, {}) for d in dialogues],
            RunContext(llms=provider),
            cache_dir / "j.jsonl",
            summary,
            concurrency=8,
        )
    finally:
        await provider.aclose()
    llm = provider.usage_summary()
    chars = prefix_chars(llm, judge_components(judge))
    return {
        "calls": llm.get("calls", 0),
        "statuses": dict(summary.statuses),
        "prefix_reuse": chars["prefix_reused_chars"] / chars["prompt_chars"] if chars["prompt_chars"] else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.crsarena_judge_cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--conversations", type=int, default=30)
    parser.add_argument("--source", default=str(SOURCE))
    args = parser.parse_args(argv)

    if not Path(args.source).exists():
        print(f"{args.source}: not found (needs the shared CRSArena-Eval ReDial half)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="crsarena-judge-") as tmp:
        work = Path(tmp)
        convert_dataset("crsarena-eval", [args.source], work / "corpus")
        dialogues = [d for s in load_sources(work / "corpus") for d in s.run.dialogues][: args.conversations]
        cls = judges.get("crsarena")
        judge = cls(cls.Config())
        plans = [judge.plan(d) for d in dialogues]
        planned = estimate(call for plan in plans for call in plan)
        n = max(1, len(dialogues))
        with llm_server(5.0) as url:
            measured = asyncio.run(_judge(url, dialogues, work / "cache"))
        within = [prefix_reuse(["\n".join(m.content for m in c.messages) for c in plan]) for plan in plans]
        figures = {
            "conversations": len(dialogues),
            "assistant_turns_per_conversation": round(sum(len(d.agent_turns) for d in dialogues) / n, 2),
            "planned_calls_per_conversation": round(planned["calls"] / n, 2),
            "estimated_tokens_per_conversation": round(planned["total_tokens"] / n),
            "calls_made_per_conversation": round(measured["calls"] / n, 2),
            "statuses": measured["statuses"],
            "prompt_prefix_reuse": round(measured["prefix_reuse"], 3),
            "prompt_prefix_reuse_plan": round(run_prefix_reuse(plans), 3),
            "prompt_prefix_reuse_within_conversation": round(sum(within) / n, 3),
        }
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
