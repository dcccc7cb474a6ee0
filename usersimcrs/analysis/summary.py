"""Summaries of per-conversation tables: mean, std and bootstrap CI per metric, on all and on valid rows."""

from __future__ import annotations

from typing import Iterable, Mapping

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
    subsets: Mapping[str, pd.Series] | None = None,
    exclude: Iterable[str] = ("conversation_id", "agent_id", "user_id", "index", "status"),
    categorical: Iterable[str] = ("end_reason",),
    seed: int = 0,
    n_resamples: int = DEFAULT_RESAMPLES,
) -> pd.DataFrame:
    """One row per (subset, metric).

    `subsets` names row masks (e.g. "all" and "valid" from `metrics.validity.subset_masks`);
    without it, "all" is every row and "valid" is added when a validity mask is given.
    """
    categorical = list(categorical)
    numeric = table[numeric_columns(table, [*exclude, *categorical])]
    for column in categorical:
        numeric = pd.concat([numeric, one_hot_shares(table, column)], axis=1)
    if subsets is None:
        subsets = {"all": pd.Series(True, index=table.index)}
        if valid is not None:
            subsets["valid"] = valid
    masks = [(name, mask.reindex(table.index).fillna(False).astype(bool)) for name, mask in subsets.items()]
    rows = []
    for subset, mask in masks:
        for metric in numeric.columns:
            rows.append(
                {
                    "subset": subset,
                    "metric": metric,
                    **describe(numeric.loc[mask, metric], seed=seed, n_resamples=n_resamples),
                }
            )
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


ITEM_COUNT_COLUMNS = ["items_shown", "items_resolved", "items_ambiguous", "items_unresolved"]


def item_coverage(table: pd.DataFrame, by: list[str] | None = None) -> pd.DataFrame:
    """Recommended list entries by resolution, summed per group, with `unresolved_share` (ambiguous + unresolved).

    The share is over list entries, not a mean of per-conversation shares; it is missing where
    nothing was shown. Tables without the item columns (older metrics files) give an empty frame.
    """
    by = list(by or [])
    if not set(ITEM_COUNT_COLUMNS) <= set(table.columns):
        return pd.DataFrame(columns=[*by, *ITEM_COUNT_COLUMNS, "unresolved_share"])
    counts = table[by + ITEM_COUNT_COLUMNS].copy()
    for column in ITEM_COUNT_COLUMNS:
        counts[column] = pd.to_numeric(counts[column], errors="coerce").fillna(0).astype(int)
    grouped = (
        counts.groupby(by, as_index=False)[ITEM_COUNT_COLUMNS].sum()
        if by
        else counts[ITEM_COUNT_COLUMNS].sum().to_frame().T
    )
    shown = grouped["items_shown"].astype(float)
    unmatched = (grouped["items_ambiguous"] + grouped["items_unresolved"]).astype(float)
    grouped["unresolved_share"] = (unmatched / shown).where(shown > 0)
    return grouped.reset_index(drop=True)
