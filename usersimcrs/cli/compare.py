"""`usersimcrs compare MATRIX_DIR`: CRS rankings, simulator agreement, paired tests and the conversations needed."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="rank CRSs per simulator, test differences, check simulator agreement"
    )
    parser.add_argument("matrix_dir", help="matrix folder (from `usersimcrs matrix`)")
    parser.add_argument("--metrics", help="comma-separated metrics (default: headline metrics and judge scores)")
    parser.add_argument(
        "--valid-only",
        action="store_true",
        help="sensitivity check: leave out flagged conversations too (default: every conversation the CRS took part in)",
    )
    parser.add_argument("--all-conversations", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--resamples", type=int, default=10000, help="resamples of the paired tests (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.compare import compare_matrix  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.report.matrix_report import wide_ranks
    from usersimcrs.report.tables import markdown_table

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    result = compare_matrix(
        args.matrix_dir,
        metrics=metrics,
        subset="valid" if args.valid_only else "all",
        resamples=args.resamples,
        seed=args.seed,
    )
    comparison, table = result.comparison, result.table
    scope = "valid conversations only" if args.valid_only else "all conversations the CRS took part in"
    print(f"{args.matrix_dir}: {table['cell'].nunique()} cells, {len(table)} conversations; compared on {scope}")
    print(markdown_table(wide_ranks(comparison)), end="")
    uncertain = int(comparison.ranks["uncertain"].sum()) if not comparison.ranks.empty else 0
    if uncertain:
        print(
            f"{uncertain} of {len(comparison.ranks)} ranks are uncertain (n<10 conversations with a value, "
            "or a 95% CI overlapping the neighbour's): read them as ties"
        )
    if not comparison.agreement.empty:
        print(markdown_table(comparison.agreement), end="")
    if not comparison.power.empty:
        print("conversations per cell for 80% power at the observed difference (each CRS vs the next in its ranking):")
        print(markdown_table(comparison.power), end="")
    print(f"written: {result.folder}/{{means,ranks,agreement,significance,power}}.csv")
    return 0
