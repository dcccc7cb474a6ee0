"""The fidelity report: distances with CIs, discriminator AUC, and the feature distributions side by side."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from usersimcrs.analysis.fidelity import (
    ACCEPT_CUES,
    CONTEXT,
    NUMERIC_FEATURES,
    REJECT_CUES,
    baseline_verdict,
    readings_text,
)
from usersimcrs.report import plots
from usersimcrs.report.html import Report
from usersimcrs.report.sections import add_interval_plot, add_left_out_notes

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.analysis.fidelity import FidelityResult


def add_fidelity_section(report: Report, result: FidelityResult, features: pd.DataFrame) -> None:
    """Discriminator and distance figures per simulator, and box plots of every feature."""
    table = result.table()
    report.section("Simulator fidelity")
    report.text(
        f"Simulated: {result.simulated} ({len(result.groups)} run(s)); human: {result.human} "
        f"({result.n_human} conversations). CIs: {result.ci_method}, {result.resamples} resamples, "
        f"seed {result.seed}. KS 0 = same distribution, 1 = disjoint; Wasserstein in the feature's unit; "
        "discriminator AUC 0.5 = simulated users cannot be told from humans."
    )
    add_left_out_notes(report, result.left_out)  # compared: completed conversations only; the rest is named
    smallest = min([result.n_human] + [r.n_simulated for r in result.rows if r.statistic == "discriminator_auc"])
    if smallest < 30:
        report.text(
            f"As few as {smallest} conversations on one side (human: {result.n_human}): every CI here is wide.",
            note=True,
        )
    context = baseline_verdict(result.baselines)
    if context:
        report.text(
            f"{context}. An AUC near a context baseline's says little more than that the setting differs: human "
            "populations that differ only in whom they talked to, or in how their corpus was collected, are told "
            "apart this well by the same features."
        )
    for simulator in result.groups:
        for line in readings_text(result.readings, simulator):
            report.text(line)
    report.table(
        "fidelity",
        table,
        caption=f"Distances between simulated and human conversations; rows '{CONTEXT}A vs B' compare two human "
        "populations (the context baselines)",
    )
    add_interval_plot(
        report,
        "discriminator_auc",
        table[(table["statistic"] == "discriminator_auc") & table["value"].notna()],
        label="simulator",
        xlabel="ROC AUC",
        title="Simulated vs human, and human vs human",
        caption="Cross-validated discriminator AUC with CI (dashed: 0.5, indistinguishable)",
        reference=0.5,
    )
    ks = table[
        (table["statistic"] == "ks") & table["value"].notna() & ~table["simulator"].str.startswith(CONTEXT)
    ].assign(label=lambda t: t["simulator"] + " · " + t["feature"])
    add_interval_plot(
        report,
        "ks_distances",
        ks,
        label="label",
        xlabel="Kolmogorov-Smirnov statistic",
        title="Feature distances (KS)",
        caption="KS statistic per feature with CI",
        reference=0.0,
    )
    panels = {f: {g: list(part[f]) for g, part in features.groupby("group", sort=False)} for f in NUMERIC_FEATURES}
    report.plot(
        "feature_distributions",
        plots.distribution_panels(panels, title="Per-conversation features"),
        caption="Box: quartiles; line: median; triangle: mean",
    )
    report.text(
        "Lexical cues (lower-cased, whole words). Accept: "
        + ", ".join(ACCEPT_CUES)
        + ". Reject: "
        + ", ".join(REJECT_CUES)
        + ", or a turn opening with no/nope/nah. Question: a '?' or an opening "
        "question word."
    )


def build_fidelity_report(result: FidelityResult, features: pd.DataFrame) -> Report:
    report = Report(
        title="Simulator fidelity against human conversations", subtitle=f"{result.simulated} vs {result.human}"
    )
    add_fidelity_section(report, result, features)
    return report
