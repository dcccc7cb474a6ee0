"""`usersimcrs agreement --judgments FILE --reference human.csv`: judge scores against reference ratings.

With `--repeat FILE` (once per extra judge run of the same conversations) it also reports the
judge's stability: the std of each factor and of the total over the runs.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "agreement", help="agreement of judge scores with reference (human) ratings: r, tau-b, QWK, kappas, alpha"
    )
    parser.add_argument(
        "--judgments", required=True, help="judgments.jsonl, or a judge file in the anchor's JSON layout"
    )
    parser.add_argument("--reference", help="CSV: conversation_id,name,value[,rater] or one column per aspect")
    parser.add_argument(
        "--repeat",
        action="append",
        default=[],
        metavar="FILE",
        help="judgments of another run of the same judge on the same conversations (for stability)",
    )
    parser.add_argument("--judge", help="only this judge's records (e.g. core12, quality)")
    parser.add_argument("--output", "-o", help="folder for agreement.csv/.md (default: next to the judgments file)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.agreement import AGREEMENT_COLUMNS, agreement  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.report.tables import markdown_table

    result = agreement(
        args.judgments, reference=args.reference, repeats=args.repeat, judge=args.judge, output=args.output
    )
    if result.agreement is not None:
        print(markdown_table(result.agreement[AGREEMENT_COLUMNS]), end="")
        print(
            f"mean |tau-b| between factors: judge {result.factors['judge_mean_abs_tau']:.3f}, "
            f"reference {result.factors['reference_mean_abs_tau']:.3f}"
        )
    if result.stability is not None:
        print(markdown_table(result.stability), end="")
    for path in result.files:
        if path.suffix == ".csv":
            print(f"written: {path}")
    return 0
