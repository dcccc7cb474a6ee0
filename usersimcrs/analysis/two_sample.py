"""Two statistics that the bootstraps of meta-eval and fidelity compute thousands of times: ROC AUC and the
two-sample Kolmogorov-Smirnov statistic.

scikit-learn's `roc_auc_score` spends ~4 ms a call validating its input and scipy's `ks_2samp` ~1.2 ms
computing a p-value nobody reads; inside 1000-resample bootstraps that was most of `meta-eval` and
`fidelity`. These compute the same numbers the same way (the same curve and trapezoids, the same
empirical CDF differences: equal to the last bit, checked in tests/test_analysis_two_sample.py) in
~0.05 ms, on inputs the callers have already cleaned (finite floats).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def roc_auc(labels: ArrayLike, scores: ArrayLike) -> float:
    """Area under the ROC curve of `scores` for binary `labels` (1 = positive), as scikit-learn computes it:
    the curve's corner points (ties of a score form one step), trapezoids between them. Both classes must
    be present (the callers check)."""
    positive = np.asarray(labels) == 1
    values = np.asarray(scores, dtype=float)
    order = np.argsort(values, kind="mergesort")[::-1]
    values, positive = values[order], positive[order]
    ends = np.r_[np.where(np.diff(values))[0], values.size - 1]  # the last index of each distinct score
    tps = np.cumsum(positive, dtype=np.float64)[ends]
    fps = 1 + ends - tps
    if fps.size > 2:  # drop points collinear with their neighbours, as roc_curve(drop_intermediate=True)
        corners = np.where(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])[0]
        fps, tps = fps[corners], tps[corners]
    fpr = np.r_[0.0, fps] / fps[-1]
    tpr = np.r_[0.0, tps] / tps[-1]
    return float(np.trapezoid(tpr, fpr))


def ks_statistic(a: ArrayLike, b: ArrayLike) -> float:
    """The two-sample Kolmogorov-Smirnov statistic D (scipy's `ks_2samp(a, b).statistic`): the largest
    distance between the two empirical CDFs."""
    first, second = np.sort(np.asarray(a, dtype=float)), np.sort(np.asarray(b, dtype=float))
    both = np.concatenate([first, second])
    gap = np.searchsorted(first, both, side="right") / first.size - np.searchsorted(second, both, side="right") / (
        second.size
    )
    return float(max(-np.min(gap), np.max(gap)))


__all__ = ["ks_statistic", "roc_auc"]
