"""`usersimcrs fidelity-reference --redial ... --inspired ... --output FILE`: build the human reference statistics."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fidelity-reference",
        help="build the human reference statistics that `fidelity` compares a run with when no corpus is given",
        description="Read human corpora from their original files (ReDial, INSPIRED; optionally CRSArena-Eval for "
        "people who talked to CRSs) and write per-conversation features and per-turn summaries of their users, "
        "the corpora themselves left out. The package ships one built from ../shared/data "
        "(usersimcrs/core/data/human_reference.json). See docs/meta-evaluation.md.",
    )
    parser.add_argument(
        "--redial", nargs="+", metavar="PATH", help="ReDial: a dialogues JSONL and movies_with_mentions.csv"
    )
    parser.add_argument("--inspired", nargs="+", metavar="PATH", help="INSPIRED: dialog TSV files (dev.tsv, test.tsv)")
    parser.add_argument(
        "--crsarena-eval", nargs="+", metavar="PATH", help="CRSArena-Eval JSON (people talking to CRSs), optional"
    )
    parser.add_argument("--output", "-o", required=True, metavar="FILE", help="the reference file to write (JSON)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import shlex
    import sys

    from usersimcrs.pipeline.fidelity_reference import build_human_reference  # lazy: keeps `usersimcrs --help` fast

    reference = build_human_reference(
        args.output,
        command=shlex.join(["usersimcrs", *sys.argv[1:]]),
        redial=args.redial or [],
        inspired=args.inspired or [],
        crsarena_eval=args.crsarena_eval or [],
    )
    for population in reference.populations:
        words = population.per_turn["words"]
        print(
            f"{population.label} ({population.context}): {population.conversations} conversations, "
            f"{population.user_turns} user turns, {words.mean:.2f} words per turn (median {words.median:g})"
        )
    style = reference.style
    print(
        f"style defaults: {style.words_per_turn} words per turn (90% under {style.max_words}), "
        f"{style.reveal_per_turn} preference per revealing turn ({style.reveal_share:.0%} of turns), "
        f"patience {style.patience} suggestions"
    )
    print(f"written: {args.output}")
    return 0
