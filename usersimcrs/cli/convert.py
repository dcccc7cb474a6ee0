"""`usersimcrs convert DATASET --input PATH... --output DIR`: raw benchmark files -> unified format."""

from __future__ import annotations

import argparse

from data_converters.base import converters


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert a benchmark dataset (ReDial, INSPIRED, OpenDialKG, IMDB, IARD, MovieLens, CRSArena-Dial)",
        description="Convert a dataset from its original files into dialogues (JSONL + DialogueKit JSON), "
        "items, information needs, user profiles and a conversion report.",
    )
    parser.add_argument("dataset", help=f"converter name: {', '.join(converters.names())}")
    parser.add_argument(
        "--input", "-i", nargs="+", required=True, metavar="PATH", help="raw input files (a corpus's parts are merged)"
    )
    parser.add_argument("--output", "-o", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--skip-bad", action="store_true", help="drop malformed records (listed in the report)")
    parser.add_argument("--domain", choices=["movie", "all"], default="movie", help="OpenDialKG domain filter")
    parser.add_argument("--seed", type=int, default=42, help="seed for seen/target splits (IMDB, MovieLens)")
    parser.add_argument("--holdout", type=float, default=0.2, help="share of a user's items held out as targets")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.convert import convert_dataset  # lazy: keeps `usersimcrs --help` fast

    report = convert_dataset(
        args.dataset,
        args.input,
        args.output,
        skip_bad=args.skip_bad,
        domain=args.domain,
        seed=args.seed,
        holdout=args.holdout,
    )
    counts = ", ".join(
        f"{k} {report.counts_in[k]} -> {v}" if k in report.counts_in else f"{k} {v}"
        for k, v in report.counts_out.items()
    )
    print(
        f"{args.dataset}: {counts or 'nothing written'}; dropped {len(report.dropped)}; "
        f"warnings {sum(w.count for w in report.warnings.values())} -> {args.output}"
    )
    if len(report.parts) > 1:
        for name, part_counts in report.parts.items():
            print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in part_counts.items()))
    for part in report.partial:
        print(f"  {part.what}: {part.written} of {part.read} written ({part.reason})")
    return 0
