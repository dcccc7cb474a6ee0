"""Agreement between a judge and reference (e.g. human) ratings, and among several raters.

Correlations (Spearman r, Kendall tau-b) work on the raw scores; the kappa family and percent
agreement compare categories, so scores are rounded to the nearest scale point first (averaged
scores such as 3.5 would otherwise be categories of their own).
"""

from __future__ import annotations

import math
from typing import Literal, Sequence, TypeGuard

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score


def _pairs(a: Sequence[float | None], b: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    """Keep the positions where both sides have a value."""
    if len(a) != len(b):
        raise ValueError(f"paired ratings differ in length ({len(a)} vs {len(b)})")
    keep = [(x, y) for x, y in zip(a, b) if _present(x) and _present(y)]
    if not keep:
        return np.array([]), np.array([])
    xs, ys = zip(*keep)
    return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)


def _present(value: float | None) -> TypeGuard[float]:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _defined(result: float) -> float:
    return float(result) if result is not None and np.isfinite(result) else float("nan")


def spearman(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Spearman's rank correlation r (nan when fewer than two pairs or no variance)."""
    x, y = _pairs(a, b)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return _defined(stats.spearmanr(x, y).statistic)


def kendall_tau_b(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Kendall's tau-b, which corrects for ties on either side (CoRE's choice)."""
    x, y = _pairs(a, b)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return _defined(stats.kendalltau(x, y, variant="b").statistic)


def _categories(x: np.ndarray) -> np.ndarray:
    return np.rint(x).astype(int)


def cohen_kappa(a: Sequence[float | None], b: Sequence[float | None], *, weights: str | None = None) -> float:
    """Cohen's kappa of two raters on rounded scores; weights="quadratic" gives QWK."""
    x, y = _pairs(a, b)
    if x.size == 0:
        return float("nan")
    cx, cy = _categories(x), _categories(y)
    if len(set(cx) | set(cy)) < 2:
        return 1.0 if np.array_equal(cx, cy) else float("nan")
    return _defined(cohen_kappa_score(cx, cy, weights=weights))


def quadratic_weighted_kappa(a: Sequence[float | None], b: Sequence[float | None]) -> float:
    """Cohen's kappa with quadratic weights (disagreement cost grows with the squared distance)."""
    return cohen_kappa(a, b, weights="quadratic")


def percent_agreement(a: Sequence[float | None], b: Sequence[float | None], *, tolerance: float = 0.0) -> float:
    """Share of pairs whose rounded scores differ by at most `tolerance` scale points."""
    x, y = _pairs(a, b)
    if x.size == 0:
        return float("nan")
    return float(np.mean(np.abs(_categories(x) - _categories(y)) <= tolerance))


def randolph_kappa(ratings: Sequence[Sequence[float | None]], n_categories: int) -> float:
    """Randolph's free-marginal multirater kappa: (P_o - 1/k) / (1 - 1/k).

    `ratings` is raters x items; P_o is Fleiss' mean observed agreement over items rated by at least
    two raters, and chance agreement is fixed at 1/k because the raters may use the k categories freely.
    """
    if n_categories < 2:
        raise ValueError("Randolph's kappa needs at least two categories")
    matrix = [list(r) for r in ratings]
    items = len(matrix[0]) if matrix else 0
    per_item = []
    for j in range(items):
        labels = [int(round(v)) for r in matrix if _present(v := r[j])]
        n = len(labels)
        if n < 2:
            continue
        counts = np.unique(labels, return_counts=True)[1]
        per_item.append(float((counts * (counts - 1)).sum()) / (n * (n - 1)))
    if not per_item:
        return float("nan")
    observed = float(np.mean(per_item))
    chance = 1.0 / n_categories
    return (observed - chance) / (1.0 - chance)


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]], level: Literal["nominal", "ordinal", "interval", "ratio"] = "ordinal"
) -> float:
    """Krippendorff's alpha (raters x units, missing allowed) via the `krippendorff` package."""
    import krippendorff

    data = np.asarray([[float(v) if _present(v) else np.nan for v in row] for row in ratings], dtype=float)
    if data.size == 0 or np.count_nonzero(~np.isnan(data)) < 2:
        return float("nan")
    values = np.unique(data[~np.isnan(data)])
    if values.size < 2:
        return float("nan")
    return _defined(krippendorff.alpha(reliability_data=data, level_of_measurement=level))


def agreement_summary(
    judge: Sequence[float | None], reference: Sequence[float | None], *, n_categories: int | None = None
) -> dict[str, float]:
    """Every judge-vs-reference statistic for one score (aspect, factor or overall)."""
    x, y = _pairs(judge, reference)
    if n_categories is None:
        both = np.concatenate([_categories(x), _categories(y)]) if x.size else np.array([0, 1])
        n_categories = max(2, int(both.max() - both.min() + 1))
    return {
        "n": int(x.size),
        "spearman_r": spearman(judge, reference),
        "kendall_tau_b": kendall_tau_b(judge, reference),
        "qwk": quadratic_weighted_kappa(judge, reference),
        "cohen_kappa": cohen_kappa(judge, reference),
        "randolph_kappa": randolph_kappa([list(x), list(y)], n_categories) if x.size else float("nan"),
        "krippendorff_alpha": krippendorff_alpha([list(x), list(y)], "ordinal"),
        "percent_agreement": percent_agreement(judge, reference),
        "agreement_within_1": percent_agreement(judge, reference, tolerance=1),
    }
