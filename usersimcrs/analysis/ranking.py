"""CRS rankings per simulator and metric, and how far simulators agree on them (tau-b, RBO)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from usersimcrs.analysis.agreement import kendall_tau_b


def mean_scores(table: pd.DataFrame, metric: str, *, by: Sequence[str] = ("simulator", "crs")) -> pd.DataFrame:
    """Mean of `metric` per group (rows: CRS, columns: simulator by default); missing values skipped."""
    data = table.assign(_value=pd.to_numeric(table[metric], errors="coerce"))
    means = data.groupby(list(by))["_value"].mean()
    if len(by) == 2:
        return means.unstack(by[0])
    return means.to_frame(metric)


def ranking(scores: pd.Series, *, higher_is_better: bool = True) -> list[str]:
    """Names ordered best first; ties keep alphabetical order so the result is deterministic."""
    clean = scores.dropna()
    order = sorted(clean.index, key=lambda name: (-clean[name] if higher_is_better else clean[name], str(name)))
    return [str(name) for name in order]


def rank_table(means: pd.DataFrame, *, higher_is_better: bool = True) -> pd.DataFrame:
    """Rank (1 = best, average rank for ties) of each CRS (row) under each simulator (column)."""
    return means.rank(axis=0, ascending=not higher_is_better, method="average")


def rank_biased_overlap(first: Sequence[str], second: Sequence[str], p: float = 0.9) -> float:
    """Extrapolated rank-biased overlap (Webber, Moffat and Zobel 2010, Eq. 32) of two rankings.

    1 for identical rankings, 0 for disjoint ones; `p` sets how top-heavy the comparison is. Lists of
    different lengths are compared to the depth of the shorter one.
    """
    if not 0 < p < 1:
        raise ValueError("p must be in (0, 1)")
    depth = min(len(first), len(second))
    if depth == 0:
        return float("nan")
    seen_a: set[str] = set()
    seen_b: set[str] = set()
    total = 0.0
    overlap = 0
    for d in range(1, depth + 1):
        a, b = first[d - 1], second[d - 1]
        if a == b:
            overlap += 1
        else:
            overlap += (a in seen_b) + (b in seen_a)
        seen_a.add(a)
        seen_b.add(b)
        total += (overlap / d) * p**d
    return (overlap / depth) * p**depth + (1 - p) / p * total


def simulator_agreement(means: pd.DataFrame, *, higher_is_better: bool = True, p: float = 0.9) -> pd.DataFrame:
    """Pairs of simulators (columns of `means`): Kendall tau-b of their CRS scores and RBO of their rankings."""
    rows = []
    simulators = list(means.columns)
    for i, a in enumerate(simulators):
        for b in simulators[i + 1 :]:
            both = means[[a, b]].dropna()
            rows.append(
                {
                    "simulator_a": a,
                    "simulator_b": b,
                    "n_crs": len(both),
                    "kendall_tau_b": kendall_tau_b(list(both[a]), list(both[b])) if len(both) > 1 else np.nan,
                    # a fully tied side has no ranking to compare (ties are otherwise broken by name)
                    "rbo": rank_biased_overlap(
                        ranking(both[a], higher_is_better=higher_is_better),
                        ranking(both[b], higher_is_better=higher_is_better),
                        p,
                    )
                    if both[a].nunique() > 1 and both[b].nunique() > 1
                    else np.nan,
                }
            )
    return pd.DataFrame(rows, columns=["simulator_a", "simulator_b", "n_crs", "kendall_tau_b", "rbo"])


def agreement_matrix(pairs: pd.DataFrame, column: str, simulators: Sequence[str]) -> pd.DataFrame:
    """A symmetric simulator x simulator matrix of one agreement column (1 on the diagonal)."""
    matrix = pd.DataFrame(np.eye(len(simulators)), index=list(simulators), columns=list(simulators))
    for _, row in pairs.iterrows():
        matrix.loc[row["simulator_a"], row["simulator_b"]] = row[column]
        matrix.loc[row["simulator_b"], row["simulator_a"]] = row[column]
    return matrix


MIN_CELL_N = 10


def _overlaps(a: pd.Series, b: pd.Series) -> bool:
    """Whether two [ci_low, ci_high] intervals share a point (a missing bound counts as no overlap)."""
    if any(pd.isna(v) for v in (a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"])):
        return False
    return bool(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])


def ranking_notes(stats: pd.DataFrame, *, higher_is_better: bool = True, min_n: int = MIN_CELL_N) -> dict[str, str]:
    """Why a CRS's place in one ranking is uncertain: "n<10" and/or "CI overlaps next"/"previous".

    `stats` has one row per CRS (index) with n, mean, ci_low and ci_high; CRSs are ordered as
    `ranking` orders them and each is compared with its neighbours. An empty note = a clear place.
    """
    notes: dict[str, list[str]] = {str(crs): [] for crs in stats.index}
    for crs, row in stats.iterrows():
        if int(row["n"]) < min_n:
            notes[str(crs)].append(f"n<{min_n}")
    order = ranking(stats["mean"], higher_is_better=higher_is_better)
    for above, below in zip(order, order[1:]):
        if _overlaps(stats.loc[above], stats.loc[below]):
            notes[above].append("CI overlaps next")
            notes[below].append("CI overlaps previous")
    return {crs: "; ".join(parts) for crs, parts in notes.items()}
