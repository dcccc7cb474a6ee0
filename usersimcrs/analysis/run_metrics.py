"""A run's metrics as tables: per conversation (metrics + validity flags), summaries with n and CIs, per-turn curves.

Files written into the run folder (by `RunFolder.write_metrics`):
- ``metrics.csv``: one row per conversation, every metric plus the validity flags;
- ``metrics_summary.csv``: per metric, n / mean / std / 95% bootstrap CI on all and on valid conversations;
- ``metrics_by_turn.csv``: per-turn means (Recall@(t,k), PC_t@k, PCIR_t@k, Jaccard) on all and valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.summary import summarize
from usersimcrs.core.run_folder import Run, RunFolder
from usersimcrs.metrics.compute import compute_metrics, turn_curves
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.metrics.validity import flag_conversations, flag_rates


@dataclass
class RunMetrics:
    """The tables written for a run, and the rates the gate checks."""

    conversations: pd.DataFrame
    summary: pd.DataFrame
    by_turn: pd.DataFrame
    rates: dict[str, float | None]


def evaluate(data: Run, config: MetricsConfig | None = None) -> RunMetrics:
    """Metrics, validity flags and summaries for the dialogues of a run (nothing written)."""
    config = config or MetricsConfig()
    tables = compute_metrics(data.dialogues, config.options)
    flags = flag_conversations(
        data.dialogues, judgments=data.judgments, simulator=data.simulator, options=config.validity
    )
    conversations = tables.conversations.merge(flags, on="conversation_id", how="left")
    valid = conversations["valid"].astype(bool)
    summary = summarize(
        conversations.drop(columns=["leaked"]),
        valid=valid,
        exclude=("conversation_id", "agent_id", "user_id", "index", "status", "valid"),
        seed=data.seed,
        n_resamples=config.bootstrap_resamples,
    )
    valid_ids = conversations.loc[valid, "conversation_id"]
    by_turn = pd.concat(
        [
            turn_curves(tables.turns).assign(subset="all"),
            turn_curves(tables.turns, valid_ids).assign(subset="valid"),
        ],
        ignore_index=True,
    )[["subset", "metric", "turn", "value", "n"]]
    return RunMetrics(conversations=conversations, summary=summary, by_turn=by_turn, rates=flag_rates(flags))


def write_metrics(run_dir: str | Path | RunFolder, result: RunMetrics) -> list[Path]:
    """Write the three CSV files into the run folder (each whole or not at all); returns their paths."""
    folder = run_dir if isinstance(run_dir, RunFolder) else RunFolder(run_dir)
    return folder.write_metrics(
        result.conversations.to_csv(index=False),
        result.summary.to_csv(index=False),
        result.by_turn.to_csv(index=False),
    )


def read_metrics(folder: RunFolder) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame] | None:
    """The three written tables (per conversation, summary, per turn), or None when one is missing."""
    if not folder.has_metrics():
        return None
    conversations, summary, by_turn = folder.metrics_paths
    return pd.read_csv(conversations), pd.read_csv(summary), pd.read_csv(by_turn)
