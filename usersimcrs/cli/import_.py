"""`usersimcrs import FILE --output RUN_DIR`: another toolkit's DialogueKit export (and judge file) as a run."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import", help="turn a DialogueKit JSON export (+ anchor judge JSON) into a run folder"
    )
    parser.add_argument("file", help="DialogueKit JSON file (a list of dialogues)")
    parser.add_argument("--output", "-o", required=True, help="run folder to write")
    parser.add_argument(
        "--judgments",
        metavar="ANCHOR_JUDGE.json",
        help="judge results in the anchor layout {agent_id: {aspect: [{conversation_id, score, ...}]}}",
    )
    parser.add_argument("--simulator", help="name of the simulator that produced the dialogues (for the validity gate)")
    parser.add_argument("--crs", help="name of the CRS (default: the dialogues' agent id)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run folder")
    parser.add_argument(
        "--on-duplicate",
        choices=("rename", "skip", "fail"),
        default="rename",
        help="a repeated conversation ID: rename later ones ID~2, ID~3 (default), skip them, or stop",
    )
    parser.add_argument(
        "--join-by",
        choices=("id", "position"),
        default="id",
        help="join judgments by conversation ID (default); 'position' also pairs a list whose IDs "
        "do not match, in dialogue order, when it has one record per dialogue",
    )
    parser.add_argument(
        "--allow-unjoined",
        action="store_true",
        help="import even if some judgment records cannot be joined (they are counted, not kept)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.imports import UnjoinedJudgments, import_run

    try:
        report = import_run(
            args.file,
            args.output,
            judgments_file=args.judgments,
            simulator=args.simulator,
            crs=args.crs,
            overwrite=args.overwrite,
            on_duplicate=args.on_duplicate,
            join_by=args.join_by,
            allow_unjoined=args.allow_unjoined,
        )
    except UnjoinedJudgments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(report.summary())
    return 0
