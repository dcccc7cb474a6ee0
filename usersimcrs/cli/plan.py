"""`usersimcrs plan PILOT_DIR`: conversations per cell for 80% power, and the tokens and cost of the full matrix."""

from __future__ import annotations

import argparse

from usersimcrs.errors import ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="from a pilot matrix: conversations per cell for 80%% power, tokens and cost of the full matrix"
    )
    parser.add_argument("pilot_dir", help="a pilot matrix (or ladder) folder")
    parser.add_argument("--metric", help="the metric the study must resolve (default: the headline metric)")
    parser.add_argument("--price", help="US dollars per million prompt and completion tokens: IN,OUT")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.plan import plan_study  # lazy: keeps `usersimcrs --help` fast

    price = None
    if args.price:
        try:
            low, high = (float(v) for v in args.price.split(","))
        except ValueError:
            raise ConfigError(f"--price {args.price!r}: expected IN,OUT (dollars per million tokens)") from None
        price = (low, high)
    plan = plan_study(args.pilot_dir, metric=args.metric, price=price, seed=args.seed)
    if args.json:
        print(plan.model_dump_json(indent=2))
        return 0
    print(f"{plan.pilot}: {plan.metric}, each CRS against the next in each simulator's ranking")
    for p in plan.pairs:
        need = f"about {p.n_for_80_power} conversations per cell" if p.n_for_80_power else f"no figure: {p.power_notes}"
        difference = "–" if p.mean_difference is None else f"{p.mean_difference:+.3f}"
        print(f"  {p.simulator} · {p.dataset}: {p.crs} vs {p.next_crs} (Δ {difference}, n={p.n_pairs}): {need}")
    if plan.conversations_per_cell is None:
        print(f"no study size: {plan.reason}")
        return 0
    cost = "unknown (give --price IN,OUT)" if plan.cost_usd is None else f"${plan.cost_usd:,.2f}"
    print(
        f"conversations per cell for 80% power (alpha 0.05): {plan.conversations_per_cell}; "
        f"{len(plan.cells)} cells, {plan.total_conversations} conversations; "
        f"LLM tokens {plan.prompt_tokens:,} prompt + {plan.completion_tokens:,} completion; cost {cost}"
    )
    for note in plan.notes:
        print(f"note: {note}")
    return 0
