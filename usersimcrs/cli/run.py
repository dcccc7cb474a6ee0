"""`usersimcrs run CONFIG`: run one simulator against one CRS and write a run folder.

Exit codes: 0 done; 2 a user-fixable error (bad config, a missing data file, a CRS or LLM server that
cannot be used: nothing is written);
3 the run is written but more than `max_failed_share` of its conversations failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from usersimcrs.config import load_run_config
from usersimcrs.core.generation import canned_warning
from usersimcrs.pipeline.simulate import SimulationResult, simulate

EXIT_TOO_MANY_FAILED = 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="run simulated conversations with a CRS")
    parser.add_argument("config", help="run config (YAML)")
    parser.add_argument("--output", "-o", help="run folder (default: config 'output', else runs/<name>)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set conversations=5 --set llm.backend=ollama",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a killed run: skip completed conversations, run failed ones again",
    )
    parser.add_argument(
        "--keep-failed", action="store_true", help="with --resume, keep failed conversations as they are"
    )
    parser.add_argument(
        "--no-crs-check",
        dest="check_crs",
        action="store_false",
        help="skip the CRS health check before the first conversation",
    )
    parser.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the checks before the first conversation: the CRS health check and the GET that shows each "
        "LLM server the run calls answers and takes the key",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run folder")
    parser.add_argument("--report", action="store_true", help="compute metrics and write report.html afterwards")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    config = load_run_config(args.config, args.overrides)
    output = Path(args.output or config.output or Path("runs") / config.name)
    result = simulate(
        config,
        output,
        resume=args.resume,
        overwrite=args.overwrite,
        keep_failed=args.keep_failed,
        check_crs=args.check_crs and args.preflight,
        check_llms=args.preflight,
        source=args.config,
        report=args.report,
    )
    warning = canned_warning(result.user_turns.get("fallback", 0), result.user_turns.get("labelled", 0))
    if warning is not None:  # the run's output opens with it: its figures measure answers to canned lines
        print(warning)
    print(summary_line(result))
    for line in [*user_turn_lines(result), *failure_lines(result)]:
        print(line)
    if result.report_path is not None:
        print(f"written: {result.report_path}")
    if result.exceeds_failed_share:
        failures = result.failures
        print(
            f"error: {failures.failed} of {failures.total} conversations failed ({failures.share:.0%}), "
            f"more than max_failed_share {result.max_failed_share:g}",
            file=sys.stderr,
        )
        return EXIT_TOO_MANY_FAILED
    return 0


def summary_line(result: SimulationResult) -> str:
    """The one-line summary: counts of this session, ambiguous titles, time and LLM usage."""
    llm = result.llm
    return (
        f"{result.output_dir}: {result.completed} completed, {result.failed} failed"
        + (f", {result.skipped} already done" if result.skipped else "")
        + (f", {result.retried} failed ones re-run" if result.retried else "")
        + (f", {result.ambiguous_items} ambiguous item titles" if result.ambiguous_items else "")
        + f" in {result.wall_s:.1f}s; LLM calls {llm.get('calls', 0)}, cache hits {llm.get('cache_hits', 0)}, "
        f"tokens {llm.get('prompt_tokens', 0) + llm.get('completion_tokens', 0)}"
    )


def user_turn_lines(result: SimulationResult) -> list[str]:
    """What the LLM user sent that its model did not write as asked (nothing for rule-based users)."""
    turns = result.user_turns
    if not turns.get("fallback") and not turns.get("repaired"):
        return []
    return [
        f"LLM user turns not as the model wrote them: {turns.get('fallback', 0)} fallback (canned, not the model's "
        f"words), {turns.get('repaired', 0)} repaired (prose for JSON, or a cut answer closed) of "
        f"{turns.get('labelled', 0)}; the validity gate flags these conversations "
        "(simulator.on_unusable: fail fails them instead)"
    ]


def failure_lines(result: SimulationResult, top: int = 5) -> list[str]:
    """The most frequent failure reasons of the run folder, with counts (nothing when none failed)."""
    failures = result.failures
    if not failures.failed:
        return []
    lines = [f"failed conversations: {failures.failed} of {failures.total}; top reasons:"]
    lines += [f"  {reason.count:>5}  {reason.reason}" for reason in failures.top(top)]
    if len(failures.reasons) > top:
        lines.append(f"  ({len(failures.reasons) - top} more reasons)")
    return lines
