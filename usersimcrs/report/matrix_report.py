"""The report of a simulator x CRS x dataset matrix: cells, CRS comparison, simulator agreement, judges."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from usersimcrs.analysis.compare import (
    Comparison,
    combined_table,
    compare,
    comparison_metrics,
    discover_cells,
)
from usersimcrs.analysis.ranking import agreement_matrix
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import load_run
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.report import plots
from usersimcrs.report.html import Report
from usersimcrs.report.sections import (
    TRANSCRIPT_TURNS,
    add_judgment_sections,
    add_per_turn_plots,
    add_transcripts,
    failure_reasons,
    transcript_table,
)
from usersimcrs.report.tables import write_table


def write_comparison(folder: str | Path, comparison: Comparison) -> list[Path]:
    """CSV + Markdown of the four comparison tables in `folder`."""
    paths = []
    for name in ("means", "ranks", "agreement", "significance"):
        paths += write_table(getattr(comparison, name), folder, name)
    return paths


def run_comparison(
    matrix_dir: str | Path,
    *,
    metrics: list[str] | None = None,
    config: MetricsConfig | None = None,
    valid_only: bool = True,
    n_resamples: int = 10000,
    seed: int = 0,
) -> tuple[Comparison, pd.DataFrame, pd.DataFrame]:
    """Compare the matrix's CRSs and write MATRIX_DIR/comparison/*; returns (comparison, table, by_turn)."""
    cells = discover_cells(matrix_dir)
    table, by_turn = combined_table(cells, config)
    comparison = compare(
        table, comparison_metrics(table, metrics), valid_only=valid_only, n_resamples=n_resamples, seed=seed
    )
    write_comparison(MatrixFolder(matrix_dir).comparison_dir, comparison)
    return comparison, table, by_turn


def cells_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: conversations, failed and valid shares."""
    grouped = table.groupby(["dataset", "simulator", "crs"])
    out = grouped.agg(
        conversations=("conversation_id", "count"), failed=("failed", "mean"), valid=("valid", "mean")
    ).reset_index()
    return out


def _mean_label(mean: float, n: int, note: str) -> str:
    """'0.600 (n=20)', '– (n=0)', with a trailing '*' when the cell carries a note (small n, overlapping CI)."""
    value = "–" if pd.isna(mean) else f"{mean:.3f}"
    return f"{value} (n={int(n)})" + (" *" if note else "")


def _rank_label(rank: float, note: str) -> str:
    """'1', '2.5', '–' for no value, with the note in brackets: '1 (n<10; CI overlaps next)'."""
    value = "–" if pd.isna(rank) else (str(int(rank)) if float(rank).is_integer() else f"{rank:g}")
    return f"{value} ({note})" if note else value


def wide_means(comparison: Comparison) -> pd.DataFrame:
    """Rows = existing (dataset, simulator, crs) cells, one column per metric: 'mean (n=..)' on valid conversations."""
    means = comparison.means
    if means.empty:
        return pd.DataFrame(columns=["dataset", "simulator", "crs"])
    labels = means.assign(
        label=[_mean_label(m, n, note) for m, n, note in zip(means["mean"], means["n"], means["note"])]
    )
    wide = labels.pivot(index=["dataset", "simulator", "crs"], columns="metric", values="label")
    order = list(dict.fromkeys(means["metric"]))
    wide = wide[[m for m in order if m in wide]].reset_index()
    wide.columns.name = None
    return wide


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


def build_matrix_report(
    matrix_dir: str | Path,
    *,
    config: MetricsConfig | None = None,
    metrics: list[str] | None = None,
    seed: int = 0,
) -> Path:
    """Write the matrix's report page (+ its plots and tables, and the comparison tables); returns the page.

    Holds the matrix folder's writer lock (re-entrant: a matrix run writes its report under its own lock).
    """
    folder = MatrixFolder(matrix_dir)
    with folder.lock("report"):
        return _write_matrix_report(folder, config=config, metrics=metrics, seed=seed)


def _write_matrix_report(
    folder: MatrixFolder, *, config: MetricsConfig | None, metrics: list[str] | None, seed: int
) -> Path:
    matrix_dir = folder.path
    comparison, table, by_turn = run_comparison(matrix_dir, metrics=metrics, config=config, seed=seed)
    report = Report(
        title=f"Matrix report: {matrix_dir.name}",
        subtitle=f"{table['simulator'].nunique()} simulators × {table['crs'].nunique()} CRSs × "
        f"{table['dataset'].nunique()} datasets · {len(table)} conversations",
    )
    records, groups, dialogues = [], {}, []
    for cell in discover_cells(matrix_dir):
        data = load_run(cell.run_dir)
        records.extend(data.judgments)
        dialogues.extend(data.dialogues)
        for d in data.dialogues:
            groups[d.conversation_id] = f"{cell.simulator} · {cell.crs}" + (
                f" · {cell.dataset}" if table["dataset"].nunique() > 1 else ""
            )
    report.section("Cells")
    report.table("cells", cells_table(table), caption="Conversations per cell, share failed and share valid.")
    failures = failure_reasons(dialogues)
    if not failures.empty:
        report.heading("What went wrong")
        report.table(
            "failure_reasons",
            failures,
            caption="Errors of failed conversations (all cells) grouped into "
            "reasons (numbers, IDs, URLs and quoted values replaced), with example conversation IDs.",
        )
    report.section("CRS comparison")
    report.text(
        "Means over valid conversations; ranks are per simulator (1 = best). Paired tests compare CRSs on the "
        "same simulated users (conversation i of every cell), two-sided, with Holm's correction per family."
    )
    uncertain = comparison.ranks[comparison.ranks["uncertain"]] if not comparison.ranks.empty else comparison.ranks
    if len(uncertain):
        report.text(
            f"{len(uncertain)} of {len(comparison.ranks)} ranks are uncertain: fewer than 10 valid conversations "
            "with a value (n<10) or a 95% CI that overlaps the neighbour's in the ranking; read them as ties.",
            note=True,
        )
    add_ranking(report, comparison)
    report.table(
        "means",
        wide_means(comparison),
        caption="Mean per metric and its n (valid conversations); * = n<10 or CI overlapping a neighbour.",
    )
    report.table(
        "ranks", wide_ranks(comparison), caption="Rank of each CRS under each simulator, with why it is uncertain."
    )
    if not comparison.significance.empty:
        sig = comparison.significance[comparison.significance["test"] == "permutation"]
        report.table("significance", sig.drop(columns=["test"]), caption="Paired permutation tests between CRSs.")
    if not comparison.agreement.empty:
        report.section("Simulator agreement")
        report.text(
            "Do simulators rank the CRSs alike? Kendall tau-b of the CRS means and rank-biased overlap "
            "(p = 0.9) of the rankings, per metric."
        )
        report.table("agreement", comparison.agreement, caption="Agreement between simulators per metric.")
        simulators = sorted(table["simulator"].unique())
        for dataset, part in comparison.agreement.groupby("dataset"):
            tau = part.groupby(["simulator_a", "simulator_b"])[["kendall_tau_b", "rbo"]].mean().reset_index()
            matrix = agreement_matrix(tau, "kendall_tau_b", simulators)
            report.plot(
                f"simulator_agreement_{dataset}",
                plots.heatmap(matrix, title=f"Simulator agreement ({dataset}): mean tau-b"),
                caption=f"Kendall tau-b between simulators' CRS rankings, averaged over the "
                f"{part.dropna(subset=['kendall_tau_b'])['metric'].nunique()} metrics where it is defined ({dataset}).",
            )
            report.table(f"simulator_agreement_{dataset}", matrix.reset_index().rename(columns={"index": "simulator"}))
    curves = by_turn[by_turn["subset"] == "valid"] if not by_turn.empty else by_turn
    if not curves.empty:
        report.section("Per turn")
        for (dataset, simulator), part in curves.groupby(["dataset", "simulator"]):
            add_per_turn_plots(report, part, group="crs", label=f"{simulator} · {dataset}")
    valid_ids = set(table.loc[table["valid"].astype(bool), "conversation_id"].astype(str))
    add_judgment_sections(report, records, valid_ids=valid_ids, groups=pd.Series(groups), group_label="cell", seed=seed)
    add_cell_transcripts(report, dialogues, table)
    return report.write(folder.report_dir, page=folder.report_page)


def headline_metric(comparison: Comparison) -> str | None:
    """The metric the ranking leads with: the first of the comparison's metrics that has a value (success first)."""
    if comparison.means.empty:
        return None
    measured = comparison.means.dropna(subset=["mean"])
    order = list(dict.fromkeys(comparison.means["metric"]))
    return next((m for m in order if (measured["metric"] == m).any()), None)


def ranking_table(comparison: Comparison, metric: str) -> pd.DataFrame:
    """One row per (dataset, simulator, CRS) for `metric`, best first within a simulator: rank, mean [95% CI], n, note."""
    means = comparison.means[comparison.means["metric"] == metric]
    ranks = comparison.ranks[comparison.ranks["metric"] == metric][["dataset", "simulator", "crs", "rank"]]
    rows = means.merge(ranks, on=["dataset", "simulator", "crs"], how="left").sort_values(
        ["dataset", "simulator", "rank"]
    )
    rows = rows.assign(
        **{
            "mean [95% CI]": [
                "–" if pd.isna(m) else f"{m:.3f} [{lo:.3f}, {hi:.3f}]"
                for m, lo, hi in zip(rows["mean"], rows["ci_low"], rows["ci_high"])
            ]
        }
    )
    rows = rows.assign(rank=["–" if pd.isna(r) else f"{r:g}" for r in rows["rank"]])
    return rows[["dataset", "simulator", "rank", "crs", "mean [95% CI]", "n", "note"]].fillna({"note": ""})


def add_ranking(report: Report, comparison: Comparison) -> None:
    """The CRS ranking on the headline metric with 95% CIs, as a table and a plot per dataset."""
    metric = headline_metric(comparison)
    if metric is None:
        return
    report.heading(f"Ranking on {metric}")
    report.table(
        f"ranking_{metric}",
        ranking_table(comparison, metric),
        caption=f"CRSs ranked by mean {metric} per simulator (valid conversations), with the 95% bootstrap "
        "CI and n; a note marks a rank that is not evidence (n<10 or overlapping CIs).",
    )
    means = comparison.means[(comparison.means["metric"] == metric)].dropna(subset=["mean"])
    for dataset, part in means.groupby("dataset"):
        rows = part.sort_values(["simulator", "mean"], ascending=[True, False]).assign(
            label=lambda t: t["crs"] + " · " + t["simulator"] + " (n=" + t["n"].astype(str) + ")"
        )
        report.plot(
            f"ranking_{metric}_{dataset}",
            plots.interval_bars(
                rows,
                label="label",
                value="mean",
                low="ci_low",
                high="ci_high",
                title=f"{metric} per CRS and simulator ({dataset})",
                xlabel=f"mean {metric}",
            ),
            caption=f"Mean {metric} with its 95% bootstrap CI per CRS and simulator ({dataset}).",
        )


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
        report.section("Transcripts")
    report.text(
        "One valid conversation of each cell (the first by index), at most "
        f"{TRANSCRIPT_TURNS} utterances each, long texts shortened."
    )
    for cell, dialogue in sorted(first_valid.items()):
        report.heading(f"{cell}: {dialogue.conversation_id}")
        report.text(f"status {dialogue.status}; end reason {dialogue.end_reason or '–'}")
        report.table(f"transcript_{dialogue.conversation_id}", transcript_table(dialogue))


__all__ = ["build_matrix_report", "run_comparison", "write_comparison"]
