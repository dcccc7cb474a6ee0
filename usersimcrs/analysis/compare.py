"""Compare CRSs across a simulator x CRS x dataset matrix: rankings, simulator agreement, paired tests.

A matrix folder holds one run folder per cell and an index (`MatrixFolder` owns the layout).
Conversations are paired across CRSs by their index within the cell: cells
share the run seed, so conversation i of every cell plays the same simulated user.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from usersimcrs.analysis.judgments import judgments_table
from usersimcrs.analysis.ranking import MIN_CELL_N, agreement_matrix, rank_table, ranking_notes, simulator_agreement
from usersimcrs.analysis.significance import paired_test
from usersimcrs.analysis.summary import describe
from usersimcrs.core.matrix_folder import Cell, MatrixFolder
from usersimcrs.errors import DataError

HEADLINE_METRICS = [
    "success",
    "successful_round_ratio",
    "recall@10",
    "pc@10",
    "pcir_avg@10",
    "jaccard",
    "satisfaction",
    "persuasiveness",
]
LOWER_IS_BETTER = {"turns", "user_turns", "utterances", "exchanges"}
CELL_KEYS = ["dataset", "simulator", "crs"]


def discover_cells(matrix_dir: str | Path) -> list[Cell]:
    """The written cells of a matrix folder (from its index, else from its cell folders)."""
    return MatrixFolder(matrix_dir).written_cells()


def is_matrix_dir(path: str | Path) -> bool:
    return MatrixFolder(path).is_matrix()


def judge_columns(records: list[dict]) -> pd.DataFrame:
    """Per-conversation judge scores as columns '<judge>:<name>' (mean over repeats)."""
    if not records:
        return pd.DataFrame(columns=["conversation_id"])
    table = judgments_table(records)
    table["column"] = table["judge"].astype(str) + ":" + table["name"].astype(str)
    wide = table.pivot_table(index="conversation_id", columns="column", values="value", aggfunc="mean")
    return wide.reset_index()


def combined_table(cells: Iterable[Cell], config=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All cells' per-conversation metrics (+ judge columns) with dataset/simulator/crs, and per-turn curves.

    Metrics files are computed for a cell that has none yet.
    """
    from usersimcrs.analysis.run_metrics import evaluate, write_metrics
    from usersimcrs.core.run_folder import load_run

    frames, curves = [], []
    for cell in cells:
        data = load_run(cell.run_dir)
        if config is not None or not data.folder.has_metrics():
            result = evaluate(data, config)
            with data.folder.lock("compare"):
                write_metrics(data.folder, result)
        per_conversation, _, per_turn = data.folder.metrics_paths
        metrics = pd.read_csv(per_conversation, dtype={"conversation_id": str})
        judged = judge_columns(data.judgments)
        if not judged.empty:
            metrics = metrics.merge(judged, on="conversation_id", how="left")
        keys = {"dataset": cell.dataset, "simulator": cell.simulator, "crs": cell.crs, "cell": cell.name}
        frames.append(metrics.assign(**keys))
        curves.append(pd.read_csv(per_turn).assign(**keys))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    by_turn = pd.concat(curves, ignore_index=True) if curves else pd.DataFrame()
    return table, by_turn


def comparison_metrics(table: pd.DataFrame, selected: list[str] | None = None) -> list[str]:
    """The metrics to compare: the selection, else the headline metrics present plus every judge column."""
    if selected:
        missing = [m for m in selected if m not in table]
        if missing:
            raise DataError(f"unknown metric(s) {', '.join(missing)}; available: {', '.join(map(str, table.columns))}")
        return selected
    present = [m for m in HEADLINE_METRICS if m in table and pd.to_numeric(table[m], errors="coerce").notna().any()]
    return present + sorted(c for c in table.columns if ":" in str(c))


@dataclass
class Comparison:
    """Tables of a matrix comparison (long format, one row per dataset/simulator/metric/...)."""

    means: pd.DataFrame
    ranks: pd.DataFrame
    agreement: pd.DataFrame
    significance: pd.DataFrame

    def agreement_matrices(self, column: str = "kendall_tau_b") -> dict[tuple[str, str], pd.DataFrame]:
        """(dataset, metric) -> simulator x simulator matrix of one agreement statistic."""
        out = {}
        simulators = sorted(set(self.means["simulator"]))
        for (dataset, metric), part in self.agreement.groupby(["dataset", "metric"]):
            out[(dataset, metric)] = agreement_matrix(part, column, simulators)
        return out


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1)."""
    order = sorted(range(len(p_values)), key=lambda i: (np.isnan(p_values[i]), p_values[i]))
    m = sum(1 for p in p_values if not np.isnan(p))  # untestable pairs (no data) are not hypotheses
    adjusted = [float("nan")] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        if np.isnan(p_values[i]):
            continue
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def cell_stats(
    part: pd.DataFrame, metric: str, cells: pd.DataFrame, *, seed: int = 0, n_resamples: int = 1000
) -> pd.DataFrame:
    """n, mean and 95% bootstrap CI of `metric` for each existing (simulator, crs) cell of one dataset.

    `cells` lists the cells that exist; a cell without a value for the metric gets n = 0 and no mean,
    and a combination that was never run is not listed at all.
    """
    rows = []
    for simulator, crs in cells[["simulator", "crs"]].itertuples(index=False):
        values = (
            part.loc[(part["simulator"] == simulator) & (part["crs"] == crs), metric]
            if len(part)
            else pd.Series([], dtype=float)
        )
        stats = describe(values, seed=seed, n_resamples=n_resamples)
        rows.append({"simulator": simulator, "crs": crs, **stats})
    return pd.DataFrame(rows, columns=["simulator", "crs", "n", "mean", "std", "ci_low", "ci_high"])


def compare(
    table: pd.DataFrame,
    metrics: list[str],
    *,
    valid_only: bool = True,
    tests: Iterable[str] = ("permutation", "bootstrap"),
    n_resamples: int = 10000,
    seed: int = 0,
    rbo_p: float = 0.9,
    min_n: int = MIN_CELL_N,
) -> Comparison:
    """Means, ranks, simulator agreement and paired CRS tests for each dataset, simulator and metric.

    Only cells present in `table` are listed. A cell with fewer than `min_n` values, or whose CI
    overlaps that of its neighbour in the ranking, carries a `note` instead of being ranked silently.
    """
    data = table[table["valid"].astype(bool)] if valid_only and "valid" in table else table
    existing = (
        table[CELL_KEYS].drop_duplicates().sort_values(CELL_KEYS) if len(table) else pd.DataFrame(columns=CELL_KEYS)
    )
    means_rows, rank_rows, agreement_rows, test_rows = [], [], [], []
    for dataset, cells in existing.groupby("dataset"):
        part = data[data["dataset"] == dataset]
        for metric in metrics:
            higher = metric not in LOWER_IS_BETTER
            stats = cell_stats(part, metric, cells, seed=seed, n_resamples=min(n_resamples, 1000))
            means = stats.pivot(index="crs", columns="simulator", values="mean")  # rows: crs, columns: simulator
            ranks = rank_table(means, higher_is_better=higher)
            for simulator, sim_stats in stats.groupby("simulator", sort=False):
                notes = ranking_notes(sim_stats.set_index("crs"), higher_is_better=higher, min_n=min_n)
                for row in sim_stats.to_dict("records"):
                    note = notes[str(row["crs"])]
                    means_rows.append(
                        {
                            "dataset": dataset,
                            "metric": metric,
                            "simulator": simulator,
                            "crs": row["crs"],
                            "mean": row["mean"],
                            "n": int(row["n"]),
                            "ci_low": row["ci_low"],
                            "ci_high": row["ci_high"],
                            "note": note,
                        }
                    )
                    rank_rows.append(
                        {
                            "dataset": dataset,
                            "metric": metric,
                            "simulator": simulator,
                            "crs": row["crs"],
                            "rank": ranks.loc[row["crs"], simulator],
                            "uncertain": bool(note),
                            "note": note,
                        }
                    )
            if means.shape[1] >= 2:
                pairs = simulator_agreement(means, higher_is_better=higher, p=rbo_p)
                agreement_rows.extend(pairs.assign(dataset=dataset, metric=metric).to_dict("records"))
            for simulator, sim_part in part.groupby("simulator"):
                test_rows.extend(
                    _pairwise_tests(
                        sim_part,
                        metric,
                        tests,
                        n_resamples,
                        seed,
                        {"dataset": dataset, "simulator": simulator, "metric": metric},
                    )
                )
    significance = pd.DataFrame(test_rows)
    if not significance.empty:
        significance["p_holm"] = np.nan
        for _, idx in significance.groupby(["dataset", "simulator", "metric", "test"]).groups.items():
            significance.loc[idx, "p_holm"] = holm(list(significance.loc[idx, "p_value"]))
    return Comparison(
        means=pd.DataFrame(
            means_rows, columns=["dataset", "metric", "simulator", "crs", "mean", "n", "ci_low", "ci_high", "note"]
        ),
        ranks=pd.DataFrame(rank_rows, columns=["dataset", "metric", "simulator", "crs", "rank", "uncertain", "note"]),
        agreement=pd.DataFrame(
            agreement_rows, columns=["dataset", "metric", "simulator_a", "simulator_b", "n_crs", "kendall_tau_b", "rbo"]
        ),
        significance=significance,
    )


def _pair_key(part: pd.DataFrame) -> pd.Series:
    if "index" in part and part["index"].notna().all():
        return part["index"].astype(int).astype(str)
    return part["user_id"].astype(str)


def _pairwise_tests(
    part: pd.DataFrame, metric: str, tests: Iterable[str], n_resamples: int, seed: int, keys: dict
) -> list[dict]:
    rows = []
    values = part.assign(_key=_pair_key(part), _value=pd.to_numeric(part[metric], errors="coerce"))
    wide = values.pivot_table(index="_key", columns="crs", values="_value", aggfunc="mean")
    for a, b in itertools.combinations(sorted(wide.columns), 2):
        both = wide[[a, b]].dropna()
        for test in tests:
            result = paired_test(list(both[a]), list(both[b]), test=test, n_resamples=n_resamples, seed=seed)
            rows.append(
                {
                    **keys,
                    "crs_a": a,
                    "crs_b": b,
                    "test": test,
                    "n_pairs": result.n,
                    "mean_difference": result.mean_difference,
                    "ci_low": result.ci_low,
                    "ci_high": result.ci_high,
                    "p_value": result.p_value,
                }
            )
    return rows
