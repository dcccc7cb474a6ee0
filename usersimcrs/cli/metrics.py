"""`usersimcrs metrics RUN_DIR`: rule-based metrics, validity flags and summaries for a run folder."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from usersimcrs.cli.options import add_dedupe
from usersimcrs.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.metrics.config import MetricsConfig
    from usersimcrs.pipeline.score import Scores

HEADLINE = ["success", "turns", "recall@10", "pc@10", "jaccard", "satisfaction"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("metrics", help="compute rule-based metrics and the validity gate for a run")
    parser.add_argument("run_dir", help="run folder")
    parser.add_argument("--config", help="YAML with a 'metrics:' section (options, validity, thresholds)")
    parser.add_argument(
        "--max-failure-rate",
        type=float,
        metavar="X",
        help="exit 1 when more than this share of conversations failed (0-1)",
    )
    parser.add_argument(
        "--max-invalid-rate",
        type=float,
        metavar="X",
        help="exit 1 when more than this share of conversations is invalid (0-1)",
    )
    parser.add_argument("--horizon", type=int, help="turns T for PC_T and the per-turn curves")
    parser.add_argument("--repeat-k", type=int, help="same system text this many times = repetition loop")
    parser.add_argument("--no-satisfaction", action="store_true", help="skip DialogueKit's satisfaction classifier")
    add_dedupe(parser)
    parser.set_defaults(func=handle)


def metrics_config(args: argparse.Namespace) -> MetricsConfig:
    """The `metrics:` section of --config (or defaults), with the command-line flags on top."""
    from usersimcrs.pipeline.score import load_metrics_config  # lazy: keeps `usersimcrs --help` fast

    config = load_metrics_config(args.config)
    if args.max_failure_rate is not None:
        config.max_failure_rate = _rate(args.max_failure_rate, "--max-failure-rate")
    if args.max_invalid_rate is not None:
        config.max_invalid_rate = _rate(args.max_invalid_rate, "--max-invalid-rate")
    if args.horizon:
        config.options.horizon = args.horizon
    if args.repeat_k:
        config.validity.repeat_k = args.repeat_k
    if args.no_satisfaction:
        config.options.satisfaction = False
    return config


def _rate(value: float, flag: str) -> float:
    if not 0 <= value <= 1:
        raise ConfigError(f"{flag}: expected a share between 0 and 1, got {value}")
    return value


def print_scores(scores: Scores) -> None:
    """The run's headline metrics with n, on all and on valid conversations, the flags and statuses."""
    # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.metrics.validity import crs_failure_text, flag_counts, subset_masks

    table = scores.conversations
    masks = subset_masks(table)
    warning = canned_warning_of(table)
    if warning is not None:
        print(warning)
    excluded = table.loc[~masks["all"], "exclusion"].value_counts() if "exclusion" in table else {}
    print(
        f"{scores.run.path}: {len(table)} conversations, errors {_share(scores.rates['error'])} (any side), "
        f"CRS failures {_share(scores.rates.get('crs_failure'))} ({crs_failure_text(table)}; counted against it), "
        f"excluded {int((~masks['all']).sum())}"
        + (" (" + ", ".join(f"{reason} {int(n)}" for reason, n in excluded.items()) + ")" if len(excluded) else "")
        + f", valid {_share(scores.rates['valid'])}"
    )
    labels = {"all": "all (the CRS took part)", "valid": "valid only (sensitivity)"}
    for subset in ("all", "valid"):
        print(f"  {labels[subset]}: {summary_line(scores.summary, subset, table=table[masks[subset]])}")
    print(f"  flags: {flags_line(flag_counts(scores.conversations))}")
    if "satisfaction_status" in scores.conversations:
        counts = scores.conversations["satisfaction_status"].value_counts()
        print("  satisfaction status: " + ", ".join(f"{k} {int(v)}" for k, v in sorted(counts.items())))


def _share(value: float | None) -> str:
    return "not checked" if value is None else f"{value:.1%}"


def canned_warning_of(table) -> str | None:
    """The opening warning when most of the LLM user's turns in the table's conversations were canned."""
    from usersimcrs.core.generation import canned_warning  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.metrics.validity import TURN_COUNTS

    if not set(TURN_COUNTS) <= set(table.columns):
        return None
    canned, labelled = (table[c].fillna(0).sum() for c in TURN_COUNTS)
    return canned_warning(canned, labelled)


def summary_line(summary, subset: str, metrics: list[str] = HEADLINE, *, table=None) -> str:
    """'success 0.600 (n=20), turns ...': each headline metric of a subset with its n; unmeasured ones say so.
    With the subset's per-conversation `table`, a value computed mostly over canned user turns is marked."""
    from usersimcrs.core.generation import canned_mark  # lazy: keeps `usersimcrs --help` fast
    from usersimcrs.metrics.validity import canned_share

    rows = summary[summary["subset"] == subset].set_index("metric")
    parts = []
    for metric in metrics:
        if metric not in rows.index:
            continue
        n, mean = int(rows.loc[metric, "n"]), rows.loc[metric, "mean"]
        if n == 0 or mean != mean:
            parts.append(f"{metric} not measured (n=0)")
            continue
        mark = canned_mark(canned_share(table, metric)) if table is not None else ""
        parts.append(f"{metric} {mean:.3f} (n={n}){mark}")
    return ", ".join(parts) if parts else "no conversations"


def flags_line(counts: dict[str, tuple[int, int]]) -> str:
    """'too_short 33.3% (n=18), target_leakage not checked (n=0), ...' for every validity flag."""
    parts = []
    for flag, (count, checked) in counts.items():
        if flag in ("valid", "excluded", "crs_failure"):
            continue
        parts.append(f"{flag} not checked (n=0)" if not checked else f"{flag} {count / checked:.1%} (n={checked})")
    return ", ".join(parts)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.score import score  # lazy: keeps `usersimcrs --help` fast

    scores = score(args.run_dir, metrics_config(args), dedupe=args.dedupe)
    print_scores(scores)
    for message in scores.gate:
        print(f"error: {message}", file=sys.stderr)
    return 1 if scores.gate else 0
