"""`usersimcrs matrix CONFIG --output DIR`: every simulator x CRS x dataset cell, then metrics, judges, report."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("matrix", help="run a simulator x CRS x dataset matrix (resumable) and report it")
    parser.add_argument("config", help="matrix config (YAML: base, simulators, crs, datasets, metrics, judges)")
    parser.add_argument("--output", "-o", help="matrix folder (default: runs/<name>)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--no-preflight",
        dest="preflight",
        action="store_false",
        help="skip the checks before the first cell: each CRS's health and each LLM server the cells and judges call",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.matrix import run_matrix  # lazy: keeps `usersimcrs --help` fast

    summary = run_matrix(args.config, args.output, progress=not args.no_progress, preflight=args.preflight)
    failed = 0
    for name, status in summary.cells.items():
        print(f"  {name}: {status}")
        failed += status.startswith("failed")
    report = summary.output_dir / "report.html"
    print(
        f"{summary.output_dir}: {len(summary.cells)} cells in {summary.wall_s:.1f}s"
        + (f"; report: {report}" if report.exists() else "")
    )
    for name, messages in summary.gate.items():
        for message in messages:
            print(f"error: {name}: {message}", file=sys.stderr)
    return 1 if failed or summary.gate else 0
