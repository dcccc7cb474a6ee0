"""Conversations needed for 80% power, by resampling paired differences (METHODS §11)."""

from __future__ import annotations

import numpy as np
import pytest

from usersimcrs.analysis.power import n_for_power, power_at, sign_flip_rejects, size_grid, two_rates_n
from usersimcrs.analysis.significance import permutation_p_value


def independent_rates(p1: float, p2: float, size: int = 10000) -> np.ndarray:
    """Paired differences of two independent Bernoulli draws, in exact proportions: P(+1) = p1(1-p2),
    P(-1) = (1-p1)p2, else 0."""
    up, down = round(size * p1 * (1 - p2)), round(size * (1 - p1) * p2)
    return np.array([1.0] * up + [-1.0] * down + [0.0] * (size - up - down))


@pytest.mark.parametrize(("p1", "p2"), [(0.5, 0.3), (0.8, 0.6), (0.3, 0.25), (0.95, 0.9), (0.6, 0.4)])
def test_the_resampled_n_matches_the_closed_form_for_two_rates_within_15_percent(p1, p2):
    expected = two_rates_n(p1, p2)
    estimate = n_for_power(independent_rates(p1, p2))
    assert estimate.n_for_80_power is not None and estimate.power_notes is None
    assert estimate.n_for_80_power == pytest.approx(expected, rel=0.15)


def test_the_closed_form_is_the_standard_formula():
    # p1 = 0.5, p2 = 0.3: (1.96 sqrt(0.48) + 0.8416 sqrt(0.46))^2 / 0.04 = 93.0
    assert two_rates_n(0.5, 0.3) == pytest.approx(93.0, abs=0.2)


def test_the_exact_test_agrees_with_the_comparisons_permutation_test():
    rng = np.random.default_rng(1)
    samples = rng.choice([-1.0, 0.0, 1.0, 0.5], size=(300, 9))
    rejects = sign_flip_rejects(samples)
    p_values = np.array([permutation_p_value(row, n_resamples=10000) for row in samples])
    assert (rejects == (p_values <= 0.05)).all()
    assert rejects.any() and not rejects.all()


def test_power_grows_with_n_and_the_estimate_is_reproducible():
    d = independent_rates(0.7, 0.5)
    powers = [power_at(d, n) for n in (10, 40, 160)]
    assert powers == sorted(powers) and powers[-1] > 0.8 > powers[0]
    assert n_for_power(d, seed=3) == n_for_power(d, seed=3)


def test_no_figure_comes_with_its_reason():
    assert n_for_power(np.zeros(50)).power_notes.startswith("no difference at all")
    assert "mean paired difference is 0" in n_for_power(np.array([1.0, -1.0] * 25)).power_notes
    assert "too few" in n_for_power([1.0]).power_notes and "too few" in n_for_power([1.0, 0.0, 1.0, 1.0]).power_notes
    assert n_for_power([1.0, 0.0, 1.0, 1.0, 1.0]).n_for_80_power is not None
    tiny = n_for_power(independent_rates(0.51, 0.5), largest=500)
    assert tiny.n_for_80_power is None and tiny.power_notes.startswith("more than 500 conversations")


def test_a_large_difference_needs_few_conversations():
    estimate = n_for_power(np.ones(100))
    # the exact sign-flip test first rejects at n = 6 (p = 2/64); a normal approximation would say 4
    assert estimate.n_for_80_power == 6 and estimate.power_at_observed_n == 1.0


def test_the_grid_is_fine_enough_for_a_15_percent_check():
    grid = size_grid()
    assert grid[:3] == [2, 3, 4] and grid[-1] == 20000
    assert all(b / a <= 1.1 for a, b in zip(grid, grid[1:]) if a >= 20)
