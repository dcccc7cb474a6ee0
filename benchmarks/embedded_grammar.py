"""B8: the embedded model's structured output, eager against lazy grammar sampling, and the demo's wall
time (issue #36)::

    python -m benchmarks.embedded_grammar            # both halves (the demo: a few minutes)
    python -m benchmarks.embedded_grammar --no-demo  # tokens per second alone (about a minute)

Tokens per second: two embedded backends, one per `llm.grammar_sampling` mode, each with its own loaded
model, answer the same prompts (the demo's kinds of call: the LLM user, the LLM CRS over numbered
candidates, a judge, the stop decision, each with the schema the toolkit sends) at temperature 0, the
two modes alternated call by call, with a third backend answering the same prompts without a schema
(the model's own speed: the ceiling of both modes). Each prompt is first sent with `max_tokens: 1`,
untimed, so that the timed call finds it in the model's KV cache: the timed figure is generation, not
prompt reading. At temperature 0 both modes must give the same text (counted). The demo: `usersimcrs
quickstart` in a fresh process into a new folder with an empty LLM cache; its wall time and each cell's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from benchmarks.setups import ROOT
from crs_connectors.baselines.llm_crs import load_prompt, reply_schema
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.judges.parsing import ScoreSpec
from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded
from usersimcrs.llm.base import Message
from usersimcrs.llm.config import LLMConfig, llama_threads
from usersimcrs.pipeline.matrix import load_matrix_config
from usersimcrs.pipeline.quickstart import demo_config
from usersimcrs.simulators.llm_dual import STOP_SCHEMA
from usersimcrs.simulators.prompting import UTTERANCE_SCHEMA

MODES = ("eager", "lazy")
FREE = "unconstrained"  # the same prompts without a schema: the model's own speed, the ceiling of both modes
DEMO_TARGET_S = 120.0
SPEEDUP_TARGET = 2.5


def prompts() -> list[tuple[str, list[Message], dict[str, Any]]]:
    """(name, messages, schema): the structured calls the demo makes, with the schemas the toolkit sends."""

    crs = load_prompt(None)
    candidates = "1: Toy Story (1995); Animation|Comedy; toys\n2: Up (2009); Animation|Adventure; balloon\n"
    candidates += "3: Heat (1995); Crime|Thriller; heist\n4: Alien (1979); Horror|Sci-Fi; space"
    user = "You are a person looking for a movie to watch tonight. You like comedies about friendship."
    return [
        (
            "llm_user",
            [
                Message(role="system", content=user + ' Answer with JSON: {"utterance": ..., "end": false}.'),
                Message(role="user", content="RECOMMENDER: Hi! What kind of movie are you in the mood for?"),
            ],
            UTTERANCE_SCHEMA,
        ),
        (
            "llm_crs",
            [
                Message(role="system", content=crs["system"].replace("{k}", "3")),
                Message(role="user", content="I want a funny animated film I can watch with my kids."),
                Message(
                    role="user",
                    content=crs["candidates"].replace("{candidates}", candidates).replace("{stage}", ""),
                ),
            ],
            reply_schema(4, 3),
        ),
        (
            "judge",
            [
                Message(role="system", content="Rate how fluent the recommender is from 1 to 5, with a reason."),
                Message(
                    role="user",
                    content="USER: a funny film please\nRECOMMENDER: How about Toy Story (1995)? It is a warm "
                    "comedy about toys.\nAnswer with JSON.",
                ),
            ],
            ScoreSpec(low=1, high=5, text_chars=200).schema(),
        ),
        (
            "stop",
            [
                Message(role="system", content=user + " Decide whether to end the conversation."),
                Message(role="user", content='RECOMMENDER: Enjoy Toy Story!\nAnswer with JSON {"end": true|false}.'),
            ],
            STOP_SCHEMA,
        ),
    ]


async def _call(llm: Any, messages: list[Message], schema: dict[str, Any] | None, max_tokens: int) -> tuple[Any, float]:
    """The result and the process CPU seconds it took (generation runs in a worker thread of this process)."""
    cpu = time.process_time()
    result = await llm.complete(messages, temperature=0.0, max_tokens=max_tokens, seed=0, schema=schema)
    return result, time.process_time() - cpu


def demo_threads() -> int | Literal["all"] | None:
    """The demo's `llm.n_threads` (configs/demo.yaml): B8's headline runs the model as the demo does."""
    return load_matrix_config(demo_config()).base.llm.n_threads


def tokens_per_second(rounds: int, max_tokens: int, n_threads: int | Literal["all"] | None) -> dict[str, Any]:
    """Eager and lazy backends on the same prompts, alternated call by call (and a third answering them
    without a schema, for the model's own speed); generation tokens per second of each, lazy over eager,
    the lazy mode's rejections, and how many texts agreed."""

    backends = {
        mode: LlamaCppEmbedded(
            LLMConfig(
                backend="llamacpp", n_ctx=2048, n_threads=n_threads, grammar_sampling=mode if mode != FREE else "lazy"
            )
        )
        for mode in (*MODES, FREE)
    }
    totals = {mode: _empty() for mode in (*MODES, FREE)}
    per_prompt: dict[str, dict[str, Any]] = {}
    same = compared = 0
    load_at_start = os.getloadavg()

    async def run() -> None:
        nonlocal same, compared
        for r in range(rounds):
            for i, (name, messages, schema) in enumerate(prompts()):
                order = (*MODES, FREE) if (r + i) % 2 == 0 else (FREE, *MODES[::-1])
                texts = {}
                for mode in order:
                    constraint = None if mode == FREE else schema
                    await _call(backends[mode], messages, constraint, 1)  # reads the prompt into the KV cache
                    result, cpu_s = await _call(backends[mode], messages, constraint, max_tokens)
                    texts[mode] = result.text
                    for bucket in (totals[mode], per_prompt.setdefault(name, {}).setdefault(mode, _empty())):
                        bucket["tokens"] += result.usage.completion_tokens
                        bucket["seconds"] += result.latency_s
                        bucket["cpu_s"] += cpu_s
                        bucket["calls"] += 1
                compared += 1
                same += texts["eager"] == texts["lazy"]

    try:
        asyncio.run(run())
        lazy_counts = backends["lazy"].grammar_counts
    finally:
        for llm in backends.values():
            asyncio.run(llm.aclose())
    rates = {mode: totals[mode]["tokens"] / totals[mode]["seconds"] for mode in totals}
    per_cpu = {mode: totals[mode]["tokens"] / totals[mode]["cpu_s"] for mode in totals}
    return {
        "eager_tokens_per_s": round(rates["eager"], 2),
        "lazy_tokens_per_s": round(rates["lazy"], 2),
        "unconstrained_tokens_per_s": round(rates[FREE], 2),
        "ceiling": round(rates[FREE] / rates["eager"], 2),  # the speedup a grammar costing nothing would give
        "speedup": round(rates["lazy"] / rates["eager"], 2),
        "speedup_per_cpu_s": round(per_cpu["lazy"] / per_cpu["eager"], 2),  # moves less with other load
        "totals": totals,
        "per_prompt": {
            name: {mode: {**t, "tokens_per_s": round(t["tokens"] / t["seconds"], 2)} for mode, t in modes.items()}
            for name, modes in per_prompt.items()
        },
        "same_text": f"{same}/{compared}",
        "lazy_rejections": None if lazy_counts is None else vars(lazy_counts),
        "rounds": rounds,
        "max_tokens": max_tokens,
        "n_threads": llama_threads(n_threads),
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
    }


def speed_passed(figures: dict[str, Any]) -> bool:
    """Lazy at least SPEEDUP_TARGET times eager, and every text the same (temperature 0, same model state)."""
    same, compared = figures["same_text"].split("/")
    return figures["speedup"] >= SPEEDUP_TARGET and same == compared


def _empty() -> dict[str, Any]:
    return {"tokens": 0, "seconds": 0.0, "cpu_s": 0.0, "calls": 0}


def demo_wall(work: Path) -> dict[str, Any]:
    """`usersimcrs quickstart` in a fresh process into a new folder: its wall time and each cell's, and its CPU
    time (which moves less than wall time with other load on the machine)."""

    output = work / "demo"  # a new matrix folder: its LLM cache (inside it) starts empty
    load_at_start = os.getloadavg()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "quickstart", "--output", str(output), "--no-progress"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cells = {
        cell.name: round(cell.folder.manifest().timings.wall_s, 1)
        for cell in MatrixFolder(output).cells()
        if cell.folder.has_run()
    }
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime, 1),
        "exit_code": done.returncode,
        "cells_wall_s": cells,
        "slowest_cell": max(cells, key=lambda name: cells[name]) if cells else None,
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "output_tail": done.stdout[-600:] + done.stderr[-600:],
    }


def main(argv: list[str] | None = None) -> int:
    """Print B8's figures as JSON; exit 1 when a target is missed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.embedded_grammar", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="times each prompt is sent in each mode")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads of each backend (default: the demo's n_threads)"
    )
    parser.add_argument("--no-demo", action="store_true", help="tokens per second only")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {
        "tokens_per_second": tokens_per_second(args.rounds, args.max_tokens, args.threads or demo_threads())
    }
    ok = speed_passed(figures["tokens_per_second"])
    if not args.no_demo:
        with tempfile.TemporaryDirectory(prefix="usersimcrs-b8-") as work:
            figures["demo"] = demo_wall(Path(work))
        ok = ok and figures["demo"]["exit_code"] == 0 and figures["demo"]["wall_s"] < DEMO_TARGET_S
    print(json.dumps(figures, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
