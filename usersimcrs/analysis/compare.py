"""Compare CRSs across a simulator x CRS x dataset matrix: rankings, simulator agreement, paired tests.

A matrix folder holds one run folder per cell and an index (`MatrixFolder` owns the layout).
Conversations are paired across CRSs by their index within the cell: cells
share the run seed, so conversation i of every cell plays the same simulated user.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd

from usersimcrs.analysis.judgments import judgments_table
from usersimcrs.analysis.power import n_for_power
from usersimcrs.analysis.ranking import MIN_CELL_N, agreement_matrix, rank_table, ranking_notes, simulator_agreement
from usersimcrs.analysis.run_metrics import evaluate, stale_metrics, write_metrics
from usersimcrs.analysis.significance import paired_test
from usersimcrs.analysis.summary import describe
from usersimcrs.core.matrix_folder import Cell, MatrixFolder
from usersimcrs.core.run_folder import load_run
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.errors import DataError
from usersimcrs.metrics.validity import is_set, subset_masks

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
POWER_COLUMNS = [
    "dataset",
    "simulator",
    "metric",
    "crs",
    "next_crs",
    "n_pairs",
    "mean_difference",
    "n_for_80_power",
    "power_at_observed_n",
    "power_notes",
]


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


def combined_table(
    cells: Iterable[Cell], config=None, resources: SharedResources | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All cells' per-conversation metrics (+ judge columns) with dataset/simulator/crs, and per-turn curves.

    Metrics files are computed for a cell that has none yet. `resources`: the command's `SharedResources`
    (the cells' item file and the metrics' models loaded once).
    """
    frames, curves = [], []
    for cell in cells:
        data = load_run(cell.run_dir, resources=resources)
        if config is not None or stale_metrics(data.folder):
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
    """Tables of a matrix comparison (long format, one row per dataset/simulator/metric/...).

    `subset` is the conversations compared: "all" (every conversation the CRS took part in, the
    headline) or "valid" (the sensitivity check); see docs/metrics.md.
    """

    means: pd.DataFrame
    ranks: pd.DataFrame
    agreement: pd.DataFrame
    significance: pd.DataFrame
    subset: str = "all"
    power: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=POWER_COLUMNS))

    def agreement_matrices(self, column: str = "kendall_tau_b") -> dict[tuple[str, str], pd.DataFrame]:
        """(dataset, metric) -> simulator x simulator matrix of one agreement statistic (withheld pairs empty)."""
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


MEANS_COLUMNS = [
    "dataset",
    "metric",
    "simulator",
    "crs",
    "mean",
    "n",
    "ci_low",
    "ci_high",
    "note",
    "conversations",
    "crs_failures",
    "excluded",
]
AGREEMENT_COLUMNS = [
    "dataset",
    "metric",
    "simulator_a",
    "simulator_b",
    "n_crs",
    "min_cell_n",
    "kendall_tau_b",
    "rbo",
    "withheld",
    "note",
]
ALPHA = 0.05


def cell_counts(table: pd.DataFrame, subset: str) -> pd.DataFrame:
    """Per (dataset, simulator, crs): conversations in the subset, the CRS's own failures among them, excluded ones."""
    masks = subset_masks(table)
    crs_failure = is_set(table["crs_failure"]) if "crs_failure" in table else pd.Series(False, index=table.index)
    counts = table[CELL_KEYS].assign(
        conversations=masks[subset].astype(int),
        crs_failures=(crs_failure & masks[subset]).astype(int),
        excluded=(~masks["all"]).astype(int),
    )
    return counts.groupby(CELL_KEYS, as_index=False)[["conversations", "crs_failures", "excluded"]].sum()


def compare(
    table: pd.DataFrame,
    metrics: list[str],
    *,
    subset: str = "all",
    tests: Iterable[str] = ("permutation", "bootstrap"),
    n_resamples: int = 10000,
    seed: int = 0,
    rbo_p: float = 0.9,
    min_n: int = MIN_CELL_N,
    power_simulations: int = 2000,
) -> Comparison:
    """Means, ranks, simulator agreement and paired CRS tests for each dataset, simulator and metric.

    `subset` "all" compares every conversation the CRS took part in (its own failures count against
    it); "valid" leaves out the flagged ones too (a sensitivity check). Only cells present in `table`
    are listed. A cell with fewer than `min_n` values, or whose CI overlaps that of its neighbour in
    the ranking, carries a `note` instead of being ranked silently; simulator agreement is withheld
    where it would rest on such cells (see `agreement_caveat`). With tests, `power` holds per simulator and
    metric, for each CRS and the next in its ranking, the conversations per cell needed to see their observed
    paired difference with 80% power (`analysis.power`).
    """
    if subset not in ("all", "valid"):
        raise ValueError(f"subset must be 'all' or 'valid', not {subset!r}")
    data = table[subset_masks(table)[subset]] if len(table) else table
    existing = (
        table[CELL_KEYS].drop_duplicates().sort_values(CELL_KEYS) if len(table) else pd.DataFrame(columns=CELL_KEYS)
    )
    counts = (
        cell_counts(table, subset).set_index(CELL_KEYS)
        if len(table)
        else pd.DataFrame(columns=["conversations", "crs_failures", "excluded"])
    )
    means_rows, rank_rows, agreement_rows, test_rows, power_rows = [], [], [], [], []
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
                    cell = counts.loc[(dataset, simulator, row["crs"])]
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
                            "conversations": int(cell["conversations"]),
                            "crs_failures": int(cell["crs_failures"]),
                            "excluded": int(cell["excluded"]),
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
                sizes = stats.pivot(index="crs", columns="simulator", values="n")
                for pair in pairs.to_dict("records"):
                    withheld, note = agreement_caveat(means, sizes, pair["simulator_a"], pair["simulator_b"], min_n)
                    if withheld:
                        pair["kendall_tau_b"], pair["rbo"] = np.nan, np.nan
                    both = sizes[[pair["simulator_a"], pair["simulator_b"]]].dropna()
                    pair.update(
                        dataset=dataset,
                        metric=metric,
                        min_cell_n=int(both.min().min()) if both.size else 0,
                        withheld=withheld,
                        note=note,
                    )
                    agreement_rows.append(pair)
            for simulator, sim_part in part.groupby("simulator"):
                keys = {"dataset": dataset, "simulator": simulator, "metric": metric}
                test_rows.extend(_pairwise_tests(sim_part, metric, tests, n_resamples, seed, keys))
                if tests:
                    order = stats[stats["simulator"] == simulator].dropna(subset=["mean"])
                    ranked = list(order.sort_values("mean", ascending=not higher, kind="stable")["crs"])
                    power_rows.extend(_adjacent_power(sim_part, metric, ranked, power_simulations, seed, keys))
    significance = pd.DataFrame(test_rows)
    if not significance.empty:
        significance["p_holm"] = np.nan
        for _, idx in significance.groupby(["dataset", "simulator", "metric", "test"]).groups.items():
            significance.loc[idx, "p_holm"] = holm(list(significance.loc[idx, "p_value"]))
        significance["significant"] = significance["p_holm"] < ALPHA
    return Comparison(
        means=pd.DataFrame(means_rows, columns=MEANS_COLUMNS),
        ranks=pd.DataFrame(rank_rows, columns=["dataset", "metric", "simulator", "crs", "rank", "uncertain", "note"]),
        agreement=pd.DataFrame(agreement_rows, columns=AGREEMENT_COLUMNS),
        significance=significance,
        subset=subset,
        power=pd.DataFrame(power_rows, columns=POWER_COLUMNS),
    )


def agreement_caveat(
    means: pd.DataFrame, sizes: pd.DataFrame, a: str, b: str, min_n: int = MIN_CELL_N
) -> tuple[bool, str]:
    """(withheld, note) for the agreement of simulators `a` and `b` on one metric.

    Withheld (the figure says nothing): fewer than 3 CRSs scored by both (two items always give
    tau = +-1), a cell with fewer than `min_n` values, or a simulator that ties every CRS. Kept with a
    caveat: some CRSs tie under one simulator (tau-b then rests on the untied pairs only).
    """
    both = means[[a, b]].dropna()
    n = sizes[[a, b]].reindex(both.index)
    reasons, caveats = [], []
    if len(both) < 3:
        reasons.append(f"{len(both)} CRSs scored by both (need 3)")
    if len(n) and int(n.min().min()) < min_n:
        reasons.append(f"cells with n<{min_n} (smallest n={int(n.min().min())})")
    for simulator in (a, b):
        distinct = both[simulator].nunique()
        if len(both) >= 2 and distinct == 1:
            reasons.append(f"{simulator} ties every CRS")
        elif distinct < len(both):
            caveats.append(f"ties under {simulator}")
    if reasons:
        return True, "withheld: " + "; ".join(reasons)
    return False, "; ".join(caveats)


def significant_pairs(significance: pd.DataFrame, *, test: str = "permutation") -> pd.DataFrame:
    """The CRS pairs whose paired difference survives Holm's correction (p_holm < 0.05), per simulator and metric."""
    if significance.empty or "p_holm" not in significance:
        return significance
    rows = significance[(significance["test"] == test) & (significance["p_holm"] < ALPHA)]
    return rows.reset_index(drop=True)


def _pair_key(part: pd.DataFrame) -> pd.Series:
    if "index" in part and part["index"].notna().all():
        return part["index"].astype(int).astype(str)
    return part["user_id"].astype(str)


def _paired_wide(part: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Conversation key x CRS: the metric of conversation i under each CRS (the same simulated user)."""
    values = part.assign(_key=_pair_key(part), _value=pd.to_numeric(part[metric], errors="coerce"))
    return values.pivot_table(index="_key", columns="crs", values="_value", aggfunc="mean")


def _adjacent_power(
    part: pd.DataFrame, metric: str, ranked: list[str], simulations: int, seed: int, keys: dict
) -> list[dict]:
    """For each CRS and the next in `ranked` (best first): paired difference and conversations for 80% power."""
    wide = _paired_wide(part, metric)
    rows = []
    for better, worse in zip(ranked, ranked[1:]):
        diffs = (wide[better] - wide[worse]).dropna().to_numpy(dtype=float)
        power = n_for_power(diffs, simulations=simulations, seed=seed)
        rows.append(
            {
                **keys,
                "crs": better,
                "next_crs": worse,
                "n_pairs": int(diffs.size),
                "mean_difference": float(diffs.mean()) if diffs.size else np.nan,
                "n_for_80_power": power.n_for_80_power,
                "power_at_observed_n": power.power_at_observed_n,
                "power_notes": power.power_notes or "",
            }
        )
    return rows


def _pairwise_tests(
    part: pd.DataFrame, metric: str, tests: Iterable[str], n_resamples: int, seed: int, keys: dict
) -> list[dict]:
    rows = []
    wide = _paired_wide(part, metric)
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
