"""Score a run: rule-based metrics, validity flags and summaries, written next to its dialogues."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from usersimcrs.analysis.run_metrics import evaluate, write_metrics
from usersimcrs.config import read_yaml, validate_section
from usersimcrs.core.run_folder import Run, load_run
from usersimcrs.core.shared_resources import SharedResources
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
        """The mean of `metric` on `subset`: "all" (every conversation the CRS took part in, the headline) or
        "valid" (the sensitivity check); None when it was not measured."""
        rows = self.summary[(self.summary["subset"] == subset) & (self.summary["metric"] == metric)]
        if rows.empty or pd.isna(rows["mean"].iloc[0]):
            return None
        return float(rows["mean"].iloc[0])


def load_metrics_config(path: str | Path | None) -> MetricsConfig:
    """The `metrics:` section of a YAML file (defaults when no file is given); errors name the file and key."""
    data = (read_yaml(path).get("metrics") or {}) if path else {}
    config: MetricsConfig = validate_section(MetricsConfig, data, source=str(path or "metrics"), prefix="metrics")
    return config


def as_run(run: Run | str | Path, *, dedupe: bool = False, resources: SharedResources | None = None) -> Run:
    """A `Run` handle for a run or a path to a run folder (`dedupe`: read the first line of a repeated ID;
    `resources`: the command's shared resources, for a path)."""
    if isinstance(run, Run):
        return run
    return load_run(run, duplicates="first" if dedupe else "refuse", resources=resources)


def score(
    run: Run | str | Path,
    config: MetricsConfig | None = None,
    *,
    write: bool = True,
    dedupe: bool = False,
    resources: SharedResources | None = None,
) -> Scores:
    """Compute the metrics of a run; with `write`, store the metric tables and the manifest's `metrics` entry.

    Writing holds the folder's writer lock. A file whose conversation IDs repeat is refused
    (`DuplicateConversations`, with the count) unless `dedupe` (or a `Run` opened with `duplicates="first"`).
    `resources`: what the command shares between the runs it scores (items, the satisfaction classifier).
    """
    run = as_run(run, dedupe=dedupe, resources=resources)
    config = config or MetricsConfig()
    if not write:
        return _scores(run, config, write=False)
    with run.folder.lock("metrics"):
        return _scores(run, config, write=True)


def _scores(run: Run, config: MetricsConfig, *, write: bool) -> Scores:
    result = evaluate(run, config)
    messages = gate_messages(result.rates, config)
    files: list[Path] = []
    if write:
        files = write_metrics(run.folder, result)
        if run.folder.manifest_path.exists():
            run.folder.update_manifest(
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
