"""A run's metrics as tables: per conversation (metrics + validity flags), summaries with n and CIs, per-turn curves.

Files written into the run folder (by `RunFolder.write_metrics`):
- ``metrics.csv``: one row per conversation, every metric plus the validity flags;
- ``metrics_summary.csv``: per metric, n / mean / std / 95% bootstrap CI on the subsets "all" (every
  conversation the CRS took part in: the headline) and "valid" (the sensitivity check);
- ``metrics_by_turn.csv``: per-turn means (Recall@(t,k), PC_t@k, PCIR_t@k, Jaccard) on both subsets.

A conversation the simulator or the toolkit broke (`excluded`) has no metric values at all and is
in neither subset; its flags and reason stay in ``metrics.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.summary import summarize
from usersimcrs.core.run_folder import Run, RunFolder
from usersimcrs.metrics.compute import compute_metrics, turn_curves
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.metrics.validity import TURN_COUNTS, flag_conversations, flag_rates, subset_masks


@dataclass
class RunMetrics:
    """The tables written for a run, and the rates the gate checks."""

    conversations: pd.DataFrame
    summary: pd.DataFrame
    by_turn: pd.DataFrame
    rates: dict[str, float | None]


def evaluate(data: Run, config: MetricsConfig | None = None) -> RunMetrics:
    """Metrics, validity flags and summaries for the dialogues of a run (nothing written); models the metrics
    load come from the run's `resources` (a matrix's cells share one classifier)."""
    config = config or MetricsConfig()
    tables = compute_metrics(data.dialogues, config.options, data.resources)
    flags = flag_conversations(
        data.dialogues, judgments=data.judgments, simulator=data.simulator, options=config.validity
    )
    conversations = without_excluded_values(
        tables.conversations.merge(flags, on="conversation_id", how="left"), tables.metrics
    )
    masks = subset_masks(conversations)
    summary = summarize(
        conversations,
        subsets=masks,
        exclude=SUMMARY_EXCLUDE,
        seed=data.seed,
        n_resamples=config.bootstrap_resamples,
    )
    by_turn = pd.concat(
        [
            turn_curves(tables.turns, conversations.loc[mask, "conversation_id"]).assign(subset=name)
            for name, mask in masks.items()
        ],
        ignore_index=True,
    )[["subset", "metric", "turn", "value", "n"]]
    return RunMetrics(conversations=conversations, summary=summary, by_turn=by_turn, rates=flag_rates(flags))


# per-conversation columns that are not metrics (IDs, text columns of the gate, its subset markers)
SUMMARY_EXCLUDE = (
    "conversation_id",
    "agent_id",
    "user_id",
    "index",
    "status",
    "failure_side",
    "leaked",
    *TURN_COUNTS,
    "exclusion",
    "excluded",
    "valid",
)


def without_excluded_values(conversations: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Blank every numeric metric of the conversations the simulator or toolkit broke (text columns stay)."""
    if "excluded" not in conversations or not conversations["excluded"].astype(bool).any():
        return conversations
    out = conversations.copy()
    excluded = out["excluded"].astype(bool)
    for column in metrics:
        if column in out and not out[column].map(lambda v: isinstance(v, str)).any():
            out[column] = out[column].astype(object)
            out.loc[excluded, column] = None
    return out


def stale_metrics(folder: RunFolder) -> bool:
    """Whether the metric tables are missing or were written before the gate split CRS failures from exclusions
    (or before the error flags were named `error`, `crs_error`, ..., or the canned user turns were counted)."""
    if not folder.has_metrics():
        return True
    with folder.metrics_paths[0].open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split(",")
    return not {"excluded", "crs_error", *TURN_COUNTS} <= set(header)


def write_metrics(run_dir: str | Path | RunFolder, result: RunMetrics) -> list[Path]:
    """Write the three CSV files into the run folder (each whole or not at all); returns their paths."""
    folder = run_dir if isinstance(run_dir, RunFolder) else RunFolder(run_dir)
    return folder.write_metrics(
        result.conversations.to_csv(index=False),
        result.summary.to_csv(index=False),
        result.by_turn.to_csv(index=False),
    )


def read_metrics(folder: RunFolder) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """The three written tables (per conversation, summary, per turn), or None when one is missing or
    they were written by a version without the all/valid split (then they are computed again)."""
    if stale_metrics(folder):
        return None
    conversations, summary, by_turn = folder.metrics_paths
    return pd.read_csv(conversations), pd.read_csv(summary), pd.read_csv(by_turn)
