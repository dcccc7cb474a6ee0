"""`usersimcrs meta-eval PATH --scores satisfaction,turns --output DIR`: do scores agree with humans?"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "meta-eval",
        help="agreement of metrics and judges with human labels and votes (AUC, tau-b, pairwise accuracy)",
        description="Compare automatic scores with human references per conversation (AUC, Spearman, Kendall tau-b, "
        "QWK) and per system (Kendall tau-b, Spearman, pairwise accuracy against the human ranking), with "
        "bootstrap CIs. See docs/meta-evaluation.md.",
    )
    parser.add_argument(
        "path", help="a converted human corpus (convert crsarena-dial), or a run/matrix folder with references"
    )
    parser.add_argument(
        "--scores",
        required=True,
        help="comma-separated: rule metrics (satisfaction, turns, ...) and/or judge scores <judge>:<name>",
    )
    parser.add_argument("--output", "-o", help="folder for meta_eval.csv and report.html (default: PATH/meta_eval)")
    parser.add_argument("--reference-key", help="which metadata.reference value to compare with (default: satisfied)")
    parser.add_argument("--reference", metavar="CSV", help="references from a CSV (conversation_id,name,value)")
    parser.add_argument(
        "--votes", metavar="FILE", help="votes (votes.jsonl or CRS Arena CSV; default: PATH/votes.jsonl)"
    )
    parser.add_argument(
        "--judgments",
        action="append",
        default=[],
        metavar="FILE",
        help="outside judgments (judgments.jsonl or the anchor's JSON) joined by conversation_id",
    )
    parser.add_argument(
        "--human",
        choices=["auto", "votes", "labels"],
        default="auto",
        help="human system ranking from votes (auto: when there are any) or from the labels",
    )
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-report", action="store_true", help="skip report.html")
    parser.add_argument(
        "--dedupe",
        action="store_true",
        help="a conversation ID on several lines: keep its first line (default: refuse the run, with the count)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from usersimcrs.pipeline.meta_eval import meta_eval
    from usersimcrs.report.meta_eval_report import caveat_table, human_ranking_table
    from usersimcrs.report.tables import markdown_table

    output = args.output or str(Path(args.path) / "meta_eval")
    result = meta_eval(
        args.path,
        args.scores.split(","),
        output,
        seed=args.seed,
        resamples=args.resamples,
        reference_key=args.reference_key,
        reference_csv=args.reference,
        votes=args.votes,
        judgments=args.judgments,
        human=args.human,
        report=not args.no_report,
        dedupe=args.dedupe,
    )
    print(
        f"reference '{result.reference_key}' ({result.reference_kind}) on {result.n_labelled} of "
        f"{result.n_conversations} conversations; human ranking from {result.human_source}; "
        f"CIs: {result.ci_method}, {result.resamples} resamples, seed {result.seed}"
    )
    print(markdown_table(caveat_table(result)), end="")
    if result.human_ranking is not None:
        ranking = result.human_ranking
        print(f"human ranking (Bradley-Terry from {ranking.n_battles} votes, ties as half wins):")
        print(markdown_table(human_ranking_table(ranking)), end="")
    for note in result.notes:
        print(f"note: {note}")
    print(f"written: {', '.join(str(Path(output) / f) for f in result.files)}")
    return 0
