"""The ladder's statistics: tau against the known order with a CI, adjacent paired differences, verdicts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from usersimcrs.analysis.ladder import (
    CANNOT_TELL,
    DOES_NOT,
    ORDERS,
    KendallTau,
    RungMean,
    score_ladder,
    tau_b_against_order,
    verdict,
)

RUNGS = ["a", "b", "c", "d", "e"]


def table(rates: list[float], n: int = 60, seed: int = 0, score: str = "success") -> pd.DataFrame:
    """n conversations per rung; a conversation's score is 1 with the rung's rate (paired by index)."""
    rng = np.random.default_rng(seed)
    draws = rng.random(n)  # the same uniform number per conversation on every rung: a paired design
    rows = [
        {"crs": rung, "index": i, score: float(draws[i] < rate)} for rung, rate in zip(RUNGS, rates) for i in range(n)
    ]
    return pd.DataFrame(rows)


def test_tau_b_against_the_known_order_is_scipys_kendall_tau_b():
    rng = np.random.default_rng(4)
    for _ in range(50):
        means = rng.integers(0, 4, size=5).astype(float)  # ties on purpose
        if len(set(means)) == 1:
            continue
        expected = kendalltau(-np.arange(5), means).statistic
        assert tau_b_against_order(means[None, :])[0] == pytest.approx(expected)
        assert tau_b_against_order(-means[None, :], higher_is_better=False)[0] == pytest.approx(expected)


def test_a_score_that_ties_every_rung_orders_nothing():
    assert tau_b_against_order(np.ones((1, 5)))[0] == 0.0


def test_a_score_that_follows_the_rungs_orders_the_ladder_with_paired_cis():
    ladder = score_ladder(table([0.95, 0.75, 0.5, 0.25, 0.05]), RUNGS, "success", n_resamples=1000, simulations=500)
    assert ladder.verdict == ORDERS and ladder.kendall_tau.value == 1.0
    assert ladder.kendall_tau.ci_low > 0.5
    assert [m.n for m in ladder.means.values()] == [60] * 5
    for pair, (better, worse) in zip(ladder.pairs, zip(RUNGS, RUNGS[1:])):
        assert (pair.better, pair.worse, pair.n_pairs) == (better, worse, 60)
        assert pair.ci_low <= pair.difference <= pair.ci_high
        assert pair.difference == pytest.approx(ladder.means[better].mean - ladder.means[worse].mean)
        assert pair.n_for_80_power is not None or pair.power_notes


def test_a_score_blind_to_the_rungs_does_not_order_them():
    flat = table([0.5] * 5)
    ladder = score_ladder(flat, RUNGS, "success", n_resamples=500, simulations=300)
    assert ladder.verdict == DOES_NOT and "the same mean on every rung" in ladder.verdict_text
    assert all(p.n_for_80_power is None and p.power_notes.startswith("no difference") for p in ladder.pairs)


def test_lower_is_better_scores_are_oriented():
    ladder = score_ladder(
        table([0.05, 0.25, 0.5, 0.75, 0.95], score="turns"),
        RUNGS,
        "turns",
        higher_is_better=False,
        n_resamples=500,
        simulations=300,
    )
    assert ladder.verdict == ORDERS and ladder.kendall_tau.value == 1.0


def test_the_verdict_reads_the_ci_of_tau():
    means = {r: RungMean(mean=float(i), ci_low=None, ci_high=None, n=10) for i, r in enumerate(RUNGS)}
    assert verdict("s", KendallTau(value=0.8, ci_low=0.2, ci_high=1.0, resamples=10), means)[0] == ORDERS
    assert verdict("s", KendallTau(value=1.0, ci_low=-0.2, ci_high=1.0, resamples=10), means)[0] == CANNOT_TELL
    assert verdict("s", KendallTau(value=0.4, ci_low=0.0, ci_high=0.6, resamples=10), means)[0] == DOES_NOT
    label, text = verdict("s", KendallTau(value=-1.0, ci_low=-1.0, ci_high=-0.8, resamples=10), means)
    assert label == DOES_NOT and "in reverse" in text
    assert verdict("s", KendallTau(value=0.6, ci_low=0.0, ci_high=1.0, resamples=10), means)[0] == CANNOT_TELL
