"""`usersimcrs ladder CONFIG --output DIR`: does a simulator with a metric or judge order CRSs of known quality?"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ladder", help="run a simulator against reference CRSs of known order: does each score order them?"
    )
    parser.add_argument("config", help="run config (its simulator) or matrix config (its metrics and judges)")
    parser.add_argument("--output", "-o", help="ladder folder (default: runs/ladder-<config name>)")
    parser.add_argument(
        "--conversations", type=int, default=100, help="conversations per rung (default 100; 0: the config's own)"
    )
    parser.add_argument("--metrics", help="comma-separated scores (default: headline metrics and judge scores)")
    parser.add_argument("--judge", action="append", default=[], help="a judge to run on every rung (repeatable)")
    parser.add_argument("--simulator", help="with a matrix config of several simulators: which one")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling (conversations: the config's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from pathlib import Path

    from usersimcrs.config import read_yaml  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.core.validation import validate
    from usersimcrs.pipeline.judge import JudgeRequest
    from usersimcrs.pipeline.ladder import LadderRequest, run_ladder

    output = args.output or str(Path("runs") / f"ladder-{read_yaml(args.config).get('name', 'run')}")
    request = validate(
        LadderRequest,
        {
            "conversations": args.conversations or None,
            "metrics": [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None,
            "judges": [JudgeRequest(judge=name) for name in args.judge],
            "simulator": args.simulator,
            "seed": args.seed,
            "progress": not args.no_progress,
        },
        source="ladder",
        flags=True,
    )
    outcome = run_ladder(args.config, output, request)
    result = outcome.result
    print(
        f"{outcome.folder}: {result.simulator} on {len(result.rungs)} rungs ({', '.join(result.rungs)}), "
        f"{result.conversations_per_rung} conversations each, in {result.wall_s:.1f}s"
    )
    for ladder in result.scores.values():
        print(f"  {ladder.verdict_text}")
    for score, reason in result.left_out.items():
        print(f"  {score} left out: it {reason}")
    print(f"written: {outcome.json_path}, {outcome.report_path}")
    return 0
