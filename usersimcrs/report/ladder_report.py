"""The page of a sensitivity ladder: one picture (each score's mean per rung with its CI), a verdict per score in
words, Kendall tau against the known order, and per adjacent pair of rungs the paired difference and the
conversations a study would need to see it (docs/ladder.md)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from usersimcrs.analysis.ladder import LadderResult, ScoreLadder
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.report import plots
from usersimcrs.report.html import Report
from usersimcrs.report.tables import p_value_text


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    """'0.910 [0.850, 0.960]', '–' for a missing value."""
    if value is None:
        return "–"
    bounds = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{value:.3f}{bounds}"


def means_frame(ladder: ScoreLadder, rungs: list[str]) -> pd.DataFrame:
    """Rows best rung first: rung, mean, ci_low, ci_high, n (what the picture draws)."""
    return pd.DataFrame(
        [{"rung": rung, **ladder.means[rung].model_dump()} for rung in rungs],
        columns=["rung", "mean", "ci_low", "ci_high", "n"],
    )


def verdict_table(result: LadderResult) -> pd.DataFrame:
    """One row per score: verdict, tau [CI], and each rung's mean (n)."""
    rows = []
    for score, ladder in result.scores.items():
        tau = ladder.kendall_tau
        row = {
            "score": score,
            "verdict": ladder.verdict,
            "Kendall tau [95% CI]": "–"
            if tau.value is None
            else f"{tau.value:.2f} [{tau.ci_low:.2f}, {tau.ci_high:.2f}]"
            if tau.ci_low is not None and tau.ci_high is not None
            else f"{tau.value:.2f}",
        }
        for rung in result.rungs:
            mean = ladder.means[rung]
            row[rung] = "–" if mean.mean is None else f"{mean.mean:.3f} (n={mean.n})"
        rows.append(row)
    return pd.DataFrame(rows)


def pairs_table(result: LadderResult) -> pd.DataFrame:
    """One row per score and adjacent pair: paired difference [CI], p, and the conversations needed (or why not)."""
    rows = []
    for score, ladder in result.scores.items():
        for pair in ladder.pairs:
            rows.append(
                {
                    "score": score,
                    "pair": f"{pair.better} − {pair.worse}",
                    "n pairs": pair.n_pairs,
                    "difference [95% CI]": _interval(pair.difference, pair.ci_low, pair.ci_high),
                    "p (permutation)": "–" if pair.p_value is None else p_value_text(pair.p_value),
                    "power as run": "–" if pair.power_at_observed_n is None else f"{pair.power_at_observed_n:.0%}",
                    "n for 80% power": "–" if pair.n_for_80_power is None else str(pair.n_for_80_power),
                    "why no figure": pair.power_notes or "",
                }
            )
    return pd.DataFrame(rows)


def build_ladder_report(result: LadderResult, folder: MatrixFolder) -> Path:
    """Write the ladder's report.html (with plots/ and tables/ under report/) into its folder; returns the page."""
    scores = list(result.scores)
    report = Report(
        title=f"Sensitivity ladder: {result.simulator}",
        subtitle=f"{len(result.rungs)} reference CRSs of known order ({', '.join(result.rungs)}, best first) · "
        f"{result.conversations_per_rung} conversations per rung, the same users and seeds on every rung · "
        f"dataset {result.dataset} · {result.config}",
    )
    report.section("Does each score order the ladder?")
    report.text(
        "Each reference CRS is built to be worse than the one before it: the oracle recommends what the user's "
        "profile says they like, the next rungs replace 30% and 70% of its list with random catalogue items, then "
        "a random CRS and a broken one that repeats itself. A score that tells good CRSs from bad ones ranks them in "
        "this order: Kendall tau near 1. The verdict reads the 95% CI of tau: it orders the ladder when tau ≥ 0.8 and "
        "the CI is above 0, it does not when the whole CI is below 0.8 (or every rung scores the same), else the "
        "figures cannot tell."
    )
    if scores:
        panels = {score: means_frame(result.scores[score], result.rungs) for score in scores}
        titles = {
            score: f"{score}: {ladder.verdict} (tau {ladder.kendall_tau.value:.2f})"
            if ladder.kendall_tau.value is not None
            else f"{score}: {ladder.verdict}"
            for score, ladder in result.scores.items()
        }
        report.plot(
            "ladder",
            plots.ladder_panels(panels, titles=titles),
            caption="Mean of each score per rung (best rung on the left) with its 95% bootstrap CI; n per rung in "
            "the table below.",
        )
    for score in scores:
        report.text(result.scores[score].verdict_text, verdict=True)
    for score, reason in result.left_out.items():
        report.text(f"{score} is left out: it {reason}.", note=True)
    report.table(
        "ladder_verdicts",
        verdict_table(result),
        caption="Per score: the verdict, Kendall tau-b of the rung means against the known order with its 95% CI "
        "(conversations resampled jointly across rungs), and each rung's mean with its n.",
    )
    report.section("Adjacent rungs: differences and the conversations needed")
    report.text(
        "For each rung and the next worse one, the mean paired difference (same users and seeds) with its 95% "
        "bootstrap CI and permutation p-value, the power the ladder as run had to see it, and the conversations per "
        "CRS a study needs to see a difference of this size with 80% power at α = 0.05 (resampling the paired "
        "differences; docs/ladder.md). A missing figure says why."
    )
    report.table("ladder_pairs", pairs_table(result), caption="Adjacent pairs of rungs, per score.")
    return report.write(folder.report_dir, page=folder.report_page)


__all__ = ["build_ladder_report", "pairs_table", "verdict_table"]
