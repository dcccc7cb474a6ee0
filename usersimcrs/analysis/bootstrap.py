"""Seeded percentile-bootstrap confidence intervals for a mean (or any statistic)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

DEFAULT_RESAMPLES = 2000


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    statistic: Callable[[np.ndarray], float] = np.mean,
    confidence: float = 0.95,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of `statistic` over resamples with replacement; (nan, nan) when empty.

    One value gives a zero-width interval at that value; the resamples come from `seed` only, so the
    interval is reproducible.
    """
    data = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=float)
    if data.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    index = rng.integers(0, data.size, size=(n_resamples, data.size))
    stats = np.apply_along_axis(statistic, 1, data[index]) if statistic is not np.mean else data[index].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return (float(low), float(high))
