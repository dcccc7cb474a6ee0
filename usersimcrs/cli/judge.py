"""`usersimcrs judge RUN_DIR --judge NAME`: score a run's conversations with an LLM judge.

Parses the flags into a `JudgeRequest`, calls `usersimcrs.pipeline.judge.judge` and prints its
result; see that module for what judging does (resume per model, skips, usage, abort on permanent
failures, dry runs).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pydantic import ValidationError

from usersimcrs.errors import ConfigError


def backend_choices() -> list[str]:
    """'auto' and every registered LLM backend (built-in and plug-in)."""
    from usersimcrs.llm.backends import llm_backends

    return ["auto", *llm_backends.names()]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "judge", help="score a run's conversations with an LLM judge (quality, core12, pepper, persuasiveness)"
    )
    parser.add_argument("run_dir", help="run folder")
    parser.add_argument("--judge", required=True, help="quality | core12 | pepper | persuasiveness (or a plug-in)")
    parser.add_argument(
        "--debate", action="store_true", help="with --judge core12: add CoRE's multi-agent debate score"
    )
    parser.add_argument("--rubric", help="a rubric YAML replacing the judge's built-in one")
    parser.add_argument("--debate-roles", help="a debate YAML replacing the built-in roles")
    parser.add_argument("--max-rounds", type=int, help="debate round limit (default 4)")
    parser.add_argument("--criteria", help="comma-separated subset of aspects/factors to score")
    parser.add_argument("--models", metavar="MAP.yaml", help="component -> LLM settings (mixture of evaluators)")
    parser.add_argument("--prompts", metavar="FILE", help="YAML replacing keys of the judges' scaffolding texts")
    parser.add_argument(
        "--batch-aspects",
        action="store_true",
        help="score all aspects/factors of a conversation in one structured call",
    )
    parser.add_argument(
        "--no-shared-rubric",
        action="store_true",
        help="put only the rated criterion's guideline in each prompt (shorter prompts, less prefix reuse)",
    )
    parser.add_argument("--include-invalid", action="store_true", help="also judge failed or too-short conversations")
    parser.add_argument(
        "--dedupe",
        action="store_true",
        help="a conversation ID on several lines: keep its first line (default: refuse the run, with the count)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print calls and estimated tokens; call nothing")
    parser.add_argument("--concurrency", type=int, default=4, help="conversations judged at once (default 4)")
    parser.add_argument("--limit", type=int, help="judge at most this many conversations")
    parser.add_argument("--max-attempts", type=int, help="LLM calls per score before recording a failure (default 3)")
    parser.add_argument("--max-tokens", type=int, help="completion cap per call")
    parser.add_argument("--llm-backend", choices=backend_choices(), help="LLM backend (default: the run's, else auto)")
    parser.add_argument(
        "--model", help="model name (for --judge learned: the model file of `usersimcrs evaluator train`)"
    )
    parser.add_argument("--base-url", help="server URL of the backend")
    parser.add_argument("--model-path", help="GGUF file for the llamacpp backend")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=handle)


def request_from(args: argparse.Namespace):
    """The `JudgeRequest` the command line describes."""
    from usersimcrs.pipeline.judge import JudgeRequest

    fields = {
        "judge": args.judge,
        "debate": args.debate,
        "rubric": args.rubric,
        "debate_roles": args.debate_roles,
        "max_rounds": args.max_rounds,
        "include_invalid": args.include_invalid,
        "dedupe": args.dedupe,
        "dry_run": args.dry_run,
        "concurrency": args.concurrency,
        "limit": args.limit,
        "max_attempts": args.max_attempts,
        "max_tokens": args.max_tokens,
        "no_cache": args.no_cache,
        "llm_backend": args.llm_backend,
        "model": args.model,
        "base_url": args.base_url,
        "model_path": args.model_path,
        "models_file": args.models,
        "prompts": args.prompts,
        "batch_aspects": args.batch_aspects,
        "shared_rubric": not args.no_shared_rubric,
        "criteria": [c.strip() for c in args.criteria.split(",") if c.strip()] if args.criteria else None,
    }
    try:
        return JudgeRequest.model_validate(fields)
    except ValidationError as exc:
        from usersimcrs.core.validation import describe_validation_error

        raise ConfigError(describe_validation_error(exc, source=None, flags=True)) from None


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.judge import judge

    result = judge(args.run_dir, request_from(args), progress=True)
    _print(result.report(), args.json, "dry run" if result.dry_run is not None else result.judgments_path)
    return 0


def _print(report: dict[str, Any], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    print(f"{title}:")
    for key, value in report.items():
        print(f"  {key}: {value}")
