"""Judge-score structure: the inter-factor Kendall tau-b matrix and stability over repeated judge runs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from usersimcrs.analysis.agreement import kendall_tau_b


def inter_factor_matrix(scores: pd.DataFrame) -> pd.DataFrame:
    """Kendall tau-b between every pair of factors (columns), over conversations (rows)."""
    factors = list(scores.columns)
    matrix = pd.DataFrame(np.eye(len(factors)), index=factors, columns=factors)
    for i, a in enumerate(factors):
        for b in factors[i + 1 :]:
            tau = kendall_tau_b(list(scores[a]), list(scores[b]))
            matrix.loc[a, b] = matrix.loc[b, a] = tau
    return matrix


def mean_abs_off_diagonal(matrix: pd.DataFrame) -> float:
    """Mean |tau| over the distinct factor pairs (66 for 12 factors); CoRE compares this to humans."""
    values = matrix.to_numpy(dtype=float)
    upper = values[np.triu_indices_from(values, k=1)]
    upper = upper[~np.isnan(upper)]
    return float(np.mean(np.abs(upper))) if upper.size else float("nan")


def stability(records: pd.DataFrame, *, repeat: str = "repeat") -> pd.DataFrame:
    """Std of scores over repeated judge runs: per factor, and of the total (sum of factors).

    `records` has columns conversation_id, name (factor), value and `repeat` (which run). For each
    conversation the std over repeats is taken, then averaged over conversations (CoRE reports the
    total's std, 1.94 on its 0-48 scale over 10 runs).
    """
    data = records.dropna(subset=["value"]).copy()
    data["value"] = data["value"].astype(float)
    rows = []
    for name, part in data.groupby("name"):
        per_conversation = part.groupby("conversation_id")["value"].std(ddof=1).dropna()
        rows.append(
            {
                "factor": name,
                "std": float(per_conversation.mean()) if len(per_conversation) else np.nan,
                "repeats": int(part[repeat].nunique()),
            }
        )
    totals = data.groupby(["conversation_id", repeat])["value"].sum()
    complete = data.groupby(["conversation_id", repeat])["name"].nunique() == data["name"].nunique()
    totals = totals[complete.reindex(totals.index).fillna(False).astype(bool)]
    total_std = totals.groupby(level=0).std(ddof=1).dropna()
    rows.append(
        {
            "factor": "total",
            "std": float(total_std.mean()) if len(total_std) else np.nan,
            "repeats": int(data[repeat].nunique()),
        }
    )
    return pd.DataFrame(rows, columns=["factor", "std", "repeats"])
