"""`usersimcrs bench [--quick] ...`: the performance harness of `benchmarks/` (B1-B7), from a source checkout."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run the performance benchmarks (B1-B7) against a local LLM server (source checkout)",
        description="Arguments go to the harness: --quick (smaller sizes), --output FILE, --jitter-ms MS, --keep.",
    )
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="harness arguments, e.g. --quick")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.bench import bench

    return bench(list(args.arguments))
