"""The report of one run folder: overview, validity, metrics, per-turn curves, judges."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from usersimcrs.analysis.run_metrics import evaluate, read_metrics, write_metrics
from usersimcrs.core.run_folder import Run, load_run
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.report.html import Report
from usersimcrs.report.sections import (
    add_judgment_sections,
    add_per_turn_plots,
    add_transcripts,
    end_reason_table,
    failure_reasons,
    metric_table,
    unmeasured_metrics,
    validity_table,
)


def run_tables(data: Run, config: MetricsConfig | None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The metric tables (per conversation, summary, per turn): read when written, else computed and written."""
    written = read_metrics(data.folder) if config is None else None
    if written is not None:
        return written
    result = evaluate(data, config)
    write_metrics(data.folder, result)
    return result.conversations, result.summary, result.by_turn


def overview_table(data: Run, conversations: pd.DataFrame) -> pd.DataFrame:
    """Facts about the run: what ran, how many conversations, models, tokens, time."""
    manifest = data.manifest
    config = manifest.config
    llm = manifest.llm
    rows = [
        ("run", data.name),
        ("simulator", data.simulator or "–"),
        ("CRS", data.crs or "–"),
        ("conversations", len(conversations)),
        ("failed", int((conversations["status"] == "failed").sum()) if "status" in conversations else 0),
        ("valid", int(conversations["valid"].astype(bool).sum()) if "valid" in conversations else len(conversations)),
        ("max turns", config.get("max_turns", "–")),
        ("seed", data.seed),
        ("LLM", _llm_label(manifest.models, config)),
        ("LLM tokens", int(llm.get("prompt_tokens", 0) or 0) + int(llm.get("completion_tokens", 0) or 0)),
        ("wall time (s)", manifest.timings.wall_s if manifest.timings.sessions else "–"),
        ("config hash", manifest.config_hash or "–"),
    ]
    return pd.DataFrame(rows, columns=["field", "value"]).astype({"value": str})


def build_run_report(run_dir: str | Path | Run, config: MetricsConfig | None = None, *, dedupe: bool = False) -> Path:
    """Write the run's report page (and its plots and tables); returns the page's path.

    Holds the folder's writer lock. A file whose conversation IDs repeat is refused with the count
    unless `dedupe` (or a `Run` opened with `duplicates="first"`).
    """
    data = run_dir if isinstance(run_dir, Run) else load_run(run_dir, duplicates="first" if dedupe else "refuse")
    with data.folder.lock("report"):
        return _write_run_report(data, config)


def _write_run_report(data: Run, config: MetricsConfig | None) -> Path:
    conversations, summary, by_turn = run_tables(data, config)
    report = Report(
        title=f"Run report: {data.name}",
        subtitle=f"simulator {data.simulator or '–'} · CRS {data.crs or '–'} · {len(conversations)} conversations",
    )
    report.section("Overview")
    report.table("overview", overview_table(data, conversations))
    report.section("Validity")
    validity = validity_table(conversations)
    report.text(
        "Means are given on all conversations and on valid ones (not failed, not too short, no repetition "
        "loop, no target leakage).",
        note=bool(validity.loc[validity["flag"] == "valid", "share"].iloc[0] < 1),
    )
    report.table(
        "validity",
        validity,
        caption="Validity flags: conversations with the flag, conversations where "
        "it could be checked, and the share among those; an unchecked flag never invalidates.",
    )
    failures = failure_reasons(data.dialogues)
    if not failures.empty:
        report.heading("What went wrong")
        report.table(
            "failure_reasons",
            failures,
            caption="Errors of failed conversations grouped into reasons "
            "(numbers, IDs, URLs and quoted values replaced), with example conversation IDs.",
        )
    report.section("Metrics")
    table = metric_table(summary)
    unmeasured = unmeasured_metrics(table)
    report.table(
        "metrics_summary",
        table[~table["metric"].isin(unmeasured)],
        caption="Mean and 95% bootstrap CI per metric, with n = conversations where it was measured.",
    )
    if unmeasured:
        report.text(
            "Not measured on any conversation (n = 0; missing, never 0): " + ", ".join(unmeasured) + ".",
            note="success" in unmeasured,
        )
    if "satisfaction_status" in conversations and (conversations["satisfaction_status"] != "ok").any():
        counts = conversations["satisfaction_status"].fillna("unknown").value_counts().sort_index()
        report.table(
            "satisfaction_status",
            counts.rename_axis("status").reset_index(name="conversations"),
            caption="Why satisfaction is missing where it is: out_of_scale = the classifier answered "
            "outside 1-5 (it can say 0), never counted as a score.",
        )
    reasons = end_reason_table(summary)
    if not reasons.empty:
        report.table("end_reasons", reasons, caption="Why conversations ended (share).")
    curves = by_turn[by_turn["subset"] == "valid"]
    if curves.empty:
        curves = by_turn[by_turn["subset"] == "all"]
    if not curves.empty:
        report.section("Per turn")
        add_per_turn_plots(report, curves)
    add_transcripts(report, data.dialogues, conversations)
    valid_ids = set(conversations.loc[conversations["valid"].astype(bool), "conversation_id"].astype(str))
    add_judgment_sections(report, data.judgments, valid_ids=valid_ids, seed=data.seed)
    return report.write(data.folder.report_dir, page=data.folder.report_page)


def _llm_label(models: dict[str, Any], config: dict[str, Any]) -> str:
    """The models the run actually called (component: backend:model), else the configured one."""
    used = models.get("used") or {}
    if used:
        return ", ".join(f"{component}: {model}" for component, model in sorted(used.items()))
    llm = config.get("llm") or {}
    return f"{llm.get('backend') or '–'} / {llm.get('model') or 'default'}"
