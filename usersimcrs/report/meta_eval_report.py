"""The meta-evaluation report: agreement table with CIs, system-level scatter and ranking comparison."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from usersimcrs.analysis.aspect_agreement import SYSTEMS_NOT_CONVERSATIONS
from usersimcrs.analysis.battles import BattleRanking
from usersimcrs.analysis.ranking import ranking
from usersimcrs.report import plots
from usersimcrs.report.html import Report
from usersimcrs.report.sections import add_interval_plot, add_left_out_notes

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.analysis.aspect_agreement import AspectMetaEvalResult
    from usersimcrs.analysis.meta_eval import MetaEvalResult


def caveat_table(result: MetaEvalResult) -> pd.DataFrame:
    """meta_eval.csv's rows with a caveat column (small n, CI spanning chance, not measured)."""
    table = result.table()
    table["caveat"] = ["; ".join(r.caveats()) for r in result.rows]
    return table


def human_ranking_table(ranking: BattleRanking) -> pd.DataFrame:
    """The BT ranking for printing: strength with CI, battles, wins-losses-ties and Elo."""
    rows = [
        {
            "system": s.system,
            "bt": s.score,
            "ci_low": s.ci_low,
            "ci_high": s.ci_high,
            "battles": s.battles,
            "w-l-t": f"{s.wins}-{s.losses}-{s.ties}",
            "elo": s.elo,
        }
        for s in ranking.systems
    ]
    return pd.DataFrame(rows, columns=["system", "bt", "ci_low", "ci_high", "battles", "w-l-t", "elo"])


def system_ranking_table(result: MetaEvalResult, score: str) -> pd.DataFrame:
    """One score's ranking of systems beside the human one: mean (n) and rank, human score and rank.

    Ranks are 1 = best with average ranks for ties; a system without a mean or a human score has no rank.
    """
    systems = result.systems_table()
    part = systems[systems["score"] == score].set_index("system")
    if part.empty:
        return pd.DataFrame()
    table = pd.DataFrame(
        {
            "system": part.index,
            "mean": part["mean"].to_numpy(),
            "n": part["n"].to_numpy(),
            "rank": part["mean"].rank(ascending=False, method="average").to_numpy(),
            "human": part["human"].to_numpy(),
            "human_n": part["human_n"].to_numpy(),
            "human_rank": part["human"].rank(ascending=False, method="average").to_numpy(),
        }
    )
    return table.sort_values(["human_rank", "rank", "system"], na_position="last").reset_index(drop=True)


def add_meta_eval_section(report: Report, result: MetaEvalResult) -> None:
    """Agreement figures, human ranking, and per-score system plots."""
    human = (
        "Bradley-Terry strength from pairwise votes"
        if result.human_source == "votes"
        else f"mean human '{result.reference_key}' per system"
    )
    report.section("Agreement with humans")
    line = result.reference_line()
    report.text(
        f"{line[:1].upper()}{line[1:]}. Human system scores: {human}. CIs: {result.ci_method}, "
        f"{result.resamples} resamples, seed {result.seed}; n is conversations (conversation level) or "
        f"systems (system level)."
    )
    add_left_out_notes(report, result.left_out, result.notes)  # evaluated: completed conversations only
    report.table("meta_eval", caveat_table(result), caption="Agreement of each score with the human reference")
    conv = result.table()
    conv = conv[conv["value"].notna()].assign(
        label=lambda t: t["score"] + " · " + t["statistic"] + " (" + t["level"] + ")"
    )
    add_interval_plot(
        report,
        "meta_eval_intervals",
        conv,
        label="label",
        xlabel="value (with 95% CI)",
        title="Agreement with humans",
        caption="Each figure with its bootstrap CI",
    )

    systems = result.systems_table()
    report.section("System level")
    panels = {}
    orders: dict[str, list[str]] = {}
    human_scores = systems.drop_duplicates("system").set_index("system")["human"].dropna()
    if not human_scores.empty:
        orders[f"humans ({result.human_source})"] = ranking(human_scores)
    for score, part in systems.groupby("score", sort=False):
        panels[str(score)] = {
            str(r.system): (r.mean, r.human) for r in part.itertuples() if pd.notna(r.mean) and pd.notna(r.human)
        }
        means = part.set_index("system")["mean"].dropna()
        if not means.empty:
            orders[str(score)] = ranking(means[means.index.isin(human_scores.index)])
    if panels:
        report.plot(
            "system_scatter",
            plots.labelled_scatter(
                panels,
                xlabel={k: f"mean {k}" for k in panels},
                ylabel="human score (BT strength)"
                if result.human_source == "votes"
                else f"mean {result.reference_key}",
                title="Systems: automatic score vs humans",
            ),
            caption="One point per system; a score that agrees with humans puts the points on a rising line",
        )
    if len(orders) >= 2:
        report.plot(
            "ranking_comparison",
            plots.rank_comparison(orders, title="Rankings: humans vs each score"),
            caption="Rank of each system (1 = best) under the human ranking and under each score's mean",
        )
    report.table(
        "meta_eval_systems",
        systems,
        caption="Mean score per system (n conversations) and the human score "
        "(human_n: battles or labelled conversations behind it)",
    )
    if result.human_ranking is not None:
        hr = result.human_ranking
        report.section("Human ranking from votes")
        report.text(
            f"{hr.n_battles} votes, {hr.components} connected group(s) of systems; {hr.method}; "
            f"alpha {hr.alpha:g}, {hr.resamples} resamples, seed {hr.seed}. Elo (K=32, start 1000) in vote order "
            "for comparison."
        )
        table = pd.DataFrame([s.model_dump() for s in hr.systems])
        report.table("human_ranking", table, caption="Bradley-Terry log-strength (0 = average) with CI, record and Elo")
        add_interval_plot(
            report,
            "human_ranking",
            table,
            label="system",
            value="score",
            xlabel="BT log-strength",
            title="Human ranking (Bradley-Terry)",
            caption="Strength with its bootstrap CI",
            reference=0.0,
        )


def build_meta_eval_report(result: MetaEvalResult) -> Report:
    """A standalone report for one meta-evaluation."""
    report = Report(
        title="Meta-evaluation against humans", subtitle=f"{result.path} · scores: {', '.join(result.scores)}"
    )
    add_meta_eval_section(report, result)
    return report


def evaluators_table(result: AspectMetaEvalResult) -> pd.DataFrame:
    """Who is in the aspect table, where their predictions come from and how many there were."""
    return pd.DataFrame(
        [e.model_dump() for e in result.evaluators],
        columns=["name", "source", "origin", "predictions", "failed", "note"],
    )


ASPECT_VIEWS = (
    ("official rule (pooled): Pearson r and Spearman rho", ("pearson", "spearman"), False),
    ("pooled Pearson r with 95% CI", ("pearson",), True),
    (
        "within-CRS Pearson r (n-weighted mean over CRSs) with 95% CI; † = the CI contains 0: ranks systems, "
        "not conversations",
        ("within_pearson",),
        True,
    ),
    ("system level: Kendall tau-b of CRS means with 95% CI", ("system_kendall",), True),
)


def systems_only_lines(result: AspectMetaEvalResult, group: str) -> list[str]:
    """One sentence per evaluator whose within-CRS CI contains 0 on some aspect."""
    return [
        f"{name} {SYSTEMS_NOT_CONVERSATIONS} on {', '.join(aspects)} ({group}): its within-CRS CI contains 0"
        for name, aspects in result.systems_only(group).items()
    ]


def build_aspect_report(result: AspectMetaEvalResult) -> Report:
    """A standalone report for one aspect meta-evaluation: the tables per group, intervals, evaluators."""
    report = Report(
        title="Meta-evaluation against human ratings per aspect",
        subtitle=f"{result.path} · aspects: {', '.join(result.aspects)}",
    )
    report.section("Setup")
    rated = ", ".join(f"{k} {v}" for k, v in result.gold.items())
    report.text(
        f"{result.n_conversations} conversations; rated pairs per aspect: {rated}. Figures follow the official "
        f"rule of CRSArena-Eval (pairs by conversation and assistant turn, pooled per dataset group, scipy "
        f"Pearson and Spearman). CIs: {result.ci_method}, {result.resamples} resamples, seed {result.seed}. "
        "'*' marks the best figure of a column (published figures included)."
    )
    add_left_out_notes(report, result.left_out, result.notes)
    report.table("evaluators", evaluators_table(result), caption="Evaluators and where their predictions come from")
    table = result.table()
    for group in result.groups:
        report.section(f"Group: {group}")
        for caption, statistics, ci in ASPECT_VIEWS:
            name = f"aspects_{group}_{'_'.join(statistics)}{'_ci' if ci else ''}"
            report.table(name, result.wide(group, statistics, ci=ci), caption=caption)
        for line in systems_only_lines(result, group):
            report.text(line, note=True)
        part = table[(table["group"] == group) & (table["statistic"] == "pearson") & table["ci_low"].notna()]
        add_interval_plot(
            report,
            f"aspect_intervals_{group}",
            part.assign(label=part["evaluator"] + " · " + part["aspect"]),
            label="label",
            xlabel="Pearson r with humans (95% CI)",
            title=f"Agreement per aspect ({group})",
            caption="Pooled Pearson r of each evaluator and aspect with its bootstrap CI",
            reference=0.0,
        )
    return report
