"""The report of one run folder: overview, validity, metrics, per-turn curves, judges."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from usersimcrs.analysis.human_reference import writing_summary
from usersimcrs.analysis.run_metrics import evaluate, read_metrics, write_metrics
from usersimcrs.analysis.summary import item_coverage
from usersimcrs.core.generation import canned_mark, canned_warning, user_turn_kinds
from usersimcrs.core.human_reference import load_reference
from usersimcrs.core.run_folder import Run, load_run
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.metrics.item_resolution import is_item_metric
from usersimcrs.metrics.validity import TURN_COUNTS, canned_share, crs_failure_text, is_set, subset_masks
from usersimcrs.report.evaluators import EVALUATORS, HumanAgreement, evaluator_table
from usersimcrs.report.html import Report
from usersimcrs.report.learned import add_learned_section
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
    """The metric tables (per conversation, summary, per turn): read when written (by this version), else
    computed and written."""
    written = read_metrics(data.folder) if config is None else None
    if written is not None:
        return written
    result = evaluate(data, config)
    write_metrics(data.folder, result)
    return result.conversations, result.summary, result.by_turn


def overview_table(data: Run, conversations: pd.DataFrame) -> pd.DataFrame:
    """Facts about the run: what ran, how many conversations (counted, CRS failures, excluded), models, tokens, time."""
    masks = subset_masks(conversations)
    manifest = data.manifest
    config = manifest.config
    llm = manifest.llm
    rows = [
        ("run", data.name),
        ("simulator", data.simulator or "–"),
        ("CRS", data.crs or "–"),
        ("conversations", len(conversations)),
        ("errors (any side)", _count(conversations, "error")),
        ("counted ('all': the CRS took part)", int(masks["all"].sum())),
        (
            "CRS failures (counted against it)",
            f"{_count(conversations, 'crs_failure')} ({crs_failure_text(conversations)})",
        ),
        ("excluded (simulator or toolkit broke it)", int((~masks["all"]).sum())),
        ("valid (sensitivity subset)", int(masks["valid"].sum())),
        ("max turns", config.get("max_turns", "–")),
        ("seed", data.seed),
        ("LLM", _llm_label(manifest.models, config)),
        ("LLM tokens", int(llm.get("prompt_tokens", 0) or 0) + int(llm.get("completion_tokens", 0) or 0)),
        ("wall time (s)", manifest.timings.wall_s if manifest.timings.sessions else "–"),
        ("config hash", manifest.config_hash or "–"),
    ]
    turns = user_turn_kinds(u for d in data.dialogues for u in d.utterances)
    if turns["labelled"]:  # an LLM user: say how many of its turns were not the model's words as written
        rows.insert(
            6,
            (
                "LLM user turns: fallback / repaired / all",
                f"{turns['fallback']} / {turns['repaired']} / {turns['labelled']}",
            ),
        )
    writing = writing_summary(data.dialogues, load_reference())
    if writing is not None:  # were the users human-like? (the bundled reference of people writing to recommenders)
        rows.insert(3, ("how these users write", writing.line()))
    return pd.DataFrame(rows, columns=["field", "value"]).astype({"value": str})


def build_run_report(
    run_dir: str | Path | Run,
    config: MetricsConfig | None = None,
    *,
    dedupe: bool = False,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None = None,
    learned_model: str | Path | None = None,
) -> Path:
    """Write the run's report page (and its plots and tables); returns the page's path.

    Holds the folder's writer lock. A file whose conversation IDs repeat is refused with the count
    unless `dedupe` (or a `Run` opened with `duplicates="first"`). `human_agreement`: an evaluator's
    measured agreement with human judgments (see `report.evaluators`).
    """
    data = run_dir if isinstance(run_dir, Run) else load_run(run_dir, duplicates="first" if dedupe else "refuse")
    with data.folder.lock("report"):
        return _write_run_report(data, config, human_agreement, learned_model)


def _write_run_report(
    data: Run,
    config: MetricsConfig | None,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None,
    learned_model: str | Path | None = None,
) -> Path:
    conversations, summary, by_turn = run_tables(data, config)
    report = Report(
        title=f"Run report: {data.name}",
        subtitle=f"simulator {data.simulator or '–'} · CRS {data.crs or '–'} · {len(conversations)} conversations",
    )
    warning = canned_warning(*(conversations[c].fillna(0).sum() if c in conversations else 0 for c in TURN_COUNTS))
    if warning is not None:  # before anything else: the figures below measure answers to canned lines
        report.text("Warning: " + warning.removeprefix("warning: "), note=True)
    report.section("Overview")
    report.table("overview", overview_table(data, conversations))
    report.section("Metrics")
    table = metric_table(summary)
    unmeasured = unmeasured_metrics(table)
    counted = conversations[subset_masks(conversations)["all"]]
    coverage = item_coverage(counted)
    share = coverage["unresolved_share"].iloc[0] if not coverage.empty else None
    shown = table[~table["metric"].isin(unmeasured)].copy()
    if share is not None and not pd.isna(share):
        shown["items unresolved"] = [f"{share:.0%}" if is_item_metric(m) else "" for m in shown["metric"]]
    canned = {m: canned_share(counted, m) for m in shown["metric"]}
    if any(v is not None for v in canned.values()):
        shown["canned user turns"] = [
            "–" if canned[m] is None else f"{canned[m]:.0%}" + (" ⚠" if canned_mark(canned[m]) else "")
            for m in shown["metric"]
        ]
    report.table(
        "metrics_summary",
        shown,
        caption="Mean and 95% bootstrap CI per metric on 'all' (every conversation the CRS took part in, its own "
        "failures counted: the headline) and on 'valid' (the sensitivity check), with n = conversations where it "
        "was measured; items unresolved = share of recommended items the item metrics could not match"
        + (
            "; canned user turns = share of the LLM user's turns in the measured conversations ('all') that were "
            "canned fallbacks, not the model's words (⚠: most of them: the value measures answers to canned lines)"
            if "canned user turns" in shown
            else ""
        )
        + ".",
    )
    if unmeasured:
        report.text(
            "Not measured on any conversation (n = 0; missing, never 0): " + ", ".join(unmeasured) + ".",
            note="success" in unmeasured,
        )
    if share is not None and not pd.isna(share) and share >= 0.5:
        report.text(
            f"{share:.0%} of the recommended items are not in the item collection: recall, hits and coverage "
            "measure the catalogue mismatch here, not the CRS (docs/metrics.md, 'Item coverage').",
            note=True,
        )
    if not coverage.empty:
        report.table(
            "item_coverage",
            coverage,
            caption="Recommended list entries by how they matched the item collection (resolved / ambiguous / "
            "unresolved).",
        )
    measured = [m for m in shown["metric"] if m in EVALUATORS]
    if measured:
        report.table(
            "evaluators",
            evaluator_table(measured, human_agreement),
            caption="Each evaluator's scale and its measured agreement with human judgments ('not measured' where "
            "none exists).",
        )
    if "satisfaction_status" in conversations and (conversations["satisfaction_status"] != "ok").any():
        counts = conversations["satisfaction_status"].fillna("unknown").value_counts().sort_index()
        report.table(
            "satisfaction_status",
            counts.rename_axis("status").reset_index(name="conversations"),
            caption="Why satisfaction is missing where it is: out_of_scale = the classifier answered "
            "outside 1-5 (it can say 0), failed_conversation = nothing to classify; never counted as a score.",
        )
    reasons = end_reason_table(summary)
    if not reasons.empty:
        report.table("end_reasons", reasons, caption="Why conversations ended (share).")
    if learned_model is not None:
        counted = conversations[subset_masks(conversations)["all"]].assign(crs=data.crs or "–")
        add_learned_section(report, learned_model, data.dialogues, counted, ["crs"], seed=data.seed or 0)
    report.section("Validity")
    validity = validity_table(conversations, config.validity if config is not None else None)
    report.text(
        "The CRS's own failures (it failed, looped or answered nothing) stay in 'all' and count against it; "
        "conversations the simulator or the toolkit broke are excluded from every mean, with the flags below.",
        note=bool((~subset_masks(conversations)["valid"]).any()),
    )
    report.table(
        "validity",
        validity,
        caption="Validity flags: the side responsible, what the flag does, conversations with the flag, "
        "conversations where it could be checked, and the share among those; an unchecked flag never counts.",
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
    curves = by_turn[by_turn["subset"] == "all"]
    if curves.empty:
        curves = by_turn[by_turn["subset"] == "valid"]
    if not curves.empty:
        report.section("Per turn", folded=True)
        add_per_turn_plots(report, curves, horizon=int(curves["turn"].max()))
    add_transcripts(report, data.dialogues, conversations)
    counted = set(conversations.loc[subset_masks(conversations)["all"], "conversation_id"].astype(str))
    add_judgment_sections(report, data.judgments, valid_ids=counted, seed=data.seed, scope="counted", folded=True)
    return report.write(data.folder.report_dir, page=data.folder.report_page)


def _count(table: pd.DataFrame, column: str) -> int:
    return int(is_set(table[column]).sum()) if column in table else 0


def _llm_label(models: dict[str, Any], config: dict[str, Any]) -> str:
    """The models the run actually called (component: backend:model), else the configured one."""
    used = models.get("used") or {}
    if used:
        return ", ".join(f"{component}: {model}" for component, model in sorted(used.items()))
    llm = config.get("llm") or {}
    return f"{llm.get('backend') or '–'} / {llm.get('model') or 'default'}"
