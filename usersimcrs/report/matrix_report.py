"""The report of a simulator x CRS x dataset matrix, read in 30 seconds.

The page opens with the answer: per simulator, the CRSs ranked by the headline metric over every
conversation they took part in (95% CI and n, their own failures counted), a verdict line (which
differences survive Holm's correction, whether the simulators agree) and what is known about the
headline evaluator's agreement with people. Everything else (the metric table with item coverage,
ranks and tests, simulator agreement, cells and exclusions, per-turn curves, judges, transcripts)
follows, the detail folded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from usersimcrs.analysis.compare import (
    LOWER_IS_BETTER,
    Comparison,
    combined_table,
    compare,
    comparison_metrics,
    discover_cells,
    significant_pairs,
)
from usersimcrs.analysis.ranking import agreement_matrix
from usersimcrs.analysis.summary import item_coverage
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.generation import canned_mark
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import load_run
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.wording import count_of, plural
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.metrics.item_resolution import is_item_metric
from usersimcrs.metrics.validity import canned_share, crs_failure_breakdown, is_set, subset_masks
from usersimcrs.report import plots
from usersimcrs.report.evaluators import EVALUATORS, HumanAgreement, evaluator_table
from usersimcrs.report.html import Report
from usersimcrs.report.learned import add_learned_section
from usersimcrs.report.sections import (
    TRANSCRIPT_TURNS,
    add_judgment_sections,
    add_per_turn_plots,
    add_transcripts,
    failure_reasons,
    transcript_table,
)
from usersimcrs.report.tables import p_value_text, write_table

MOSTLY_UNRESOLVED = 0.5  # an item metric over a cell where at least this share of items is unresolved is marked
SUBSET_TEXT = {
    "all": "all conversations the CRS took part in (its own failures count against it)",
    "valid": "valid conversations only (sensitivity check)",
}


def write_comparison(folder: str | Path, comparison: Comparison) -> list[Path]:
    """CSV + Markdown of the comparison tables in `folder` (means, ranks, agreement, significance, power)."""
    paths = []
    for name in ("means", "ranks", "agreement", "significance", "power"):
        paths += write_table(getattr(comparison, name), folder, name)
    return paths


def run_comparison(
    matrix_dir: str | Path,
    *,
    metrics: list[str] | None = None,
    config: MetricsConfig | None = None,
    subset: str = "all",
    n_resamples: int = 10000,
    seed: int = 0,
    resources: SharedResources | None = None,
) -> tuple[Comparison, pd.DataFrame, pd.DataFrame]:
    """Compare the matrix's CRSs and write MATRIX_DIR/comparison/*; returns (comparison, table, by_turn).

    `resources`: the command's shared resources (the cells' item file and the metrics' models loaded once)."""
    cells = discover_cells(matrix_dir)
    table, by_turn = combined_table(cells, config, resources)
    comparison = compare(table, comparison_metrics(table, metrics), subset=subset, n_resamples=n_resamples, seed=seed)
    write_comparison(MatrixFolder(matrix_dir).comparison_dir, comparison)
    return comparison, table, by_turn


# --------------------------------------------------------------------------- tables


def cells_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: conversations, the CRS's own failures, excluded ones (and why), the valid share."""
    masks = subset_masks(table)
    data = table.assign(
        _counted=masks["all"],
        _valid=masks["valid"],
        _crs=is_set(table["crs_failure"]) if "crs_failure" in table else False,
    )
    rows = []
    for (dataset, simulator, crs), part in data.groupby(["dataset", "simulator", "crs"]):
        reasons = part.loc[~part["_counted"], "exclusion"].value_counts() if "exclusion" in part else pd.Series()
        counted = int(part["_counted"].sum())
        rows.append(
            {
                "dataset": dataset,
                "simulator": simulator,
                "crs": crs,
                "conversations": len(part),
                "counted (all)": counted,
                "CRS failures": int(part["_crs"].sum()),
                **{f"of them {plural(kind)}": n for kind, n in crs_failure_breakdown(part).items()},
                "excluded": len(part) - counted,
                "excluded because": ", ".join(f"{r} ({int(n)})" for r, n in reasons.items()),
                "valid": int(part["_valid"].sum()),
            }
        )
    return pd.DataFrame(rows)


def _mean_label(mean: float, n: int, unresolved: float | None = None, canned: float | None = None) -> str:
    """'0.600 (n=20)', '– (n=0)'; an item metric over mostly unresolved items, and a value over mostly canned
    user turns, say so."""
    value = "–" if pd.isna(mean) else f"{mean:.3f}"
    mark = ""
    if unresolved is not None and not pd.isna(unresolved) and unresolved >= MOSTLY_UNRESOLVED:
        mark = f" ⚠ {unresolved:.0%} items unresolved"
    return f"{value} (n={int(n)}){mark}{canned_mark(canned)}"


def _rank_label(rank: float, note: str) -> str:
    """'1', '2.5', '–' for no value, with the note in brackets: '1 (n<10; CI overlaps next)'."""
    value = "–" if pd.isna(rank) else (str(int(rank)) if float(rank).is_integer() else f"{rank:g}")
    return f"{value} ({note})" if note else value


def _counted_by_cell(table: pd.DataFrame | None) -> dict[tuple[str, str, str], pd.DataFrame]:
    """The conversations of each (dataset, simulator, crs) cell counted in 'all'."""
    if table is None or table.empty:
        return {}
    counted = table[subset_masks(table)["all"]]
    return {key: part for key, part in counted.groupby(["dataset", "simulator", "crs"])}


def canned_cells(table: pd.DataFrame) -> list[tuple[str, float]]:
    """('simulator · crs', share) of the cells where most of the LLM user's turns were canned fallbacks."""
    out = []
    for (dataset, simulator, crs), part in _counted_by_cell(table).items():
        share = canned_share(part)
        if share is not None and canned_mark(share):
            out.append((f"{simulator} · {crs}" + (f" · {dataset}" if table["dataset"].nunique() > 1 else ""), share))
    return out


def _coverage_by_cell(table: pd.DataFrame | None) -> pd.DataFrame:
    if table is None or table.empty:
        return pd.DataFrame(columns=["dataset", "simulator", "crs", "unresolved_share"])
    counted = table[subset_masks(table)["all"]]
    return item_coverage(counted, ["dataset", "simulator", "crs"])


def wide_means(comparison: Comparison, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows = existing (dataset, simulator, crs) cells, one column per metric: 'mean (n=..)'.

    With the per-conversation `table`, an "items unresolved" column (share of recommended items the
    toolkit could not match to its collection) follows the first recall column, and item metrics of
    cells where most items are unresolved are marked.
    """
    means = comparison.means
    if means.empty:
        return pd.DataFrame(columns=["dataset", "simulator", "crs"])
    coverage = _coverage_by_cell(table)
    share = {(r["dataset"], r["simulator"], r["crs"]): r["unresolved_share"] for r in coverage.to_dict("records")}
    counted = _counted_by_cell(table)
    labels = means.assign(
        label=[
            _mean_label(
                r["mean"],
                r["n"],
                share.get((r["dataset"], r["simulator"], r["crs"])) if is_item_metric(r["metric"]) else None,
                canned_share(part, r["metric"])
                if (part := counted.get((r["dataset"], r["simulator"], r["crs"]))) is not None
                else None,
            )
            for r in means.to_dict("records")
        ]
    )
    wide = labels.pivot(index=["dataset", "simulator", "crs"], columns="metric", values="label")
    order = list(dict.fromkeys(means["metric"]))
    wide = wide[[m for m in order if m in wide]].reset_index()
    wide.columns.name = None
    wide = wide.rename(columns={m: _with_scale(m) for m in order})
    cells = means.drop_duplicates(["dataset", "simulator", "crs"]).set_index(["dataset", "simulator", "crs"])
    keys = list(zip(wide["dataset"], wide["simulator"], wide["crs"]))
    wide.insert(
        3,
        "CRS failures",
        [f"{int(cells.loc[k, 'crs_failures'])} of {int(cells.loc[k, 'conversations'])}" for k in keys],
    )
    if share:
        column = [
            "–" if pd.isna(share.get(key, np.nan)) else f"{share[key]:.0%}"
            for key in zip(wide["dataset"], wide["simulator"], wide["crs"])
        ]
        after = next((m for m in wide.columns if str(m).startswith("recall@")), None) or next(
            (m for m in wide.columns if is_item_metric(str(m))), None
        )
        position = list(wide.columns).index(after) + 1 if after is not None else len(wide.columns)
        wide.insert(position, "items unresolved", column)
    return wide


def _with_scale(metric: str) -> str:
    """The column title of a metric whose scale is not 0-1 or that carries a caveat: 'satisfaction (1-5; ...)'."""
    info = EVALUATORS.get(metric)
    if info is None or (info.scale.startswith(("share", "0-1")) and not info.caveat):
        return metric
    caveat = "; no measured signal vs humans" if metric == "satisfaction" else ""
    return f"{metric} ({info.scale.split(' (')[0]}{caveat})"


def wide_ranks(comparison: Comparison) -> pd.DataFrame:
    """Rows (dataset, metric, crs), one column per simulator: the CRS's rank (1 = best) and why it is uncertain.

    A simulator x CRS combination that was never run reads "not run" (it is not a missing value).
    """
    ranks = comparison.ranks
    if ranks.empty:
        return pd.DataFrame(columns=["dataset", "metric", "crs"])
    labels = ranks.assign(label=[_rank_label(r, note) for r, note in zip(ranks["rank"], ranks["note"])])
    wide = labels.pivot(index=["dataset", "metric", "crs"], columns="simulator", values="label").fillna("not run")
    wide.columns.name = None
    return wide.reset_index()


def headline_metric(comparison: Comparison) -> str | None:
    """The metric the ranking leads with: the first of the comparison's metrics that has a value (success first)."""
    if comparison.means.empty:
        return None
    measured = comparison.means.dropna(subset=["mean"])
    order = list(dict.fromkeys(comparison.means["metric"]))
    return next((m for m in order if (measured["metric"] == m).any()), None)


def _holm_between(significance: pd.DataFrame, keys: tuple[str, str, str], a: str, b: str) -> float | None:
    """Holm-adjusted permutation p-value between CRSs a and b (any order); None when not tested."""
    if significance.empty:
        return None
    dataset, simulator, metric = keys
    rows = significance[
        (significance["test"] == "permutation")
        & (significance["dataset"] == dataset)
        & (significance["simulator"] == simulator)
        & (significance["metric"] == metric)
        & (
            ((significance["crs_a"] == a) & (significance["crs_b"] == b))
            | ((significance["crs_a"] == b) & (significance["crs_b"] == a))
        )
    ]
    if rows.empty or pd.isna(rows["p_holm"].iloc[0]):
        return None
    return float(rows["p_holm"].iloc[0])


def ranking_table(comparison: Comparison, metric: str, sensitivity: Comparison | None = None) -> pd.DataFrame:
    """One row per (dataset, simulator, CRS) for `metric`, best first within a simulator.

    rank, CRS, mean [95% CI], n, the CRS's own failures among its conversations, the valid-only
    mean (sensitivity), the rank's note, and the Holm-adjusted p-value against the next CRS.
    """
    means = comparison.means[comparison.means["metric"] == metric]
    ranks = comparison.ranks[comparison.ranks["metric"] == metric][["dataset", "simulator", "crs", "rank"]]
    rows = means.merge(ranks, on=["dataset", "simulator", "crs"], how="left").sort_values(
        ["dataset", "simulator", "rank"], na_position="last"
    )
    valid = {}
    if sensitivity is not None:
        part = sensitivity.means[sensitivity.means["metric"] == metric]
        valid = {(r["dataset"], r["simulator"], r["crs"]): (r["mean"], r["n"]) for r in part.to_dict("records")}
    out = []
    records = rows.to_dict("records")
    for i, r in enumerate(records):
        following = records[i + 1] if i + 1 < len(records) else None
        same = following is not None and (following["dataset"], following["simulator"]) == (
            r["dataset"],
            r["simulator"],
        )
        p = (
            _holm_between(comparison.significance, (r["dataset"], r["simulator"], metric), r["crs"], following["crs"])
            if same and following is not None
            else None
        )
        v_mean, v_n = valid.get((r["dataset"], r["simulator"], r["crs"]), (np.nan, 0))
        failures = int(r.get("crs_failures", 0) or 0)
        counted = int(r.get("conversations", 0) or 0)
        out.append(
            {
                "dataset": r["dataset"],
                "simulator": r["simulator"],
                "rank": "–" if pd.isna(r["rank"]) else f"{r['rank']:g}",
                "crs": r["crs"],
                "mean [95% CI]": "–"
                if pd.isna(r["mean"])
                else f"{r['mean']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]",
                "n": int(r["n"]),
                "CRS failures": f"{failures} of {counted}" + (f" ({failures / counted:.0%})" if counted else ""),
                "valid only": "–" if pd.isna(v_mean) else f"{v_mean:.3f} (n={int(v_n)})",
                "note": r["note"] or "",
                "vs next (Holm p)": "–" if p is None else (p_value_text(p) + (" *" if p < 0.05 else "")),
            }
        )
    columns = [
        "dataset",
        "simulator",
        "rank",
        "crs",
        "mean [95% CI]",
        "n",
        "CRS failures",
        "valid only",
        "note",
        "vs next (Holm p)",
    ]
    return pd.DataFrame(out, columns=columns)


# --------------------------------------------------------------------------- the verdict


def panel_metric(comparison: Comparison, dataset: str, simulator: str, headline: str) -> str:
    """The metric a simulator's ranking panel shows: the headline, else (when this simulator cannot measure
    it, e.g. success for LLM users) the first compared metric it does measure."""
    means = comparison.means[(comparison.means["dataset"] == dataset) & (comparison.means["simulator"] == simulator)]
    measured = set(means.dropna(subset=["mean"])["metric"])
    if headline in measured or not measured:
        return headline
    return next(m for m in dict.fromkeys(means["metric"]) if m in measured)


def verdict_lines(comparison: Comparison, metric: str, dataset: str, *, agreement: bool = True) -> list[str]:
    """One sentence per simulator (who leads, which differences survive Holm), one on simulator agreement."""
    higher = metric not in LOWER_IS_BETTER
    means = comparison.means[(comparison.means["metric"] == metric) & (comparison.means["dataset"] == dataset)]
    significant = significant_pairs(comparison.significance)
    lines = []
    for simulator, part in means.groupby("simulator", sort=True):
        measured = part.dropna(subset=["mean"]).sort_values("mean", ascending=not higher)
        if measured.empty:
            lines.append(f"{simulator}: {metric} not measured (n=0).")
            continue
        top = measured.iloc[0]
        text = f"{simulator}: {top['crs']} leads on {metric} ({top['mean']:.3f}, n={int(top['n'])})"
        sig = (
            significant[
                (significant["dataset"] == dataset)
                & (significant["simulator"] == simulator)
                & (significant["metric"] == metric)
            ]
            if not significant.empty
            else significant
        )
        if len(measured) < 2:
            text += "; no other CRS to compare."
        elif sig.empty:
            text += "; no difference between CRSs is significant (paired permutation test, Holm, α = 0.05)"
            small = measured[measured["n"] < 10]
            text += f"; {len(small)} of {len(measured)} cells have n<10" if len(small) else ""
            text += sample_size_clause(comparison, dataset, simulator, metric, int(measured["n"].min())) + "."
        else:
            pairs = []
            for r in sig.to_dict("records"):
                a_better = (r["mean_difference"] > 0) == higher
                better, worse = (r["crs_a"], r["crs_b"]) if a_better else (r["crs_b"], r["crs_a"])
                pairs.append(
                    f"{better} > {worse} (Δ {abs(r['mean_difference']):.3f}, Holm p {p_value_text(r['p_holm'])})"
                )
            text += "; significant: " + ", ".join(pairs)
            rest = sample_size_clause(comparison, dataset, simulator, metric, int(measured["n"].min()), sig)
            text += (f"; the others are not{rest}" if rest else "") + "."
        lines.append(text)
    return lines + (agreement_lines(comparison, metric, dataset) if agreement else [])


def sample_size_clause(
    comparison: Comparison, dataset: str, simulator: str, metric: str, n: int, significant: pd.DataFrame | None = None
) -> str:
    """'; n = 12 per cell; about 150 would be needed to see a difference of this size (a vs b, ...)' for the first CRS
    and the next in the ranking whose difference is not `significant` (the leader and the next when none is), so a
    "no significant difference" that came from too few conversations says so ('' without a figure to give)."""
    power = comparison.power
    rows = power[(power["dataset"] == dataset) & (power["simulator"] == simulator) & (power["metric"] == metric)]
    shown = set()
    if significant is not None and not significant.empty:
        shown = {frozenset(pair) for pair in zip(significant["crs_a"], significant["crs_b"])}
    rows = rows[[frozenset(pair) not in shown for pair in zip(rows["crs"], rows["next_crs"])]]
    if rows.empty:
        return ""
    first = rows.iloc[0]
    pair = f"{first['crs']} vs {first['next_crs']}"
    if pd.isna(first["n_for_80_power"]):
        return f"; n = {n} per cell; {pair}: {first['power_notes']}"
    return (
        f"; n = {n} per cell; about {int(first['n_for_80_power'])} would be needed to see a difference of this size "
        f"({pair}, Δ {abs(first['mean_difference']):.3f}; 80% power, α = 0.05)"
    )


def agreement_lines(comparison: Comparison, metric: str, dataset: str) -> list[str]:
    """Whether the simulators agree on `metric`, pair by pair, or why that cannot be told."""
    lines = []
    pairs = comparison.agreement[
        (comparison.agreement["metric"] == metric) & (comparison.agreement["dataset"] == dataset)
    ]
    for r in pairs.to_dict("records"):
        pair = f"{r['simulator_a']} vs {r['simulator_b']}"
        if r["withheld"]:
            lines.append(f"Do the simulators agree on {metric}? Cannot tell ({pair}: {r['note']}).")
        else:
            caveat = f"; {r['note']}" if r["note"] else ""
            lines.append(
                f"Simulator agreement on {metric} ({pair}, {int(r['n_crs'])} CRSs, smallest cell n={int(r['min_cell_n'])}): "
                f"Kendall tau-b {r['kendall_tau_b']:.2f}, RBO {r['rbo']:.2f}{caveat}."
            )
    return lines


# --------------------------------------------------------------------------- sections


def _metric_range(metric: str, values: pd.Series) -> tuple[float, float] | None:
    """A fixed x range for bounded metrics (shares and 0-1 scores), the scale for satisfaction."""
    if metric == "satisfaction":
        return (1.0, 5.0)
    info = EVALUATORS.get(metric)
    if (info is not None and info.scale.startswith(("share", "0-1"))) or is_item_metric(metric):
        return (0.0, 1.0)
    return None


def add_ranking(
    report: Report,
    comparison: Comparison,
    *,
    sensitivity: Comparison | None = None,
    styles: dict[str, dict[str, object]] | None = None,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None = None,
) -> None:
    """The first section: per dataset, one picture with a panel per simulator, the verdict, the ranking table."""
    metric = headline_metric(comparison)
    report.section("Ranking")
    if metric is None:
        report.text("No metric was measured on any conversation: nothing to rank.", note=True)
        return
    styles = styles or plots.series_styles(comparison.means["crs"].unique())
    report.text(
        f"CRSs ranked by mean {metric} over {SUBSET_TEXT[comparison.subset]}, with 95% bootstrap CIs and n. "
        "The hollow diamond is the mean over valid conversations only, a sensitivity check, never the headline."
    )
    valid = (
        sensitivity.means.set_index(["dataset", "metric", "simulator", "crs"])["mean"]
        if sensitivity is not None and not sensitivity.means.empty
        else pd.Series(dtype=float)
    )
    for dataset in sorted(comparison.means["dataset"].unique()):
        panels, xlabels, xlims, fallbacks = {}, {}, {}, []
        for simulator in sorted(comparison.means.loc[comparison.means["dataset"] == dataset, "simulator"].unique()):
            shown = panel_metric(comparison, dataset, simulator, metric)
            rows = comparison.means[
                (comparison.means["dataset"] == dataset)
                & (comparison.means["simulator"] == simulator)
                & (comparison.means["metric"] == shown)
            ].sort_values("mean", ascending=shown in LOWER_IS_BETTER, na_position="last")
            name = f"{simulator} · {dataset}" + (f"\n{shown} ({metric} not measured)" if shown != metric else "")
            if shown != metric:
                fallbacks.append((simulator, shown))
            panels[name] = rows.assign(
                label=[
                    ranking_label(c, int(n), int(f))
                    for c, n, f in zip(rows["crs"], rows["n"], rows["crs_failures"].fillna(0))
                ],
                sensitivity=[valid.get((dataset, shown, simulator, c), np.nan) for c in rows["crs"]],
            )
            xlabels[name] = f"mean {shown}" + _scale_suffix(shown)
            xlims[name] = _metric_range(shown, rows["mean"])
        report.plot(
            f"ranking_{metric}_{dataset}",
            plots.ranking_panels(panels, xlabel=xlabels, styles=styles, xlim=xlims),
            caption=f"{metric}: mean with 95% bootstrap CI per CRS, one panel per simulator ({dataset}); "
            "n = conversations with a value; hollow diamond = valid-only mean"
            + "".join(f"; {sim} cannot measure {metric}, its panel shows {m}" for sim, m in fallbacks)
            + ".",
        )
        lines = verdict_lines(comparison, metric, dataset, agreement=False)
        for simulator, shown in fallbacks:  # what its panel shows instead
            lines += [
                line
                for line in verdict_lines(comparison, shown, dataset, agreement=False)
                if line.startswith(f"{simulator}:")
            ]
        lines += agreement_lines(comparison, metric, dataset)
        report.text(" ".join(lines), verdict=True)
    report.text(
        f"Evaluator {metric}: {_evaluator_sentence(metric, human_agreement)}",
        note=metric == "satisfaction",
    )
    report.table(
        f"ranking_{metric}",
        ranking_table(comparison, metric, sensitivity),
        caption=f"CRSs ranked by mean {metric} per simulator, with the 95% bootstrap CI and n; CRS failures = its "
        "own failed, looping or empty conversations (counted in the mean); valid only = the sensitivity check; "
        "a note marks a rank that is not evidence (n<10 or overlapping CIs); * = Holm-adjusted p < 0.05.",
    )


def ranking_label(crs: str, n: int, failures: int) -> str:
    """A CRS's label in the ranking plot: 'llm_crs (n=12, 1 CRS failure)', 'popularity (n=12)'."""
    return f"{crs} (n={n}" + (f", {count_of(failures, 'CRS failure')}" if failures else "") + ")"


def _scale_suffix(metric: str) -> str:
    info = EVALUATORS.get(metric)
    return f" ({info.scale})" if info is not None else ""


def _evaluator_sentence(metric: str, agreement: Mapping[str, Sequence[HumanAgreement]] | None) -> str:
    table = evaluator_table([metric], agreement)
    row = table.iloc[0]
    text = f"scale {row['scale']}"
    if row["measures"]:
        text += f"; {row['measures']}"
    text += f"; agreement with humans: {row['agreement with humans']}"
    if row["caveat"]:
        text += f" ({row['caveat']})"
    return text + "."


def add_metrics(
    report: Report,
    comparison: Comparison,
    table: pd.DataFrame,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None,
) -> None:
    """Every compared metric per cell with its n, item coverage next to recall, and each evaluator's scale and
    known agreement with humans."""
    report.section("Metrics")
    report.table(
        "means",
        wide_means(comparison, table),
        caption=f"Mean per metric and its n ({SUBSET_TEXT[comparison.subset]}); CRS failures = its own failed, "
        "looping or empty conversations among them. items unresolved = share of "
        "recommended items the toolkit could not match to its item collection (they can never hit a target); "
        f"⚠ marks an item metric of a cell where at least {MOSTLY_UNRESOLVED:.0%} of the items are unresolved.",
    )
    coverage = _coverage_by_cell(table)
    if not coverage.empty and (coverage["unresolved_share"].fillna(0) >= MOSTLY_UNRESOLVED).any():
        report.text(
            "Most recommended items of some cells are not in the item collection: recall, hits and coverage there "
            "measure the catalogue mismatch, not the CRS. Give the toolkit the CRS's own catalogue (items: path) "
            "— see docs/metrics.md, 'Item coverage'.",
            note=True,
        )
    metrics = list(dict.fromkeys(comparison.means["metric"]))
    report.table(
        "evaluators",
        evaluator_table(metrics, human_agreement),
        caption="Each evaluator's scale, what it measures, and its measured agreement with human judgments "
        "(from the meta-evaluation; 'not measured' where none exists).",
    )
    if not coverage.empty:
        report.table(
            "item_coverage",
            coverage,
            caption="Recommended list entries per cell by how they matched the item collection "
            "(resolved: an item ID; ambiguous: several items share the title; unresolved: no match).",
        )


def add_tests_and_agreement(report: Report, comparison: Comparison, table: pd.DataFrame) -> None:
    """Ranks, paired tests and simulator agreement (folded)."""
    report.section("Ranks and paired tests", folded=True)
    uncertain = comparison.ranks[comparison.ranks["uncertain"]] if not comparison.ranks.empty else comparison.ranks
    if len(uncertain):
        report.text(
            f"{len(uncertain)} of {len(comparison.ranks)} ranks are uncertain: fewer than 10 conversations "
            "with a value (n<10) or a 95% CI that overlaps the neighbour's in the ranking; read them as ties.",
            note=True,
        )
    report.table(
        "ranks", wide_ranks(comparison), caption="Rank of each CRS under each simulator, with why it is uncertain."
    )
    if not comparison.significance.empty:
        sig = comparison.significance[comparison.significance["test"] == "permutation"]
        report.text(
            "Paired tests compare CRSs on the same simulated users (conversation i of every cell), two-sided, with "
            f"Holm's correction per simulator and metric; {int(sig['significant'].sum())} of {len(sig)} "
            "differences are significant at α = 0.05 after correction."
        )
        report.table(
            "significance",
            sig.drop(columns=["test"]),
            caption="Paired permutation tests between CRSs; significant = Holm-adjusted p < 0.05.",
        )
    if comparison.agreement.empty:
        return
    report.section("Simulator agreement", folded=True)
    report.text(
        "Do simulators rank the CRSs alike? Kendall tau-b of the CRS means and rank-biased overlap (p = 0.9) of "
        "the rankings, per metric. A figure is withheld when it would say nothing: fewer than 3 CRSs, cells with "
        "n<10, or a simulator that ties every CRS."
    )
    report.table("agreement", comparison.agreement, caption="Agreement between simulators per metric, with n and why.")
    simulators = sorted(table["simulator"].unique())
    for dataset, part in comparison.agreement.groupby("dataset"):
        kept = part[~part["withheld"].astype(bool)].dropna(subset=["kendall_tau_b"])
        if kept.empty:
            report.text(
                f"{dataset}: no agreement figure is shown — every pair is withheld "
                f"({'; '.join(sorted(set(part['note'])))}).",
                note=True,
            )
            continue
        tau = kept.groupby(["simulator_a", "simulator_b"])[["kendall_tau_b", "rbo"]].mean().reset_index()
        matrix = agreement_matrix(tau, "kendall_tau_b", simulators)
        report.plot(
            f"simulator_agreement_{dataset}",
            plots.heatmap(matrix, title=f"Simulator agreement ({dataset}): mean tau-b"),
            caption=f"Kendall tau-b between simulators' CRS rankings, averaged over the {kept['metric'].nunique()} "
            f"metrics where it is not withheld ({dataset}); smallest cell n = {int(kept['min_cell_n'].min())}.",
        )
        report.table(f"simulator_agreement_{dataset}", matrix.reset_index().rename(columns={"index": "simulator"}))


def add_sample_sizes(report: Report, comparison: Comparison) -> None:
    """Per simulator and metric, each CRS against the next in its ranking: the conversations per cell a study needs
    to see their observed difference (folded)."""
    if comparison.power.empty:
        return
    report.section("Conversations needed", folded=True)
    report.text(
        "For each CRS and the next one in a simulator's ranking: the mean paired difference, the power this matrix had "
        "to see it, and the conversations per cell needed to see a difference of this size with 80% power at "
        "α = 0.05 (paired permutation test, unadjusted; the paired differences resampled, docs/ladder.md). A missing "
        "figure says why. `usersimcrs plan` turns these into the size and cost of a full study."
    )
    report.table(
        "power",
        comparison.power,
        caption="Adjacent CRSs per simulator and metric: n_for_80_power = conversations per cell for 80% power.",
    )


def build_matrix_report(
    matrix_dir: str | Path,
    *,
    config: MetricsConfig | None = None,
    metrics: list[str] | None = None,
    seed: int = 0,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None = None,
    resources: SharedResources | None = None,
    learned_model: str | Path | None = None,
) -> Path:
    """Write the matrix's report page (+ its plots and tables, and the comparison tables); returns the page.

    Holds the matrix folder's writer lock (re-entrant: a matrix run writes its report under its own lock).
    `human_agreement` maps an evaluator (a metric or '<judge>:<name>') to its measured agreement with
    human judgments (the meta-evaluation's figures); evaluators without one read "not measured".
    `resources`: the command's shared resources (a matrix run passes the ones its cells used).
    `learned_model`: a learned evaluator's model file (see `report.learned`).
    """
    folder = MatrixFolder(matrix_dir)
    resources = resources if resources is not None else SharedResources()
    with folder.lock("report"):
        return _write_matrix_report(
            folder,
            config=config,
            metrics=metrics,
            seed=seed,
            human_agreement=human_agreement,
            resources=resources,
            learned_model=learned_model,
        )


def _write_matrix_report(
    folder: MatrixFolder,
    *,
    config: MetricsConfig | None,
    metrics: list[str] | None,
    seed: int,
    human_agreement: Mapping[str, Sequence[HumanAgreement]] | None,
    resources: SharedResources,
    learned_model: str | Path | None = None,
) -> Path:
    matrix_dir = folder.path
    comparison, table, by_turn = run_comparison(
        matrix_dir, metrics=metrics, config=config, seed=seed, resources=resources
    )
    headline = headline_metric(comparison)
    sensitivity = (
        compare(table, list(dict.fromkeys(comparison.means["metric"])), subset="valid", tests=(), seed=seed)
        if headline
        else None
    )
    masks = subset_masks(table)
    excluded = int((~masks["all"]).sum())
    report = Report(
        title=f"Matrix report: {matrix_dir.name}",
        subtitle=f"{count_of(table['simulator'].nunique(), 'simulator')} × {count_of(table['crs'].nunique(), 'CRS')} × "
        f"{count_of(table['dataset'].nunique(), 'dataset')} · {count_of(len(table), 'conversation')}, {excluded} "
        "excluded (broken by the simulator or the toolkit)",
    )
    canned = canned_cells(table)
    if canned:  # before anything else: those cells' figures measure answers to canned lines
        report.text(
            "Warning: most of the LLM user's turns were canned fallbacks, not the model's words, in "
            + ", ".join(f"{cell} ({share:.0%})" for cell, share in canned)
            + ": their figures measure the CRS's answers to canned lines (marked 'canned'); use a more capable "
            "model, or simulator.on_unusable: fail to fail such conversations instead.",
            note=True,
        )
    styles = plots.series_styles(table["crs"].unique())
    add_ranking(report, comparison, sensitivity=sensitivity, styles=styles, human_agreement=human_agreement)
    add_metrics(report, comparison, table, human_agreement)
    add_tests_and_agreement(report, comparison, table)
    add_sample_sizes(report, comparison)
    records, groups, dialogues = [], {}, []
    for cell in discover_cells(matrix_dir):
        data = load_run(cell.run_dir, resources=resources)
        records.extend(data.judgments)
        dialogues.extend(data.dialogues)
        for d in data.dialogues:
            groups[d.conversation_id] = f"{cell.simulator} · {cell.crs}" + (
                f" · {cell.dataset}" if table["dataset"].nunique() > 1 else ""
            )
    if learned_model is not None:
        by = [c for c in ("simulator", "crs", "dataset") if c == "crs" or table[c].nunique() > 1]
        add_learned_section(report, learned_model, dialogues, table[masks["all"]], by, seed=seed)
    report.section("Cells and exclusions", folded=True)
    report.table(
        "cells",
        cells_table(table),
        caption="Conversations per cell: counted in 'all' (the CRS's own failures included), the CRS's failures "
        "(failed inside the CRS, looping, empty replies), excluded ones (the simulator or the toolkit broke "
        "them) with the flags that excluded them, and valid ones (the sensitivity subset).",
    )
    failures = failure_reasons(dialogues)
    if not failures.empty:
        report.heading("What went wrong")
        report.table(
            "failure_reasons",
            failures,
            caption="Errors of failed conversations (all cells) grouped into "
            "reasons (numbers, IDs, URLs and quoted values replaced), with example conversation IDs.",
        )
    curves = _headline_curves(by_turn)
    if not curves.empty:
        report.section("Per turn", folded=True)
        horizon = int(curves["turn"].max())
        for (dataset, simulator), part in curves.groupby(["dataset", "simulator"]):
            add_per_turn_plots(
                report, part, group="crs", label=f"{simulator} · {dataset}", styles=styles, horizon=horizon
            )
    counted_ids = set(table.loc[masks["all"], "conversation_id"].astype(str))
    add_judgment_sections(
        report,
        records,
        valid_ids=counted_ids,
        groups=pd.Series(groups),
        group_label="cell",
        seed=seed,
        scope="counted",
        folded=True,
    )
    add_cell_transcripts(report, dialogues, table)
    return report.write(folder.report_dir, page=folder.report_page)


def _headline_curves(by_turn: pd.DataFrame) -> pd.DataFrame:
    """The per-turn curves of the headline subset ("all"; older files without it: what they hold)."""
    if by_turn.empty:
        return by_turn
    for subset in ("all", "valid"):
        part = by_turn[by_turn["subset"] == subset]
        if not part.empty:
            return part
    return by_turn


def add_cell_transcripts(report: Report, dialogues: list[Dialogue], table: pd.DataFrame, *, invalid: int = 3) -> None:
    """The first valid conversation of every cell and the first `invalid` failed or flagged ones, readable."""
    cells = table.drop_duplicates("conversation_id").set_index("conversation_id")["cell"].to_dict()
    first_valid: dict[str, Dialogue] = {}
    for dialogue in sorted(dialogues, key=lambda d: (d.index if d.index is not None else 1 << 30, d.conversation_id)):
        cell = cells.get(dialogue.conversation_id)
        if cell is not None and cell not in first_valid:
            row = table[table["conversation_id"] == dialogue.conversation_id]
            if not row.empty and bool(row["valid"].iloc[0]):
                first_valid[cell] = dialogue
    chosen = {d.conversation_id for d in first_valid.values()}
    flags = table[~table["conversation_id"].isin(chosen)]
    add_transcripts(report, [d for d in dialogues if d.conversation_id not in chosen], flags, valid=0, other=invalid)
    if not first_valid:
        return
    if not any(title == "Transcripts" for _, title in report.sections):
        report.section("Transcripts", folded=True)
    report.text(
        "One valid conversation of each cell (the first by index), at most "
        f"{TRANSCRIPT_TURNS} utterances each, long texts shortened."
    )
    for cell, dialogue in sorted(first_valid.items()):
        report.heading(f"{cell}: {dialogue.conversation_id}")
        report.text(f"status {dialogue.status}; end reason {dialogue.end_reason or '–'}")
        report.table(f"transcript_{dialogue.conversation_id}", transcript_table(dialogue))


__all__ = ["build_matrix_report", "run_comparison", "write_comparison"]
