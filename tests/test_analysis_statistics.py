"""Statistics against scipy / scikit-learn reference values and published worked examples."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from usersimcrs.analysis.agreement import (
    agreement_summary,
    cohen_kappa,
    kendall_tau_b,
    krippendorff_alpha,
    percent_agreement,
    quadratic_weighted_kappa,
    randolph_kappa,
    spearman,
)
from usersimcrs.analysis.bootstrap import bootstrap_ci
from usersimcrs.analysis.factors import inter_factor_matrix, mean_abs_off_diagonal, stability
from usersimcrs.analysis.ranking import rank_biased_overlap, ranking, simulator_agreement
from usersimcrs.analysis.significance import paired_test

JUDGE = [4, 3, 3, 2, 4, 1, 0, 2, 3, 4, 2, 3]
HUMAN = [4, 2, 3, 2, 3, 1, 1, 2, 4, 4, 1, 3]


def test_correlations_match_scipy():
    assert spearman(JUDGE, HUMAN) == pytest.approx(stats.spearmanr(JUDGE, HUMAN).statistic)
    assert kendall_tau_b(JUDGE, HUMAN) == pytest.approx(stats.kendalltau(JUDGE, HUMAN, variant="b").statistic)
    # missing values drop the pair, as they do for the reference on the remaining pairs
    with_gap = JUDGE[:-1] + [None]
    assert spearman(with_gap, HUMAN) == pytest.approx(stats.spearmanr(JUDGE[:-1], HUMAN[:-1]).statistic)
    assert np.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))


def test_kappas_match_scikit_learn():
    assert quadratic_weighted_kappa(JUDGE, HUMAN) == pytest.approx(cohen_kappa_score(JUDGE, HUMAN, weights="quadratic"))
    assert cohen_kappa(JUDGE, HUMAN) == pytest.approx(cohen_kappa_score(JUDGE, HUMAN))
    # averaged scores are rounded to scale points first
    assert cohen_kappa([3.9, 2.2], [4, 2]) == pytest.approx(1.0)
    assert percent_agreement(JUDGE, HUMAN) == pytest.approx(7 / 12)
    assert percent_agreement(JUDGE, HUMAN, tolerance=1) == pytest.approx(1.0)


def test_krippendorff_alpha_textbook_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units, gaps
    n = None
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(data, "interval") == pytest.approx(0.849, abs=5e-4)
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(0.815, abs=5e-4)


def _ratings_from_counts(counts: list[list[int]]) -> list[list[int]]:
    """Raters x items from an items x categories count table (rater order is irrelevant)."""
    columns = []
    for row in counts:
        labels = [category + 1 for category, c in enumerate(row) for _ in range(c)]
        columns.append(labels)
    return [list(r) for r in zip(*columns)]


def test_randolph_kappa_on_fleiss_worked_example():
    # the classic Fleiss example (10 subjects, 14 raters, 5 categories): mean observed agreement 0.378,
    # so the free-marginal kappa is (0.378 - 1/5) / (1 - 1/5)
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    kappa = randolph_kappa(_ratings_from_counts(counts), 5)
    assert kappa == pytest.approx((0.378 - 0.2) / 0.8, abs=1e-3)
    # two raters: (p_o - 1/k) / (1 - 1/k) by hand
    assert randolph_kappa([[1, 2, 3, 4], [1, 2, 3, 1]], 4) == pytest.approx((0.75 - 0.25) / 0.75)


def test_agreement_summary_has_every_statistic():
    summary = agreement_summary(JUDGE, HUMAN, n_categories=5)
    assert summary["n"] == 12
    assert summary["qwk"] == pytest.approx(cohen_kappa_score(JUDGE, HUMAN, weights="quadratic"))
    assert summary["randolph_kappa"] == pytest.approx((7 / 12 - 0.2) / 0.8)
    assert -1 <= summary["krippendorff_alpha"] <= 1


def test_rank_biased_overlap_by_hand():
    assert rank_biased_overlap(list("abc"), list("abc")) == pytest.approx(1.0)
    assert rank_biased_overlap(list("abc"), list("xyz")) == pytest.approx(0.0)
    # p = 0.5: X_1 = 0, X_2 = 2, X_3 = 3 -> 0.125 + (0.5/0.5) * (0 + 0.25 + 0.125) = 0.5
    assert rank_biased_overlap(list("abc"), list("bac"), p=0.5) == pytest.approx(0.5)


def test_simulator_agreement_and_ranking():
    means = pd.DataFrame({"sim1": [0.3, 0.2, 0.1], "sim2": [0.25, 0.3, 0.05]}, index=["pop", "ret", "llm"])
    assert ranking(means["sim1"]) == ["pop", "ret", "llm"]
    assert ranking(means["sim1"], higher_is_better=False) == ["llm", "ret", "pop"]
    pairs = simulator_agreement(means)
    assert pairs.loc[0, "kendall_tau_b"] == pytest.approx(
        stats.kendalltau([0.3, 0.2, 0.1], [0.25, 0.3, 0.05]).statistic
    )
    assert pairs.loc[0, "rbo"] == pytest.approx(rank_biased_overlap(["pop", "ret", "llm"], ["ret", "pop", "llm"]))


def test_permutation_test_matches_scipy_exact():
    a = np.array([0.8, 0.6, 0.9, 0.4, 0.7, 0.5, 0.9, 0.3])
    b = np.array([0.5, 0.6, 0.4, 0.5, 0.3, 0.2, 0.6, 0.1])
    ours = paired_test(a, b, test="permutation", n_resamples=10000, seed=1)
    reference = stats.permutation_test(
        (a, b), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=np.inf, alternative="two-sided"
    )
    assert ours.p_value == pytest.approx(reference.pvalue)
    assert ours.mean_difference == pytest.approx(np.mean(a - b))
    # sampled (not exact) when 2^n exceeds the budget; reproducible with the seed
    big_a = np.linspace(0, 1, 30)
    big_b = big_a[::-1]
    first = paired_test(big_a, big_b, n_resamples=500, seed=3)
    assert first == paired_test(big_a, big_b, n_resamples=500, seed=3)


def test_bootstrap_test_and_ci_agree_with_scipy():
    rng = np.random.default_rng(7)
    a = rng.normal(0.6, 0.1, 40)
    b = a - 0.05 + rng.normal(0, 0.02, 40)
    result = paired_test(a, b, test="bootstrap", n_resamples=4000, seed=2)
    assert result.p_value < 0.01
    reference = stats.bootstrap((a - b,), np.mean, method="percentile", n_resamples=4000, random_state=5)
    assert result.ci_low == pytest.approx(reference.confidence_interval.low, abs=4e-3)
    assert result.ci_high == pytest.approx(reference.confidence_interval.high, abs=4e-3)
    null = paired_test(a, a + rng.normal(0, 0.05, 40) * 0, test="bootstrap", seed=2)
    assert null.p_value == pytest.approx(1.0)
    low, high = bootstrap_ci([2.0])
    assert low == high == 2.0


def test_inter_factor_matrix_and_stability():
    scores = pd.DataFrame({"a": [1, 2, 3, 4], "b": [2, 1, 4, 3], "c": [4, 3, 2, 1]})
    matrix = inter_factor_matrix(scores)
    assert matrix.loc["a", "c"] == pytest.approx(-1.0)
    assert matrix.loc["a", "b"] == pytest.approx(stats.kendalltau([1, 2, 3, 4], [2, 1, 4, 3]).statistic)
    assert mean_abs_off_diagonal(matrix) == pytest.approx((1 / 3 + 1 + 1 / 3) / 3)
    records = pd.DataFrame(
        [
            {"conversation_id": cid, "name": name, "value": value, "repeat": rep}
            for cid, table in {"x": {"f1": [1, 3], "f2": [2, 2]}, "y": {"f1": [4, 4], "f2": [0, 2]}}.items()
            for name, values in table.items()
            for rep, value in enumerate(values)
        ]
    )
    result = stability(records).set_index("factor")["std"]
    assert result["f1"] == pytest.approx((np.std([1, 3], ddof=1) + 0) / 2)
    assert result["f2"] == pytest.approx((0 + np.std([0, 2], ddof=1)) / 2)
    # totals: x -> [3, 5], y -> [4, 6]
    assert result["total"] == pytest.approx(np.std([3, 5], ddof=1))


def test_simulator_agreement_is_undefined_when_a_simulator_ties_every_crs():
    means = pd.DataFrame({"sim1": [2.0, 2.0, 2.0], "sim2": [0.25, 0.3, 0.05]}, index=["pop", "ret", "llm"])
    pairs = simulator_agreement(means)
    assert np.isnan(pairs.loc[0, "kendall_tau_b"]) and np.isnan(pairs.loc[0, "rbo"])


def test_simulator_agreement_is_withheld_when_it_would_say_nothing():
    from usersimcrs.analysis.compare import agreement_caveat

    means = pd.DataFrame({"a": [0.9, 0.5, 0.1], "b": [0.8, 0.0, 0.0]}, index=["x", "y", "z"])
    sizes = pd.DataFrame({"a": [12, 12, 12], "b": [12, 12, 12]}, index=["x", "y", "z"])
    assert agreement_caveat(means, sizes, "a", "b") == (False, "ties under b")  # kept, with its caveat
    small = sizes.assign(b=[2, 2, 2])
    withheld, note = agreement_caveat(means, small, "a", "b")
    assert withheld and "cells with n<10 (smallest n=2)" in note
    withheld, note = agreement_caveat(means.iloc[:2], sizes.iloc[:2], "a", "b")
    assert withheld and "2 CRSs scored by both (need 3)" in note
    flat = means.assign(b=[0.0, 0.0, 0.0])
    assert agreement_caveat(flat, sizes, "a", "b") == (True, "withheld: b ties every CRS")
