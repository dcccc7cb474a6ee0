"""Score a run: rule-based metrics, validity flags and summaries, written next to its dialogues."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.run_metrics import evaluate, write_metrics
from usersimcrs.core.manifest import update_manifest
from usersimcrs.core.run_folder import MANIFEST, Run, load_run
from usersimcrs.metrics.config import MetricsConfig, gate_messages


@dataclass
class Scores:
    """What scoring a run produced: per-conversation table, summary (with n per metric), per-turn curves."""

    run: Run
    conversations: pd.DataFrame
    summary: pd.DataFrame
    by_turn: pd.DataFrame
    rates: dict[str, float | None]
    gate: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)

    def mean(self, metric: str, subset: str = "all") -> float | None:
        """The mean of `metric` on `subset` ("all" or "valid"); None when it was not measured."""
        rows = self.summary[(self.summary["subset"] == subset) & (self.summary["metric"] == metric)]
        if rows.empty or pd.isna(rows["mean"].iloc[0]):
            return None
        return float(rows["mean"].iloc[0])


def load_metrics_config(path: str | Path | None) -> MetricsConfig:
    """The `metrics:` section of a YAML file (defaults when no file is given); errors name the file and key."""
    from usersimcrs.config import read_yaml, validate_section

    data = (read_yaml(path).get("metrics") or {}) if path else {}
    config: MetricsConfig = validate_section(MetricsConfig, data, source=str(path or "metrics"), prefix="metrics")
    return config


def as_run(run: Run | str | Path) -> Run:
    """A `Run` handle for a run or a path to a run folder."""
    return run if isinstance(run, Run) else load_run(run)


def score(run: Run | str | Path, config: MetricsConfig | None = None, *, write: bool = True) -> Scores:
    """Compute the metrics of a run; with `write`, store metrics*.csv and the manifest's `metrics` entry."""
    run = as_run(run)
    config = config or MetricsConfig()
    result = evaluate(run, config)
    messages = gate_messages(result.rates, config)
    files: list[Path] = []
    if write:
        files = write_metrics(run.path, result)
        if (run.path / MANIFEST).exists():
            update_manifest(
                run.path,
                {
                    "metrics": {
                        "rates": result.rates,
                        "files": [p.name for p in files],
                        "gate": "failed" if messages else "passed",
                    }
                },
            )
            run.refresh()
    return Scores(
        run=run,
        conversations=result.conversations,
        summary=result.summary,
        by_turn=result.by_turn,
        rates=result.rates,
        gate=messages,
        files=files,
    )
