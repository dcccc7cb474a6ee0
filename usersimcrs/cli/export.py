"""`usersimcrs export RUN_DIR --format dialoguekit|jsonl --output FILE`: a run's dialogues for other tools."""

from __future__ import annotations

import argparse

from usersimcrs.cli.options import add_dedupe


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("export", help="write a run's dialogues as DialogueKit JSON or JSONL")
    parser.add_argument("run_dir", help="run folder")
    parser.add_argument("--format", choices=["dialoguekit", "jsonl"], default="dialoguekit")
    parser.add_argument("--output", "-o", required=True, help="file to write")
    parser.add_argument("--only-ok", action="store_true", help="leave out failed conversations")
    add_dedupe(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.export import export_run  # lazy: keeps `usersimcrs --help` fast

    result = export_run(args.run_dir, args.output, format=args.format, only_ok=args.only_ok, dedupe=args.dedupe)
    left_out = f", {result.left_out_failed} failed left out" if result.left_out_failed else ""
    print(f"{result.output}: {result.dialogues} dialogues ({result.format}){left_out}")
    return 0
