"""`usersimcrs import FILE --output RUN_DIR`: another toolkit's DialogueKit export (and judge file) as a run;
`usersimcrs import FILE... --matrix DIR`: many exports as one matrix, one cell per file."""

from __future__ import annotations

import argparse
import sys

from usersimcrs.errors import UserError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import",
        help="turn DialogueKit JSON exports (+ anchor judge JSON) into a run folder, or many into one matrix",
    )
    parser.add_argument("file", nargs="+", help="DialogueKit JSON file(s) (each a list of dialogues)")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--output", "-o", help="run folder to write (one file)")
    target.add_argument(
        "--matrix",
        metavar="DIR",
        help="matrix folder to write: one cell <simulator>__<crs>__<dataset> per file, indexed by matrix.json "
        "(names from --simulator/--crs/--dataset, else the file's user id and agent id, and 'imported')",
    )
    parser.add_argument(
        "--judgments",
        action="append",
        default=[],
        metavar="ANCHOR_JUDGE.json",
        help="judge results in the anchor layout {agent_id: {aspect: [{conversation_id, score, ...}]}}; "
        "with --matrix, repeat it once per file, in the files' order",
    )
    parser.add_argument("--simulator", help="name of the simulator that produced the dialogues (for the validity gate)")
    parser.add_argument("--crs", help="name of the CRS (default: the dialogues' agent id)")
    parser.add_argument("--dataset", help="with --matrix: the cells' dataset name (default: imported)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run folder or imported matrix")
    parser.add_argument(
        "--on-duplicate",
        choices=("rename", "skip", "fail"),
        default="rename",
        help="a repeated conversation ID (with --matrix: also across files): rename later ones ID~2, ID~3 "
        "(default), skip them, or stop",
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
    from usersimcrs.pipeline.imports import (  # lazy: keeps `usersimcrs --help` fast
        ImportReport,
        MatrixImportReport,
        UnjoinedJudgments,
        import_matrix,
        import_run,
    )

    options = {
        "simulator": args.simulator,
        "crs": args.crs,
        "overwrite": args.overwrite,
        "on_duplicate": args.on_duplicate,
        "join_by": args.join_by,
        "allow_unjoined": args.allow_unjoined,
    }
    report: ImportReport | MatrixImportReport
    try:
        if args.matrix:
            report = import_matrix(
                args.file, args.matrix, judgments_files=args.judgments, dataset=args.dataset, **options
            )
        else:
            if len(args.file) > 1:
                raise UserError(f"{len(args.file)} files given with --output; pass --matrix DIR to import several")
            if len(args.judgments) > 1:
                raise UserError("--judgments given more than once; one judge file goes with one dialogues file")
            if args.dataset:
                raise UserError("--dataset names the cells of a matrix: use it with --matrix DIR")
            report = import_run(
                args.file[0], args.output, judgments_file=args.judgments[0] if args.judgments else None, **options
            )
    except UnjoinedJudgments as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(report.summary())
    return 0
