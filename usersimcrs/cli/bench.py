"""`usersimcrs bench [--quick | --tiny] [--output DIR]`: the performance harness of `benchmarks/` (source checkout)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run the performance benchmarks (real workload, B1-B8) against local test servers (source checkout)",
        description="Runs the real workload (R rows: MovieLens sample, 6-call LLM user, HTTP/1.0 iEvaLM CRS) and "
        "the fixed-length workload and the other scenarios (B1-B7), and the embedded model's structured output "
        "(B8: lazy against eager grammar sampling, and the demo's wall time); prints one table with the machine's "
        "load. "
        "Results are written only with --output, to DIR/results.json.",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes (about 5 minutes on 2 cores)")
    parser.add_argument(
        "--tiny", action="store_true", help="a smoke test of every scenario at the smallest sizes (overrides --quick)"
    )
    parser.add_argument("--output", metavar="DIR", help="write DIR/results.json (default: print only)")
    parser.add_argument("--jitter-ms", type=float, default=0.0, help="uniform extra latency of the LLM servers")
    parser.add_argument("--keep", action="store_true", help="keep the run folders (printed) instead of deleting them")
    parser.add_argument(
        "--toolkit-cpus",
        metavar="LIST",
        help="CPUs the benchmarks and their runs keep to, e.g. 0,1 (Linux; default: any)",
    )
    parser.add_argument(
        "--server-cpus",
        metavar="LIST",
        help="CPUs the test servers keep to, e.g. 2-7: the servers off the toolkit's cores (default: shared)",
    )
    parser.add_argument(
        "--replace-committed",
        action="store_true",
        help="allow DIR/results.json to be a committed file (regenerating benchmarks/results.json)",
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.bench import BenchOptions, bench  # lazy: keeps `usersimcrs --help` fast

    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    options = BenchOptions(
        mode=mode,
        output=Path(args.output) if args.output else None,
        jitter_ms=args.jitter_ms,
        keep=args.keep,
        replace_committed=args.replace_committed,
        toolkit_cpus=args.toolkit_cpus,
        server_cpus=args.server_cpus,
    )
    return bench(options)
