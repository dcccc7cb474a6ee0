"""Fault-injection study: an LLM user against a flaky HTTP CRS and a flaky LLM server, then judged.

Used by tests/test_reliability_faults.py (which asserts on it) and runnable on its own for the
figures in docs/reliability.md::

    python -m benchmarks.reliability [--conversations 200]

The CRS fails a share of replies with a mix of HTTP 500, hangs past the client timeout, non-JSON
bodies, empty text, oversize bodies and connection resets; the LLM server returns truncated
(malformed) or empty completions for a share of calls, and for a share of judge prompts answers
prose without any score, so that judge parse failures reach the judgment records.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.engine.runner import run_async
from usersimcrs.judges.base import judges
from usersimcrs.judges.runner import JudgeRunSummary, judge_run
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.crs_servers import FAULT_KINDS, FaultPlan, GenericJSONApp, LocalCRSServer
from usersimcrs.testing.llm_server import LLMServer, request_schema

ROOT = Path(__file__).resolve().parents[1]
NO_SCORE_REPLY = "Hard to say; the recommender was fine in parts and not in others."


@dataclass(frozen=True)
class FaultStudy:
    """How many conversations, how flaky each server is, and the seeds of the fault draws."""

    conversations: int = 200
    concurrency: int = 16
    crs_fault_share: float = 0.2
    llm_fault_share: float = 0.3
    judge_no_score_share: float = 0.3
    judged: int = 40
    seed: int = 7
    crs_timeout_s: float = 0.5


def judge_replies(share: float) -> Callable[[dict[str, Any]], str | None]:
    """Server replies: prose without a score for `share` of judge prompts (stable across retries)."""

    def reply(body: dict[str, Any]) -> str | None:
        schema = request_schema("openai", body) or {}
        if "rating" not in (schema.get("properties") or {}):
            return None
        head = json.dumps((body.get("messages") or [])[:2], sort_keys=True)
        draw = int(hashlib.sha256(head.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        return NO_SCORE_REPLY if draw < share else None

    return reply


def run_config(study: FaultStudy, llm_url: str, crs_url: str, cache_dir: Path) -> RunConfig:
    """The single-prompt LLM user against the generic JSON CRS over HTTP, short waits between retries."""
    return RunConfig.model_validate(
        {
            "name": "faults",
            "seed": study.seed,
            "conversations": study.conversations,
            "concurrency": study.concurrency,
            "max_turns": 4,
            "conversation_timeout_s": 60,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "llm": {
                "backend": "openai",
                "model": "test-model",
                "base_url": llm_url,
                "retries": 3,
                "backoff_s": 0.01,
                "max_wait_s": 0.05,
                "timeout_s": 5,
                "max_concurrency": 32,
                "cache_dir": str(cache_dir),
            },
            "simulator": {"type": "llm_single", "max_tokens": 48},
            "crs": {
                "type": "http",
                "url": crs_url + "api/chat",
                "request_template": {"session": "{conversation_id}", "text": "{message}", "history": "{history}"},
                "text_path": "reply.text",
                "items_path": "reply.recommendations[*]",
                "item_id_field": "movie_id",
                "item_title_field": "name",
                "timeout_s": study.crs_timeout_s,
                "retries": 2,
                "backoff_s": 0.01,
                "max_backoff_s": 0.05,
                "max_response_bytes": 200_000,
            },
            "progress": False,
        }
    )


async def _judge(dialogues: list[Dialogue], llm_url: str, out: Path, cache_dir: Path) -> list[dict[str, Any]]:
    judge = judges.get("quality")(judges.get("quality").Config())
    provider = LLMProvider(
        LLMConfig(
            backend="openai",
            model="test-model",
            base_url=llm_url,
            retries=3,
            backoff_s=0.01,
            max_wait_s=0.05,
            timeout_s=5,
            max_concurrency=32,
            cache_dir=str(cache_dir),
        )  # fmt: skip
    )
    try:
        await judge_run(
            judge, [(d, {}) for d in dialogues], RunContext(llms=provider), out, JudgeRunSummary(), concurrency=8
        )
    finally:
        await provider.aclose()
    return list(iter_jsonl(out))


async def fault_study(study: FaultStudy, work: Path, *, faults: bool = True) -> dict[str, Any]:
    """Run the study (with or without faults) in `work`; returns figures, records and judgments."""
    crs_plan = FaultPlan(
        rates={kind: study.crs_fault_share / len(FAULT_KINDS) for kind in FAULT_KINDS} if faults else {},
        seed=study.seed,
        hang_s=study.crs_timeout_s * 3,
        oversize_bytes=400_000,
    )
    llm_faults = {"malformed": study.llm_fault_share * 2 / 3, "empty": study.llm_fault_share / 3} if faults else {}
    judge_share = study.judge_no_score_share if faults else 0.0
    with (
        LLMServer(replies=judge_replies(judge_share), fault_share=llm_faults, seed=study.seed, hang_s=2) as llm,
        LocalCRSServer(GenericJSONApp(), crs_plan) as crs,
    ):
        config = run_config(study, llm.openai_url, crs.url, work / "cache")
        started = time.perf_counter()
        summary = await run_async(config, work / "run", overwrite=True)
        wall_s = time.perf_counter() - started
        records = list(iter_jsonl(work / "run" / "dialogues.jsonl"))
        ok = [Dialogue.model_validate(r) for r in records if r["status"] == "ok"][: study.judged]
        judgments = await _judge(ok, llm.openai_url, work / "judgments.jsonl", work / "judge-cache")
        crs_exchanges = crs.exchanges("/api/chat")
        llm_counters = llm.counters
    failed = [r for r in records if r["status"] != "ok"]
    figures = {
        "conversations": len(records),
        "completed": summary.completed,
        "failed": summary.failed,
        "share_completed": round(summary.completed / max(1, len(records)), 3),
        "wall_s": round(wall_s, 2),
        "crs_requests": len(crs_exchanges),
        "crs_faults_injected": sum(1 for e in crs_exchanges if e.fault),
        "llm_requests": llm_counters.get("chat", 0),
        "llm_faults_injected": sum(llm_counters.get("faults", {}).values()),
        "llm_retries": int(summary.llm.get("retries", 0)),
        "failure_reasons": _reason_counts(failed),
        "judgments": len(judgments),
        "judgment_statuses": _count(j["status"] for j in judgments),
    }
    return {"figures": figures, "records": records, "judgments": judgments, "study": asdict(study)}


def _reason_counts(failed: list[dict[str, Any]]) -> dict[str, int]:
    return _count((r.get("error") or "").split(":")[0] for r in failed)


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    """Print the figures of a faulty and a fault-free run of the same study, and the time overhead."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reliability", description="fault-injection figures")
    parser.add_argument("--conversations", type=int, default=200)
    args = parser.parse_args(argv)
    study = FaultStudy(conversations=args.conversations)
    with tempfile.TemporaryDirectory() as folder:
        clean = asyncio.run(fault_study(study, Path(folder) / "clean", faults=False))["figures"]
        faulty = asyncio.run(fault_study(study, Path(folder) / "faulty"))["figures"]
    report = {"faulty": faulty, "clean": clean, "time_overhead": round(faulty["wall_s"] / clean["wall_s"], 2)}
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
