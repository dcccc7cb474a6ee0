"""Options several subcommands take, each declared once (same name, default and help everywhere)."""

from __future__ import annotations

import argparse


def add_dedupe(parser: argparse.ArgumentParser) -> None:
    """`--dedupe`: read a run whose conversation IDs repeat by keeping the first line of each."""
    parser.add_argument(
        "--dedupe",
        action="store_true",
        help="a conversation ID on several lines: keep its first line (default: refuse the run, with the count)",
    )


def add_resampling(parser: argparse.ArgumentParser, *, report: bool = True) -> None:
    """`--resamples` and `--seed` of the bootstrap CIs, and `--no-report` when the command writes report.html."""
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    if report:
        parser.add_argument("--no-report", action="store_true", help="skip report.html")
