"""How many conversations a paired comparison needs: power by resampling the observed differences.

For two CRSs scored on the same simulated users (a paired design), draw n of the observed per-user
differences with replacement, test them (the paired sign-flip permutation test that `compare` uses,
two-sided, alpha 0.05), and repeat; the power at n is the share of draws the test rejects, and
`n_for_80_power` is the smallest n of a grid where it reaches 80% (METHODS §11). The test is exact
(every sign pattern) for n <= EXACT_MAX; above that its null distribution is taken in its normal form
(mean 0, variance sum(d^2)), which the sign-flip distribution of a sum of n >= 11 terms follows closely.
Everything is vectorised numpy over the simulated draws, and seeded.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, Field
from scipy.stats import norm

ALPHA = 0.05
TARGET_POWER = 0.8
EXACT_MAX = 10
SIMULATIONS = 2000
MAX_DISTINCT = 256  # distinct differences up to which a draw is a multinomial count per value
MAX_N = 20000
MIN_PAIRS = 5  # fewer observed differences are too few to resample a study from
CHUNK_VALUES = 4_000_000  # draws x n (x sign patterns) held in memory at once


def size_grid(largest: int = MAX_N) -> list[int]:
    """The sample sizes tried: every n from 2 to 20, then steps of about 5% up to `largest`."""
    grid = list(range(2, 21))
    while grid[-1] < largest:
        grid.append(min(largest, max(grid[-1] + 1, int(np.ceil(grid[-1] * 1.05)))))
    return grid


@lru_cache(maxsize=EXACT_MAX + 1)
def sign_patterns(n: int) -> np.ndarray:
    """All 2^n sign vectors of length n (rows), for the exact sign-flip test."""
    return np.array(list(itertools.product((1.0, -1.0), repeat=n)))


def sign_flip_rejects(samples: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """For each row of paired differences: does the two-sided sign-flip permutation test reject at `alpha`?

    Exact for rows of at most EXACT_MAX values; above, `normal_rejects` on the rows' sums. A row of zeros
    never rejects.
    """
    n = samples.shape[1]
    if n > EXACT_MAX:
        return normal_rejects(samples.sum(axis=1), (samples**2).sum(axis=1), alpha)
    # the p-value depends on the multiset of a row only: test each distinct one once (few for a 0/1 metric)
    distinct, inverse = np.unique(np.sort(samples, axis=1), axis=0, return_inverse=True)
    patterns = sign_patterns(n)
    rejects = np.zeros(len(distinct), dtype=bool)
    step = max(1, CHUNK_VALUES // len(patterns))
    for start in range(0, len(distinct), step):
        rows = distinct[start : start + step]
        observed = np.abs(rows.sum(axis=1))[:, None]
        flipped = np.abs(rows @ patterns.T)
        p_values = np.mean(flipped >= observed - 1e-12 * np.maximum(1.0, observed), axis=1)
        rejects[start : start + step] = (p_values <= alpha) & (observed[:, 0] > 0)
    return rejects[inverse.reshape(-1)]


def normal_rejects(totals: np.ndarray, squares: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """The sign-flip test in its normal form: |sum d| / sqrt(sum d^2) against the two-sided normal quantile."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(squares > 0, np.abs(totals) / np.sqrt(squares), 0.0)
    return z >= norm.ppf(1 - alpha / 2)


def power_at(
    diffs: np.ndarray, n: int, *, simulations: int = SIMULATIONS, seed: int = 0, alpha: float = ALPHA
) -> float:
    """The share of `simulations` draws of n differences (with replacement) on which the test rejects.

    Above EXACT_MAX only each draw's sum and sum of squares matter: with up to MAX_DISTINCT distinct differences (a 0/1
    metric gives three) a draw is a multinomial count per value, so large n costs no more than small n.
    """
    if n <= EXACT_MAX and 2.0 ** (1 - n) > alpha:  # the exact test's smallest two-sided p is 2 / 2^n: no rejection
        return 0.0
    rng = np.random.default_rng([seed, n])
    values, counts = np.unique(diffs, return_counts=True)
    if n > EXACT_MAX and values.size <= MAX_DISTINCT:
        drawn = rng.multinomial(n, counts / counts.sum(), size=simulations).astype(float)
        return float(normal_rejects(drawn @ values, drawn @ values**2, alpha).mean())
    if n <= EXACT_MAX:
        return float(sign_flip_rejects(diffs[rng.integers(0, diffs.size, size=(simulations, n))], alpha).mean())
    per_chunk = max(1, CHUNK_VALUES // n)
    rejected = 0
    for done in range(0, simulations, per_chunk):
        samples = diffs[rng.integers(0, diffs.size, size=(min(per_chunk, simulations - done), n))]
        rejected += int(normal_rejects(samples.sum(axis=1), (samples**2).sum(axis=1), alpha).sum())
    return rejected / simulations


class PowerEstimate(BaseModel):
    """Conversations per CRS for 80% power at the observed paired difference, or why there is no figure."""

    n_for_80_power: int | None = Field(description="smallest n on the grid with >= 80% rejections; None: see note")
    power_notes: str | None = Field(None, description="why n_for_80_power is missing")
    observed_n: int = Field(description="paired differences the estimate resamples")
    power_at_observed_n: float | None = Field(None, description="the estimated power of the study as run")


def n_for_power(
    differences: np.ndarray | list[float],
    *,
    target: float = TARGET_POWER,
    alpha: float = ALPHA,
    simulations: int = SIMULATIONS,
    seed: int = 0,
    largest: int = MAX_N,
) -> PowerEstimate:
    """Conversations per CRS needed to see the observed paired difference with `target` power (see module doc).

    Power rises with n, so the grid is searched in doubling steps, then by bisection; the draws at each n
    come from `seed` and n, so the answer is reproducible. No figure (with the reason) for fewer than
    MIN_PAIRS observed pairs, no difference at all, a mean difference of 0, or a need beyond `largest`.
    """
    d = np.asarray([v for v in differences if v is not None and np.isfinite(v)], dtype=float)
    observed = int(d.size)
    if observed < MIN_PAIRS:
        note = f"{observed} paired difference(s): too few to resample a study from (at least {MIN_PAIRS})"
        return PowerEstimate(n_for_80_power=None, power_notes=note, observed_n=observed)
    at_observed = power_at(d, observed, simulations=simulations, seed=seed, alpha=alpha)
    if not np.any(d):
        note = f"no difference at all: the two score alike on all {observed} paired conversations"
        return PowerEstimate(
            n_for_80_power=None, power_notes=note, observed_n=observed, power_at_observed_n=at_observed
        )
    if abs(d.mean()) < 1e-12:
        note = "the mean paired difference is 0: no number of conversations shows a difference in means"
        return PowerEstimate(
            n_for_80_power=None, power_notes=note, observed_n=observed, power_at_observed_n=at_observed
        )
    grid = size_grid(largest)

    def enough(index: int) -> bool:
        return power_at(d, grid[index], simulations=simulations, seed=seed, alpha=alpha) >= target

    low, probe = 0, 0  # doubling steps over the grid first (large n cost most), then bisection
    while not enough(probe):
        if probe == len(grid) - 1:
            note = f"more than {largest} conversations per CRS would be needed for a difference of {d.mean():+.3g}"
            return PowerEstimate(
                n_for_80_power=None, power_notes=note, observed_n=observed, power_at_observed_n=at_observed
            )
        low, probe = probe + 1, min(len(grid) - 1, 2 * probe + 1)
    high = probe  # grid[high] is enough, nothing below `low` is
    while low < high:
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return PowerEstimate(n_for_80_power=grid[high], observed_n=observed, power_at_observed_n=at_observed)


def two_rates_n(p1: float, p2: float, alpha: float = ALPHA, power: float = TARGET_POWER) -> float:
    """The standard closed form for two rates (unpaired, per group): (z_{1-a/2} sqrt(2 p(1-p)) + z_{1-b}
    sqrt(p1(1-p1) + p2(1-p2)))^2 / (p1 - p2)^2, p the mean rate; the check of the resampling estimate."""
    p = (p1 + p2) / 2
    z_a, z_b = norm.ppf(1 - alpha / 2), norm.ppf(power)
    return float((z_a * np.sqrt(2 * p * (1 - p)) + z_b * np.sqrt(p1 * (1 - p1) + p2 * (1 - p2))) ** 2 / (p1 - p2) ** 2)


__all__ = ["PowerEstimate", "n_for_power", "power_at", "sign_flip_rejects", "size_grid", "two_rates_n"]
