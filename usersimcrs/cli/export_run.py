"""`usersimcrs export-run RUN --output FILE`: a judge's aspect scores as a CRSArena-Eval run file."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "export-run",
        help="write a judge's CRSArena-Eval aspect scores as a run file (for meta-eval or the public interface)",
        description="Write the stored judgments of one judge as a CRSArena-Eval run file: conv_id, turns[].turn_ind, "
        "turns[].turn_level_pred, dial_level_pred. See docs/meta-evaluation.md.",
    )
    parser.add_argument("run", help="run folder or matrix whose judgments to export")
    parser.add_argument("--output", "-o", required=True, metavar="FILE", help="run file to write (JSON)")
    parser.add_argument("--judge", help="which judge's scores (needed when several judges scored aspects)")
    parser.add_argument("--model", help="which judge model (needed when the judge ran with several)")
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="NAME=ASPECT",
        help="use judgment NAME as ASPECT (e.g. overall_satisfaction=dialogue_overall); repeatable",
    )
    parser.add_argument(
        "--all-aspects",
        action="store_true",
        help="also write preference_elicitation and explanation (the official rule reads seven aspects)",
    )
    parser.add_argument("--allow-failed", action="store_true", help="exit 0 even when failed judgments were left out")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import sys

    from usersimcrs.pipeline.export_run import export_run_file, parse_aspect_map  # lazy: keeps `usersimcrs --help` fast

    result = export_run_file(
        args.run,
        args.output,
        judge=args.judge,
        model=args.model,
        aspect_map=parse_aspect_map(args.map),
        all_aspects=args.all_aspects,
    )
    counts = ", ".join(f"{k} {v}" for k, v in result.predictions.items()) or "none"
    model = f" ({result.model})" if result.model else ""
    print(f"{result.judge}{model}: {result.conversations} conversations; predictions: {counts} -> {result.output}")
    if result.rescaled:
        print(f"{result.rescaled} values rescaled linearly from the judgment's scale onto the aspect's")
    if result.failed:
        print(f"{result.failed} failed judgments (no value) left out", file=sys.stderr)
        return 0 if args.allow_failed else 1
    return 0
