"""Summaries of per-conversation tables: mean, std and bootstrap CI per metric, on all and on valid rows."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from usersimcrs.analysis.bootstrap import DEFAULT_RESAMPLES, bootstrap_ci

SUMMARY_COLUMNS = ["subset", "metric", "n", "mean", "std", "ci_low", "ci_high"]


def numeric_columns(table: pd.DataFrame, exclude: Iterable[str] = ()) -> list[str]:
    """Columns holding numbers (booleans count), in table order.

    A column with no value at all is kept: it is a metric nobody could measure, and its summary row
    (n = 0, mean missing) says so instead of the metric silently disappearing.
    """
    skip = set(exclude)
    out = []
    for column in table.columns:
        if column in skip:
            continue
        series = pd.to_numeric(table[column], errors="coerce")
        if series.notna().sum() == table[column].notna().sum():
            out.append(column)
    return out


def one_hot_shares(table: pd.DataFrame, column: str) -> pd.DataFrame:
    """0/1 columns `column[value]` so the share of each category summarises like any metric."""
    if column not in table:
        return pd.DataFrame(index=table.index)
    values = table[column].fillna("unknown").astype(str)
    return pd.DataFrame(
        {f"{column}[{v}]": (values == v).astype(float) for v in sorted(values.unique())}, index=table.index
    )


def describe(values: pd.Series, *, seed: int = 0, n_resamples: int = DEFAULT_RESAMPLES) -> dict[str, float]:
    """n, mean, sample std and 95% bootstrap CI of the defined values."""
    data = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    if data.size == 0:
        return {"n": 0, "mean": np.nan, "std": np.nan, "ci_low": np.nan, "ci_high": np.nan}
    low, high = bootstrap_ci(data, seed=seed, n_resamples=n_resamples)
    return {
        "n": int(data.size),
        "mean": float(data.mean()),
        "std": float(data.std(ddof=1)) if data.size > 1 else 0.0,
        "ci_low": low,
        "ci_high": high,
    }


def summarize(
    table: pd.DataFrame,
    *,
    valid: pd.Series | None = None,
    exclude: Iterable[str] = ("conversation_id", "agent_id", "user_id", "index", "status"),
    categorical: Iterable[str] = ("end_reason",),
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> pd.DataFrame:
    """One row per (subset, metric): subset "all", and "valid" when a validity mask is given."""
    categorical = list(categorical)
    numeric = table[numeric_columns(table, [*exclude, *categorical])]
    for column in categorical:
        numeric = pd.concat([numeric, one_hot_shares(table, column)], axis=1)
    subsets = [("all", pd.Series(True, index=table.index))]
    if valid is not None:
        subsets.append(("valid", valid.reindex(table.index).fillna(False).astype(bool)))
    rows = []
    for subset, mask in subsets:
        for metric in numeric.columns:
            rows.append(
                {
                    "subset": subset,
                    "metric": metric,
                    **describe(numeric.loc[mask, metric], seed=seed, n_resamples=n_resamples),
                }
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
