"""`usersimcrs report RUN_DIR|MATRIX_DIR`: tables (CSV, Markdown) and one self-contained report.html."""

from __future__ import annotations

import argparse

from usersimcrs.cli.options import add_dedupe


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="write report.html (+ tables and plots) for a run or a matrix")
    parser.add_argument("folder", help="run folder or matrix folder")
    parser.add_argument("--config", help="YAML with a 'metrics:' section; metrics are recomputed with it")
    parser.add_argument("--metrics", help="matrix only: comma-separated metrics to compare")
    parser.add_argument("--seed", type=int, default=0, help="matrix only: seed of the resampling")
    parser.add_argument(
        "--model",
        metavar="MODEL",
        help="a learned evaluator's model file (usersimcrs evaluator train): show each CRS's predicted "
        "dialogue_overall beside its success, with the model's agreement on CRSs it never saw (default: "
        "models/learned.json when it is there, the path of the docs' train command; the file used is printed)",
    )
    parser.add_argument("--no-model", action="store_true", help="no learned-evaluator section, even with a model")
    add_dedupe(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.report import report  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.score import load_metrics_config

    config = load_metrics_config(args.config) if args.config else None
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    model = None if args.no_model else args.model
    if model is None and not args.no_model:
        from usersimcrs.pipeline.evaluator import docs_model  # lazy: keeps `usersimcrs --help` fast

        model, line = docs_model()
        if line:
            print(line)
    page = report(args.folder, config, metrics=metrics, seed=args.seed, dedupe=args.dedupe, learned_model=model)
    print(f"written: {page}")
    return 0
