"""`usersimcrs report RUN_DIR|MATRIX_DIR`: tables (CSV, Markdown) and one self-contained report.html."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("report", help="write report.html (+ tables and plots) for a run or a matrix")
    parser.add_argument("folder", help="run folder or matrix folder")
    parser.add_argument("--config", help="YAML with a 'metrics:' section; metrics are recomputed with it")
    parser.add_argument("--metrics", help="matrix only: comma-separated metrics to compare")
    parser.add_argument("--seed", type=int, default=0, help="matrix only: seed of the resampling")
    parser.add_argument(
        "--dedupe",
        action="store_true",
        help="a conversation ID on several lines: keep its first line (default: refuse the run, with the count)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.report import report
    from usersimcrs.pipeline.score import load_metrics_config

    config = load_metrics_config(args.config) if args.config else None
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    print(f"written: {report(args.folder, config, metrics=metrics, seed=args.seed, dedupe=args.dedupe)}")
    return 0
