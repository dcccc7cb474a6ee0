"""Metrics for one run folder: read dialogues (+ judgments), write metrics.csv and its summaries.

Files written next to ``dialogues.jsonl``:
- ``metrics.csv``: one row per conversation, every metric plus the validity flags;
- ``metrics_summary.csv``: per metric, mean / std / 95% bootstrap CI on all and on valid conversations;
- ``metrics_by_turn.csv``: per-turn means (Recall@(t,k), PC_t@k, PCIR_t@k, Jaccard) on all and valid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.analysis.summary import summarize
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import iter_jsonl, read_models
from usersimcrs.errors import DataError
from usersimcrs.metrics.compute import compute_metrics, turn_curves
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.validity import FLAGS, ValidityOptions, flag_conversations, flag_rates

DIALOGUES = "dialogues.jsonl"
JUDGMENTS = "judgments.jsonl"
METRICS = "metrics.csv"
SUMMARY = "metrics_summary.csv"
BY_TURN = "metrics_by_turn.csv"


class MetricsConfig(BaseModel):
    """The `metrics:` section of a run or matrix config (all optional)."""

    model_config = ConfigDict(extra="forbid")

    options: MetricOptions = Field(default_factory=MetricOptions)
    validity: ValidityOptions = Field(default_factory=ValidityOptions)
    bootstrap_resamples: int = Field(2000, ge=100)
    max_failure_rate: float | None = Field(None, ge=0, le=1)
    max_invalid_rate: float | None = Field(None, ge=0, le=1)


@dataclass
class RunData:
    """What a run folder holds, read once."""

    run_dir: Path
    dialogues: list[Dialogue]
    judgments: list[dict[str, Any]]
    manifest: dict[str, Any]

    @property
    def simulator(self) -> str | None:
        return ((self.manifest.get("config") or {}).get("simulator") or {}).get("type")

    @property
    def crs(self) -> str | None:
        return ((self.manifest.get("config") or {}).get("crs") or {}).get("type")

    @property
    def seed(self) -> int:
        seeds = self.manifest.get("seeds") or {}
        return int(seeds.get("run", (self.manifest.get("config") or {}).get("seed", 0)) or 0)


def load_run(run_dir: str | Path) -> RunData:
    """Read a run folder; a folder without dialogues.jsonl is a DataError naming it."""
    import json

    run_dir = Path(run_dir)
    path = run_dir / DIALOGUES
    if not path.exists():
        raise DataError(f"{run_dir}: no {DIALOGUES} here (not a run folder?)")
    manifest_path = run_dir / "manifest.json"
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DataError(f"{manifest_path}: not valid JSON ({exc})") from None
    return RunData(
        run_dir=run_dir,
        dialogues=read_models(path, Dialogue),
        judgments=list(iter_jsonl(run_dir / JUDGMENTS)),
        manifest=manifest,
    )


@dataclass
class RunMetrics:
    """The tables written for a run, and the rates the gate checks."""

    conversations: pd.DataFrame
    summary: pd.DataFrame
    by_turn: pd.DataFrame
    rates: dict[str, float | None]


def evaluate(data: RunData, config: MetricsConfig | None = None) -> RunMetrics:
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


def write_metrics(run_dir: str | Path, result: RunMetrics) -> list[Path]:
    """Write the three CSV files into the run folder; returns their paths."""
    run_dir = Path(run_dir)
    paths = [run_dir / METRICS, run_dir / SUMMARY, run_dir / BY_TURN]
    result.conversations.to_csv(paths[0], index=False)
    result.summary.to_csv(paths[1], index=False)
    result.by_turn.to_csv(paths[2], index=False)
    return paths


def gate_messages(rates: dict[str, float | None], config: MetricsConfig) -> list[str]:
    """One line per exceeded threshold (empty when the run passes the gate or has no conversations)."""
    messages = []
    failed, valid = rates.get("failed"), rates.get("valid")
    if config.max_failure_rate is not None and failed is not None and failed > config.max_failure_rate:
        messages.append(
            f"failure rate {failed:.1%} exceeds the allowed {config.max_failure_rate:.1%}"
        )
    if valid is None and (config.max_failure_rate is not None or config.max_invalid_rate is not None):
        messages.append("no conversations to check")
    invalid = None if valid is None else 1.0 - valid
    if config.max_invalid_rate is not None and invalid is not None and invalid > config.max_invalid_rate:
        messages.append(f"invalid rate {invalid:.1%} exceeds the allowed {config.max_invalid_rate:.1%}")
    return messages


__all__ = ["FLAGS", "MetricsConfig", "RunData", "RunMetrics", "evaluate", "gate_messages", "load_run", "write_metrics"]
