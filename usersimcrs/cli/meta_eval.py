"""`usersimcrs meta-eval PATH --scores satisfaction,turns --output DIR`: do scores agree with humans?"""

from __future__ import annotations

import argparse

from usersimcrs.cli.options import add_dedupe, add_resampling
from usersimcrs.errors import UserError


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
        help="comma-separated: rule metrics (satisfaction, turns, ...) and/or judge scores <judge>:<name> "
        "(compared with one reference per conversation); without it, a corpus with per-aspect ratings "
        "(convert crsarena-eval) is meta-evaluated per aspect",
    )
    parser.add_argument(
        "--aspects",
        help="per-aspect mode: 'official' (the 7 aspects of the official rule, default), 'all' or a "
        "comma-separated list (relevance, interestingness, understanding, ...)",
    )
    parser.add_argument(
        "--published",
        metavar="FILE",
        help="published figures to show beside the run's (baselines.json of CRSArena-Eval); cited, not recomputed",
    )
    parser.add_argument(
        "--no-baselines",
        action="store_true",
        help="leave out the baselines (conversation length, assistant words per turn, CRS identity; per-aspect mode "
        "also DialogueKit satisfaction and turn position)",
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
        metavar="[NAME=]FILE",
        help="outside judgments joined by conversation_id: judgments.jsonl, the anchor's JSON or a CRSArena-Eval "
        "run file (its predictions are judge NAME, default the file name)",
    )
    parser.add_argument(
        "--human",
        choices=["auto", "votes", "labels"],
        default="auto",
        help="human system ranking from votes (auto: when there are any) or from the labels; with votes, a run or "
        "matrix without per-conversation references (e.g. simulated) is compared at the system level only",
    )
    parser.add_argument(
        "--model",
        metavar="MODEL",
        help="a learned evaluator's model file: the conversations it was trained on are left out of every figure",
    )
    parser.add_argument(
        "--include-training",
        action="store_true",
        help="with --model: keep the conversations the model was trained on (labelled in-sample)",
    )
    add_resampling(parser)
    add_dedupe(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from usersimcrs.pipeline.aspect_meta_eval import has_aspect_references  # lazy: keeps `usersimcrs --help` fast

    output = args.output or str(Path(args.path) / "meta_eval")
    if args.scores:
        return _scores(args, output)
    if args.aspects or has_aspect_references(args.path):
        return _aspects(args, output)
    raise UserError(
        "give --scores (e.g. --scores satisfaction,turns); the per-aspect mode needs conversations with "
        "per-aspect ratings (usersimcrs convert crsarena-eval)"
    )


def _aspects(args: argparse.Namespace, output: str) -> int:
    from pathlib import Path

    from usersimcrs.analysis.left_out import left_out_line  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.aspect_meta_eval import meta_eval_aspects
    from usersimcrs.report.meta_eval_report import ASPECT_VIEWS, systems_only_lines
    from usersimcrs.report.tables import markdown_table

    result = meta_eval_aspects(
        args.path,
        output,
        aspects=args.aspects or "official",
        judgments=args.judgments,
        published=args.published,
        baselines=not args.no_baselines,
        resamples=args.resamples,
        seed=args.seed,
        report=not args.no_report,
        model=args.model,
        include_training=args.include_training,
    )
    rated = ", ".join(f"{k} {v}" for k, v in result.gold.items())
    print(
        f"{result.n_conversations} conversations; rated pairs: {rated}; official rule per group "
        f"({', '.join(result.groups)}); CIs: {result.ci_method}, {result.resamples} resamples, seed {result.seed}; "
        "* = best of the column"
    )
    print(left_out_line(result.left_out) or "left out: none (every conversation carries a rating)")
    for group in result.groups:
        for caption, statistics, ci in ASPECT_VIEWS:
            if ci and statistics == ("pearson",):
                continue  # the CIs of the pooled figures are in meta_eval.csv and the report
            print(f"\n{group}: {caption}")
            print(markdown_table(result.wide(group, statistics, ci=ci)), end="")
        for line in systems_only_lines(result, group):
            print(line)
    for note in result.notes:
        print(f"note: {note}")
    print(f"written: {', '.join(str(Path(output) / f) for f in result.files)}")
    return 0


def _scores(args: argparse.Namespace, output: str) -> int:
    from pathlib import Path

    from usersimcrs.analysis.left_out import left_out_line  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.meta_eval import meta_eval
    from usersimcrs.report.meta_eval_report import caveat_table, human_ranking_table, system_ranking_table
    from usersimcrs.report.tables import markdown_table

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
        baselines=not args.no_baselines,
        model=args.model,
        include_training=args.include_training,
    )
    print(
        f"{result.reference_line()}; human ranking from {result.human_source}; "
        f"CIs: {result.ci_method}, {result.resamples} resamples, seed {result.seed}"
    )
    print(left_out_line(result.left_out) or "left out: none (every conversation completed)")
    print(markdown_table(caveat_table(result)), end="")
    if result.human_ranking is not None:
        ranking = result.human_ranking
        print(f"human ranking (Bradley-Terry from {ranking.n_battles} votes, ties as half wins):")
        print(markdown_table(human_ranking_table(ranking)), end="")
    from usersimcrs.pipeline.meta_eval import BASELINES  # lazy: keeps `usersimcrs --help` fast

    for score in (s for s in result.scores if s not in BASELINES):
        table = system_ranking_table(result, score)
        if not table.empty:
            print(f"system ranking by {score} (mean per system) against the human ranking ({result.human_source}):")
            print(markdown_table(table), end="")
    for note in result.notes:
        print(f"note: {note}")
    print(f"written: {', '.join(str(Path(output) / f) for f in result.files)}")
    return 0
