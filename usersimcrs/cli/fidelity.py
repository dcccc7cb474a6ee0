"""`usersimcrs fidelity SIMULATED [HUMAN] [--output DIR]`: how close are simulated users to real ones?"""

from __future__ import annotations

import argparse

from usersimcrs.cli.options import add_resampling


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fidelity",
        help="compare simulated conversations with human ones (feature distances, discriminator AUC)",
        description="Per simulated run (or matrix cell): KS and Wasserstein distances of conversation features, "
        "Jensen-Shannon divergence of user dialogue acts, and a cross-validated discriminator AUC, with bootstrap "
        "CIs, beside the same figures between two human populations that differ only in context. Without HUMAN, "
        "the run is compared with the bundled human reference (ReDial and INSPIRED seekers). "
        "See docs/meta-evaluation.md.",
    )
    parser.add_argument("simulated", help="a run folder or a matrix folder of simulated conversations")
    parser.add_argument(
        "human",
        nargs="?",
        help="a run folder or converted corpus of human conversations (default: the bundled human reference)",
    )
    parser.add_argument("--output", "-o", help="folder for fidelity.csv and report.html (default: SIMULATED/fidelity)")
    add_resampling(parser)
    parser.add_argument(
        "--human-holdout",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="compare with only the HUMAN conversations a corpus NLG with nlg_corpus_holdout SHARE kept out of its pool",
    )
    parser.add_argument("--reference", metavar="FILE", help="a human reference file (default: the bundled one)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.analysis.fidelity import baseline_verdict, discriminator_verdict, readings_text
    from usersimcrs.analysis.left_out import left_out_line
    from usersimcrs.pipeline.fidelity import fidelity
    from usersimcrs.report.tables import markdown_table

    output = args.output or str(Path(args.simulated) / "fidelity")
    result = fidelity(
        args.simulated,
        args.human,
        output,
        seed=args.seed,
        resamples=args.resamples,
        report=not args.no_report,
        human_holdout=args.human_holdout,
        reference=args.reference,
    )
    print(
        f"human: {result.human}, {result.n_human} conversations; CIs: {result.ci_method}, {result.resamples} "
        f"resamples, seed {result.seed}"
    )
    print(left_out_line(result.left_out) or "left out: none (every conversation completed)")
    table = result.table()
    print(markdown_table(table.drop(columns=["note"]).assign(note=table["note"].fillna(""))), end="")
    smallest = min([result.n_human] + [r.n_simulated for r in result.rows if r.statistic == "discriminator_auc"])
    if smallest < 30:
        print(
            f"note: as few as {smallest} conversations on one side (human: {result.n_human}): the CIs are wide; "
            "a distance's CI shows sampling noise, and even two samples of one source are apart by chance"
        )
    context = baseline_verdict(result.baselines)
    for row in result.rows:
        if row.statistic == "discriminator_auc":
            print(f"{row.simulator}: {discriminator_verdict(row)}")
            if context:
                print(f"  {context}")
            for line in readings_text(result.readings, row.simulator):
                print(f"  {line}")
    print(f"written: {', '.join(str(Path(output) / f) for f in result.files)}")
    return 0
