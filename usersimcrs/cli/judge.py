"""`usersimcrs judge RUN_DIR --judge NAME`: score a run's conversations with an LLM judge.

Appends to RUN_DIR/judgments.jsonl (resumable: what is stored is not redone), skips and counts
invalid conversations (failed, or fewer than two system turns) unless --include-invalid, and
adds the judge's token usage to RUN_DIR/manifest.json. --dry-run prints the number of calls and
an estimate of the tokens without calling any model.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from usersimcrs.errors import ConfigError, UserError

BACKENDS = ["auto", "ollama", "openai", "llamacpp"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "judge", help="score a run's conversations with an LLM judge (quality, core12, pepper, persuasiveness)"
    )
    parser.add_argument("run_dir", help="run folder with dialogues.jsonl")
    parser.add_argument("--judge", required=True, help="quality | core12 | pepper | persuasiveness (or a plug-in)")
    parser.add_argument("--debate", action="store_true", help="with --judge core12: add CoRE's multi-agent debate score")
    parser.add_argument("--rubric", help="a rubric YAML replacing the judge's built-in one")
    parser.add_argument("--debate-roles", help="a debate YAML replacing the built-in roles")
    parser.add_argument("--max-rounds", type=int, help="debate round limit (default 4)")
    parser.add_argument("--criteria", help="comma-separated subset of aspects/factors to score")
    parser.add_argument("--models", metavar="MAP.yaml", help="component -> LLM settings (mixture of evaluators)")
    parser.add_argument("--include-invalid", action="store_true", help="also judge failed or too-short conversations")
    parser.add_argument("--dry-run", action="store_true", help="print calls and estimated tokens; call nothing")
    parser.add_argument("--concurrency", type=int, default=4, help="conversations judged at once (default 4)")
    parser.add_argument("--limit", type=int, help="judge at most this many conversations")
    parser.add_argument("--max-attempts", type=int, help="LLM calls per score before recording a failure (default 3)")
    parser.add_argument("--max-tokens", type=int, help="completion cap per call")
    parser.add_argument("--llm-backend", choices=BACKENDS, help="LLM backend (default: the run's, else auto)")
    parser.add_argument("--model", help="model name")
    parser.add_argument("--base-url", help="server URL of the backend")
    parser.add_argument("--model-path", help="GGUF file for the llamacpp backend")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=handle)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Judge options from the command line (only the ones given)."""
    options: dict[str, Any] = {}
    if args.rubric:
        options["rubric"] = args.rubric
    if args.criteria:
        options["criteria"] = [c.strip() for c in args.criteria.split(",") if c.strip()]
    if args.max_attempts:
        options["max_attempts"] = args.max_attempts
    if args.max_tokens:
        options["max_tokens"] = args.max_tokens
    return options


def build_judge(args: argparse.Namespace):
    """The judge named on the command line (the debate wraps the CoRE factor judge)."""
    from usersimcrs.judges.base import JUDGES

    if args.debate and args.judge != "core12":
        raise UserError("--debate works with --judge core12 (the debate argues from CoRE's factor results)")
    name = "debate" if args.debate else args.judge
    cls = JUDGES.get(name)
    options = _options(args)
    if args.debate:
        factor_options = {k: v for k, v in options.items() if k != "max_tokens"}
        options = {"factors": factor_options, **({"max_tokens": args.max_tokens} if args.max_tokens else {})}
        if args.debate_roles:
            options["debate"] = args.debate_roles
        if args.max_rounds:
            options["max_rounds"] = args.max_rounds
    try:
        config = cls.Config.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"judge option {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return cls(config)


def base_llm_config(args: argparse.Namespace, manifest: dict[str, Any]):
    """The run's LLM settings (from its manifest) with the command-line overrides applied."""
    from usersimcrs.llm.config import LLMConfig

    data = dict((manifest.get("config") or {}).get("llm") or {})
    for key, value in (
        ("backend", args.llm_backend), ("model", args.model), ("base_url", args.base_url), ("model_path", args.model_path)
    ):
        if value is not None:
            data[key] = value
    if args.no_cache:
        data["cache"] = False
    try:
        return LLMConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"llm.{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.core.manifest import read_manifest
    from usersimcrs.judges.components import expand_models_map, load_models_map
    from usersimcrs.judges.estimate import estimate
    from usersimcrs.judges.runner import DIALOGUES, JUDGMENTS, load_judgments, plan_run, read_dialogues, select

    run_dir = Path(args.run_dir)
    if not (run_dir / DIALOGUES).exists():
        raise UserError(f"{run_dir}: no {DIALOGUES} (is this a run folder?)")
    judge = build_judge(args)
    dialogues = read_dialogues(run_dir)
    todo, summary = select(dialogues, judge, load_judgments(run_dir / JUDGMENTS), include_invalid=args.include_invalid)
    if args.limit is not None:
        todo = todo[: max(0, args.limit)]

    if args.dry_run:
        plan = plan_run(judge, todo)
        figures = estimate(plan)
        report = {
            "judge": judge.name, "conversations": len(todo), "already_done": summary.already_done,
            "skipped_invalid": dict(summary.skipped_invalid), **figures,
        }
        if args.debate:
            low = estimate(c for c in plan if c.judge != "debate" or c.name.endswith(":round1"))
            report["debate_one_round"] = low
            report["note"] = (
                "calls/tokens assume every debate runs to the round limit (upper bound); "
                "debate_one_round is the figure if all debates agree in round 1 (lower bound)"
            )
        _print(report, args.json, "dry run")
        return 0

    from usersimcrs.runtime.context import RunContext
    from usersimcrs.llm.provider import LLMProvider

    manifest = read_manifest(run_dir)
    models = load_models_map(args.models) if args.models else {}
    chains = judge.component_chains()
    provider = LLMProvider(base_llm_config(args, manifest), expand_models_map(models, chains))
    context = RunContext(llms=provider, run_dir=run_dir)
    summary = asyncio.run(_judge(judge, todo, context, run_dir / JUDGMENTS, summary, args.concurrency))
    from usersimcrs.judges.runner import record_usage

    record_usage(run_dir, judge.name, summary, provider.usage_summary())
    _print({"judge": judge.name, **summary.as_dict()}, args.json, str(run_dir / JUDGMENTS))
    return 0


async def _judge(judge, todo, context, out_path, summary, concurrency):
    from usersimcrs.judges.runner import judge_run

    total = len(todo)
    show = sys.stderr.isatty()

    def progress(dialogue, judgments) -> None:
        if show:
            failed = sum(n for status, n in summary.statuses.items() if status != "ok")
            print(
                f"\r{judge.name}: {summary.judged}/{total} conversations, {summary.written} judgments "
                f"({failed} without a value), {summary.usage.total_tokens} tokens",
                end="" if summary.judged < total else "\n", file=sys.stderr, flush=True,
            )

    try:
        return await judge_run(judge, todo, context, out_path, summary, concurrency=concurrency, on_done=progress)
    finally:
        await context.llms.aclose()


def _print(report: dict[str, Any], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    print(f"{title}:")
    for key, value in report.items():
        print(f"  {key}: {value}")
