"""Learned evaluator throughput: `evaluator predict` on a 10,000-conversation run folder.

    python -m benchmarks.evaluator_throughput [--conversations 10000] [--model MODEL] [--keep DIR]

The run folder is made by replicating the converted ReDial half of CRSArena-Eval (../shared/data)
under new conversation IDs, in a temporary folder (nothing lands in the repository). Without
--model a model is trained on the same half first (its time is printed too). Prints conversations
per second for reading and scoring and for the whole command (model loading and writing included),
per CPU-second, and the load average after each, in one process (--workers 0) and with the default
worker processes (one per CPU, each reading and scoring its own spans of the file).
Goal (issue 31, feature set v3 and later, with the item catalogue): >= 500 conversations/s on 2 cores (issue 18
asked 2,000 of feature set v2).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from usersimcrs.core.run_folder import RunFolder
from usersimcrs.pipeline.convert import convert_dataset
from usersimcrs.pipeline.evaluator import predict_evaluator, train_evaluator
from usersimcrs.pipeline.sources import load_sources

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "data" / "raw" / "crsarena_eval" / "crs_arena_eval_redial.json"
ITEMS = ROOT.parent / "shared" / "data" / "items" / "movielens-25m-sample" / "movies_w_keywords.csv"
GOAL = 500.0


def replicate(corpus: Path, run: Path, conversations: int) -> int:
    """A run folder of `conversations` dialogues: the corpus' conversations again and again, new IDs."""
    originals = [d for s in load_sources(corpus) for d in s.run.dialogues]
    copies = (
        originals[i % len(originals)].model_copy(
            update={"conversation_id": f"{originals[i % len(originals)].conversation_id}-copy{i}", "index": i}
        )
        for i in range(conversations)
    )
    RunFolder(run).write_dialogues(copies)
    return conversations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.evaluator_throughput", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--model", help="a trained model (default: train one on the ReDial half first)")
    parser.add_argument("--source", default=str(SOURCE), help="CRSArena-Eval JSON to replicate")
    parser.add_argument("--items", default=str(ITEMS), help="item catalogue the trained model reads ('' for none)")
    parser.add_argument("--keep", metavar="DIR", help="build (and keep) the run folder here instead of a temp folder")
    args = parser.parse_args(argv)

    if not Path(args.source).exists():
        print(f"{args.source}: not found (the benchmark needs the shared CRSArena-Eval ReDial half)", file=sys.stderr)
        return 2
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="evaluator-bench-"))
    try:
        corpus = work / "corpus"
        convert_dataset("crsarena-eval", [args.source], corpus)
        figures: dict[str, object] = {"cpus": os.cpu_count()}
        model = Path(args.model) if args.model else work / "model.json"
        if not args.model:
            trained = train_evaluator(corpus, model, items=args.items or None)
            figures["train_seconds"] = round(trained.seconds, 2)
            figures["train_conversations"] = trained.conversations
        started = time.perf_counter()
        replicate(corpus, work / "run", args.conversations)
        figures["build_seconds"] = round(time.perf_counter() - started, 2)
        modes = {"one_process": 0, "default_workers": None}
        for name, workers in modes.items():
            result = predict_evaluator(work / "run", model, work / "run_file.json", workers=workers)
            figures[name] = dict(
                conversations=result.conversations,
                assistant_turns=result.turns,
                workers=result.workers,
                predict_seconds=round(result.predict_seconds, 3),
                total_seconds=round(result.total_seconds, 3),
                conversations_per_second=round(result.conversations_per_second),
                conversations_per_second_total=round(result.conversations_per_second_total),
                cpu_seconds=round(result.cpu_seconds, 3),
                conversations_per_cpu_second=round(result.conversations_per_cpu_second),
                met=result.conversations_per_second >= GOAL,
                load_average=[round(v, 2) for v in os.getloadavg()],
            )
        figures.update(goal=f">= {GOAL:,.0f} conversations/s", run_file_bytes=(work / "run_file.json").stat().st_size)
        print(json.dumps(figures, indent=1))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
