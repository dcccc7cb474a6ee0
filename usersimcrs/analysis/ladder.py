"""The statistics of a sensitivity ladder: does a score order CRSs whose quality order is known by construction?

Per score: each rung's mean with a 95% bootstrap CI and n; Kendall tau-b between the rung means and the
known order (best first), with a CI from resampling conversations jointly across the rungs (the design
is paired: conversation i of every rung plays the same user with the same seed); per adjacent pair of
rungs the mean paired difference with its CI and permutation p-value, and the conversations per CRS
needed to see that difference with 80% power (`analysis.power`); and a verdict in words. See
docs/ladder.md.
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from usersimcrs.analysis.power import n_for_power
from usersimcrs.analysis.significance import paired_test
from usersimcrs.analysis.summary import describe

Verdict = Literal["orders the ladder", "does not order the ladder", "cannot tell"]
ORDERS: Verdict = "orders the ladder"
DOES_NOT: Verdict = "does not order the ladder"
CANNOT_TELL: Verdict = "cannot tell"
ORDER_TAU = 0.8
"""tau that counts as ordering the ladder: with 5 rungs, at most one adjacent pair swapped."""


class RungMean(BaseModel):
    """One rung's mean of a score over the conversations with a value (n), with its 95% bootstrap CI."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class KendallTau(BaseModel):
    """Kendall tau-b of the rung means against the known order (1: the score ranks the rungs as built)."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    resamples: int


class AdjacentPair(BaseModel):
    """A rung and the next worse one: mean paired difference (better - worse), its CI, and the power figure."""

    better: str
    worse: str
    n_pairs: int
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None = Field(description="two-sided paired permutation test, unadjusted")
    n_for_80_power: int | None = Field(
        description="conversations per CRS to see this difference (alpha 0.05, power 0.8)"
    )
    power_notes: str | None = Field(None, description="why n_for_80_power is missing")
    power_at_observed_n: float | None = None


class ScoreLadder(BaseModel):
    """Everything the ladder says about one metric or judge score."""

    higher_is_better: bool
    means: dict[str, RungMean]
    kendall_tau: KendallTau
    pairs: list[AdjacentPair]
    verdict: Verdict
    verdict_text: str


class LadderResult(BaseModel):
    """What `ladder.json` holds: the rungs best first and, per metric or judge score, the ladder's figures."""

    config: str
    simulator: str
    dataset: str
    rungs: list[str]
    conversations_per_rung: int
    run_seed: int
    seed: int
    scores: dict[str, ScoreLadder]
    left_out: dict[str, str] = Field(default_factory=dict, description="default scores not read, and why")
    wall_s: float


def _finite(value: float) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def rung_values(table: pd.DataFrame, rungs: Sequence[str], score: str, *, key: str = "index") -> pd.DataFrame:
    """Conversations x rungs: the score of conversation `key` under each rung (NaN where it has none)."""
    values = table.assign(_value=pd.to_numeric(table[score], errors="coerce"))
    wide = values.pivot_table(index=key, columns="crs", values="_value", aggfunc="mean", dropna=False)
    return wide.reindex(columns=list(rungs))


def tau_b_against_order(means: np.ndarray, higher_is_better: bool = True) -> np.ndarray:
    """Kendall tau-b between each row of rung means (rungs best first) and the known order.

    The known order has no ties, so tau-b = (concordant - discordant) / sqrt(P (P - ties among the means)),
    P the number of rung pairs. A row whose means are all equal orders nothing: 0 (tau-b itself is undefined).
    """
    rows = np.atleast_2d(np.asarray(means, dtype=float))
    oriented = np.round(rows if higher_is_better else -rows, 12)
    first, second = np.triu_indices(rows.shape[1], 1)  # first is the better rung of each pair
    signs = np.sign(oriented[:, first] - oriented[:, second])
    pairs = len(first)
    ties = (signs == 0).sum(axis=1)
    denominator = np.sqrt(pairs * (pairs - ties))
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(denominator > 0, signs.sum(axis=1) / denominator, 0.0)
    return np.where(np.isnan(signs).any(axis=1), np.nan, tau)


def tau_with_ci(values: pd.DataFrame, higher_is_better: bool, *, n_resamples: int = 2000, seed: int = 0) -> KendallTau:
    """tau-b of the rung means and its 95% percentile CI from resampling conversations (rows) jointly."""
    data = values.to_numpy(dtype=float)
    point = tau_b_against_order(np.nanmean(data, axis=0)[None, :], higher_is_better)[0]
    rng = np.random.default_rng(seed)
    drawn = data[rng.integers(0, len(data), size=(n_resamples, len(data)))]  # resamples x rows x rungs
    with np.errstate(invalid="ignore"):
        means = np.nanmean(drawn, axis=1) if np.isnan(drawn).any() else drawn.mean(axis=1)
    taus = tau_b_against_order(means, higher_is_better)
    low, high = np.nanquantile(taus, [0.025, 0.975]) if np.isfinite(taus).any() else (np.nan, np.nan)
    return KendallTau(value=_finite(point), ci_low=_finite(low), ci_high=_finite(high), resamples=n_resamples)


def adjacent_pairs(
    values: pd.DataFrame, *, n_resamples: int = 2000, simulations: int = 2000, seed: int = 0
) -> list[AdjacentPair]:
    """Each rung against the next worse one, on the conversations both have a value for."""
    out = []
    rungs = list(values.columns)
    for better, worse in zip(rungs, rungs[1:]):
        test = paired_test(
            list(values[better]), list(values[worse]), test="permutation", n_resamples=n_resamples, seed=seed
        )
        diffs = (values[better] - values[worse]).dropna().to_numpy(dtype=float)
        power = n_for_power(diffs, simulations=simulations, seed=seed)
        out.append(
            AdjacentPair(
                better=better,
                worse=worse,
                n_pairs=test.n,
                difference=_finite(test.mean_difference),
                ci_low=_finite(test.ci_low),
                ci_high=_finite(test.ci_high),
                p_value=_finite(test.p_value),
                n_for_80_power=power.n_for_80_power,
                power_notes=power.power_notes,
                power_at_observed_n=power.power_at_observed_n,
            )
        )
    return out


def verdict(score: str, tau: KendallTau, means: dict[str, RungMean]) -> tuple[Verdict, str]:
    """'orders the ladder' (tau >= 0.8 and its CI above 0), 'does not order the ladder' (the same mean on every
    rung, or tau < 0.8 with the whole CI below 0.8), else 'cannot tell'; with the figures in words."""
    measured = [m.mean for m in means.values() if m.mean is not None]
    n = sorted({m.n for m in means.values()})
    sizes = f"n = {n[0]} per rung" if len(n) == 1 else f"n = {n[0]}-{n[-1]} per rung"
    if tau.value is None:
        return CANNOT_TELL, f"{score}: cannot tell ({sizes}; tau could not be computed)."
    figure = f"Kendall tau {tau.value:.2f} [{_shown(tau.ci_low)}, {_shown(tau.ci_high)}], {sizes}"
    if len(set(np.round(measured, 12))) <= 1:
        return DOES_NOT, f"{score} does not order the ladder: the same mean on every rung ({figure})."
    low = tau.ci_low if tau.ci_low is not None else -1.0
    high = tau.ci_high if tau.ci_high is not None else 1.0
    if tau.value >= ORDER_TAU and low > 0:
        return ORDERS, f"{score} orders the ladder: {figure}."
    if tau.value < ORDER_TAU and high < ORDER_TAU:
        reverse = " (in reverse)" if tau.value <= -ORDER_TAU else ""
        return DOES_NOT, f"{score} does not order the ladder{reverse}: {figure}; the whole CI is below {ORDER_TAU}."
    return (
        CANNOT_TELL,
        f"{score}: cannot tell whether it orders the ladder ({figure}): the CI reaches both sides of "
        f"{ORDER_TAU} or 0; more conversations per rung would narrow it.",
    )


def _shown(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def score_ladder(
    table: pd.DataFrame,
    rungs: Sequence[str],
    score: str,
    *,
    higher_is_better: bool = True,
    n_resamples: int = 2000,
    simulations: int = 2000,
    seed: int = 0,
) -> ScoreLadder:
    """The ladder of one score from the per-conversation table of every rung (columns crs, index, `score`)."""
    values = rung_values(table, rungs, score)
    means = {
        rung: RungMean(
            **{
                k: (_finite(v) if k != "n" else int(v))
                for k, v in describe(values[rung], seed=seed).items()
                if k != "std"
            }
        )
        for rung in rungs
    }
    tau = tau_with_ci(values, higher_is_better, n_resamples=n_resamples, seed=seed)
    label, text = verdict(score, tau, means)
    return ScoreLadder(
        higher_is_better=higher_is_better,
        means=means,
        kendall_tau=tau,
        pairs=adjacent_pairs(values, n_resamples=n_resamples, simulations=simulations, seed=seed),
        verdict=label,
        verdict_text=text,
    )


__all__ = [
    "CANNOT_TELL",
    "DOES_NOT",
    "ORDERS",
    "AdjacentPair",
    "KendallTau",
    "LadderResult",
    "RungMean",
    "ScoreLadder",
    "rung_values",
    "score_ladder",
    "tau_b_against_order",
    "verdict",
]
