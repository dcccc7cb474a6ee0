"""`usersimcrs evaluator train|predict|cv`: the zero-LLM learned evaluator (see docs/meta-evaluation.md)."""

from __future__ import annotations

import argparse

from usersimcrs.cli.options import add_resampling


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluator",
        help="the learned evaluator: train it on rated conversations, score runs with it, cross-validate it",
        description="A zero-LLM evaluator of CRSArena-Eval's aspects, fitted on conversations with human ratings "
        "(usersimcrs convert crsarena-eval). See docs/meta-evaluation.md.",
    )
    commands = parser.add_subparsers(dest="evaluator_command", metavar="ACTION", required=True)

    train = commands.add_parser("train", help="fit a model on a converted corpus with per-aspect ratings")
    train.add_argument("--data", required=True, help="converted corpus (run folder or matrix) with ratings")
    train.add_argument("--output", "-o", required=True, metavar="MODEL", help="model file to write (JSON)")
    train.add_argument(
        "--folds",
        type=int,
        default=5,
        help="folds that choose the penalties when the data hold fewer than 3 CRSs (else one CRS is left out at a time)",
    )
    train.add_argument("--seed", type=int, default=0)
    train.add_argument(
        "--items",
        metavar="CSV",
        help="item catalogue (MovieLens-style: title, genres, keywords): the features compare the items a reply "
        "recommends with the genres and words the user asked for; the model records its path and hash",
    )
    train.set_defaults(func=handle_train)

    predict = commands.add_parser("predict", help="score every conversation of a run folder or matrix")
    predict.add_argument("run", help="run folder or matrix (simulated or human)")
    predict.add_argument("--model", required=True, help="model file from `evaluator train`")
    predict.add_argument(
        "--output", "-o", required=True, metavar="FILE", help="run file to write (CRSArena-Eval format)"
    )
    predict.add_argument(
        "--workers",
        type=int,
        help="processes that each read and score parts of the run (0: all in this process; default: one per CPU, "
        "at most 4)",
    )
    predict.add_argument(
        "--all-aspects",
        action="store_true",
        help="also write preference_elicitation and explanation (the official rule reads seven aspects)",
    )
    predict.add_argument("--items", metavar="CSV", help="the item catalogue, when not where the model was trained")
    predict.set_defaults(func=handle_predict)

    cv = commands.add_parser("cv", help="nested cross-validation against the human ratings, with CIs")
    cv.add_argument("--data", required=True, help="converted corpus with per-aspect ratings")
    cv.add_argument("--output", "-o", required=True, metavar="DIR", help="folder for run files, meta_eval.csv, report")
    cv.add_argument("--published", metavar="FILE", help="published figures to show beside (baselines.json)")
    cv.add_argument("--folds", type=int, default=5, help="random folds of the second figure (grouped by conversation)")
    add_resampling(cv, report=False)
    cv.add_argument("--no-leave-one-crs-out", action="store_true", help="only the random conversation folds")
    cv.add_argument(
        "--no-random-folds", action="store_true", help="only leave-one-CRS-out (the random folds are the second figure)"
    )
    cv.add_argument("--items", metavar="CSV", help="item catalogue, as for `evaluator train`")
    cv.set_defaults(func=handle_cv)


def handle_train(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.evaluator import train_evaluator  # lazy: keeps `usersimcrs --help` fast

    result = train_evaluator(args.data, args.output, folds=args.folds, seed=args.seed, items=args.items)
    corpus = f" (converted from {', '.join(result.corpus)})" if result.corpus else ""
    print(
        f"trained on {result.conversations} conversations{corpus} ({result.turns} assistant turns) in "
        f"{result.seconds:.1f} s; data sha256 {result.data_sha256[:16]}; model: {result.model}"
    )
    print(f"selection CV ({result.cv_kind}):")
    for aspect, figures in result.cv.items():
        hp = result.hyper_parameters[aspect]
        print(
            f"  {aspect}: pearson {figures.pearson:.3f}, within-CRS {_value(figures.within_pearson)}, spearman "
            f"{figures.spearman:.3f} (n {figures.n}); ridge alpha {hp['alpha']:g}"
        )
    return 0


def _value(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.3f}"


def handle_predict(args: argparse.Namespace) -> int:
    import os

    # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.evaluator import in_training_line, predict_evaluator

    result = predict_evaluator(
        args.run, args.model, args.output, all_aspects=args.all_aspects, workers=args.workers, items=args.items
    )
    load = os.getloadavg()
    print(
        f"scored {result.conversations} conversations ({result.turns} assistant turns, "
        f"{result.failed_conversations_scored} of them failed runs, scored as they are) -> {result.output}"
    )
    print(
        f"throughput: {result.conversations_per_second:,.0f} conversations/s reading and scoring "
        f"({result.predict_seconds:.2f} s, "
        f"{f'{result.workers} worker process(es)' if result.workers else 'in this process'}), "
        f"{result.conversations_per_second_total:,.0f} conversations/s with loading the model and writing "
        f"({result.total_seconds:.2f} s); {result.conversations_per_cpu_second:,.0f} conversations per CPU-second "
        f"({result.cpu_seconds:.2f} CPU-s); {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(in_training_line(result.in_training, result.conversations))
    for warning in result.warnings:
        print(f"warning: {warning}")
    return 0


def handle_cv(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.pipeline.evaluator import CV_REPORT, cross_validate_evaluator

    result = cross_validate_evaluator(
        args.data,
        args.output,
        folds=args.folds,
        seed=args.seed,
        leave_one_crs_out=not args.no_leave_one_crs_out,
        published=args.published,
        resamples=args.resamples,
        progress=lambda text: print(text, file=sys.stderr),
        items=args.items,
        random_folds=not args.no_random_folds,
    )
    print((Path(result.output) / CV_REPORT).read_text(encoding="utf-8"), end="")
    print(f"written in {result.seconds:.0f} s: {', '.join(str(Path(result.output) / f) for f in result.files)}")
    return 0
