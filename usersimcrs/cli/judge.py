"""`usersimcrs judge RUN_DIR --judge NAME`: score a run's conversations with an LLM judge.

Parses the flags into a `JudgeRequest`, calls `usersimcrs.pipeline.judge.judge` and prints its
result; see that module for what judging does (resume per model, skips, usage, abort on permanent
failures, dry runs).

Exit codes: 0 done; 2 a user-fixable error (bad key, model or URL: judging stops at once); 3 the
judgments are written but more than `--max-failed-share` of them have no value (a run in which
every judgment failed always exits 3).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import ValidationError

from usersimcrs.cli.options import add_dedupe
from usersimcrs.errors import ConfigError
from usersimcrs.llm.backends import llm_backends


def backend_choices() -> list[str]:
    """'auto' and every registered LLM backend (built-in and plug-in)."""
    return ["auto", *llm_backends.names()]


def _price(text: str) -> tuple[float, float]:
    """'0.15,0.6' -> (0.15, 0.6): dollars per million prompt and completion tokens."""
    try:
        prompt, completion = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected IN,OUT dollars per million tokens, e.g. 0.15,0.6; got {text!r}"
        ) from None
    return prompt, completion


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "judge", help="score the conversations of a run (or of every cell of a matrix) with a judge"
    )
    parser.add_argument("run_dir", help="run folder, or a matrix (each written cell is judged)")
    parser.add_argument(
        "--judge",
        required=True,
        help="quality | core12 | pepper | persuasiveness | crsarena (CRSArena-Eval's aspects) | learned (the zero-LLM "
        "evaluator; --model names its file) | a plug-in",
    )
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
    add_dedupe(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the model, calls, estimated tokens and cost; call nothing"
    )
    parser.add_argument(
        "--price",
        type=_price,
        metavar="IN,OUT",
        help="US dollars per million prompt and completion tokens, for the cost a dry run prints "
        "(default: the bundled OpenAI list prices; local models have none)",
    )
    parser.add_argument(
        "--max-failed-share",
        type=float,
        default=0.2,
        metavar="SHARE",
        help="exit 3 when a larger share (0..1) of the judgments asked for has no value (default 0.2)",
    )
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
    parser.add_argument(
        "--items", metavar="CSV", help="--judge learned: the item catalogue, when not where the model was trained"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the LLM response cache")
    parser.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the GET that shows each LLM server the judge calls answers and takes the key, before the first call",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(func=handle)


def request_from(args: argparse.Namespace):
    """The `JudgeRequest` the command line describes."""
    from usersimcrs.pipeline.judge import JudgeRequest  # lazy: keeps `usersimcrs --help` fast

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
        "items": args.items,
        "models_file": args.models,
        "prompts": args.prompts,
        "batch_aspects": args.batch_aspects,
        "shared_rubric": not args.no_shared_rubric,
        "max_failed_share": args.max_failed_share,
        "preflight": args.preflight,
        "price": args.price,
        "criteria": [c.strip() for c in args.criteria.split(",") if c.strip()] if args.criteria else None,
    }
    try:
        return JudgeRequest.model_validate(fields)
    except ValidationError as exc:
        from usersimcrs.core.validation import describe_validation_error  # lazy: keeps `usersimcrs --help` fast

        raise ConfigError(describe_validation_error(exc, source=None, flags=True)) from None


EXIT_TOO_MANY_FAILED = 3


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.judge import judge  # lazy: keeps `usersimcrs --help` fast

    result = judge(args.run_dir, request_from(args), progress=True)
    _print(result.report(), args.json, "dry run" if result.dry_run is not None else result.judgments_path)
    if result.dry_run is not None:
        return 0
    if args.judge == "learned" and args.model:
        # lazy: keeps `usersimcrs --help` fast
        from usersimcrs.pipeline.evaluator import in_training_line, training_count

        print(in_training_line(*training_count(args.run_dir, args.model)), file=sys.stderr if args.json else sys.stdout)
    if result.failures and not args.json:
        print(f"failed judgments: {result.failed} of {result.asked}; by reason:")
        for failure in result.failures[:5]:
            print(f"  {failure.count:>5}  {failure.reason}")
        if len(result.failures) > 5:
            print(f"  ({len(result.failures) - 5} more reasons)")
    if result.exceeds_failed_share:
        print(
            f"error: {result.failed} of {result.asked} judgments failed ({result.failed_share:.0%}), "
            f"more than max_failed_share {result.max_failed_share:g}",
            file=sys.stderr,
        )
        return EXIT_TOO_MANY_FAILED
    return 0


def _print(report: dict[str, Any], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return
    print(f"{title}:")
    for key, value in report.items():
        if key == "models" and isinstance(value, dict):
            for model, planned in value.items():
                print(f"  model {model}: {_planned(planned)}")
        elif key == "cost_usd":
            print(
                f"  cost: {_dollars(value)}"
                if value is not None
                else "  cost: unknown (no price for a model "
                "above; give one with --price IN,OUT in US dollars per million prompt and completion tokens)"
            )
        else:
            print(f"  {key}: {value}")


def _planned(planned: dict[str, Any]) -> str:
    """One model's share of a dry run: calls, estimated tokens and cost."""
    cost = _dollars(planned["cost_usd"]) if planned.get("cost_usd") is not None else "cost unknown"
    return (
        f"{planned['calls']} calls, ~{planned['total_tokens']:,} tokens ({planned['prompt_tokens']:,} prompt + "
        f"{planned['completion_tokens']:,} completion), {cost} ({planned['price']})"
    )


def _dollars(value: float) -> str:
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"
