"""Bradley-Terry and Elo from battles, with answers worked out by hand."""

from __future__ import annotations

import math

import pytest

from usersimcrs.analysis.battles import (
    Battle,
    bradley_terry,
    components,
    elo,
    rank_systems,
)


def _battles(spec):
    """spec: (a, b, a_wins, b_wins, ties)."""
    out = []
    for a, b, wins, losses, ties in spec:
        out += [Battle(system_a=a, system_b=b, outcome="a")] * wins
        out += [Battle(system_a=a, system_b=b, outcome="b")] * losses
        out += [Battle(system_a=a, system_b=b, outcome="tie")] * ties
    return out


# strengths 4 : 2 : 1 give P(A>B) = 2/3, P(B>C) = 2/3, P(A>C) = 4/5; these counts are exactly
# proportional, so the maximum-likelihood log-strengths are ln 4, ln 2, 0 (up to a shift).
KNOWN = [("A", "B", 2, 1, 0), ("B", "C", 2, 1, 0), ("A", "C", 4, 1, 0)]


def test_three_systems_known_strengths():
    scores = bradley_terry(_battles(KNOWN), alpha=0.0)
    assert scores["A"] - scores["B"] == pytest.approx(math.log(2), abs=1e-4)
    assert scores["B"] - scores["C"] == pytest.approx(math.log(2), abs=1e-4)
    assert sum(scores.values()) == pytest.approx(0.0, abs=1e-9)


def test_ties_count_as_half_wins():
    # B-C: 1 win for B and 2 ties = 2 : 1 in half wins, the same as 2 wins to 1 above
    with_ties = [("A", "B", 2, 1, 0), ("B", "C", 1, 0, 2), ("A", "C", 4, 1, 0)]
    assert bradley_terry(_battles(with_ties), alpha=0.0) == pytest.approx(
        bradley_terry(_battles(KNOWN), alpha=0.0), abs=1e-4
    )
    only_ties = bradley_terry(_battles([("A", "B", 0, 0, 3)]), alpha=0.0)
    assert only_ties["A"] == pytest.approx(only_ties["B"], abs=1e-9)


def test_cycle_is_a_three_way_tie_and_reversal_flips_order():
    cycle = bradley_terry(_battles([("A", "B", 2, 1, 0), ("B", "C", 2, 1, 0), ("C", "A", 2, 1, 0)]), alpha=0.0)
    assert max(cycle.values()) - min(cycle.values()) == pytest.approx(0.0, abs=1e-6)
    reversed_ = bradley_terry(_battles([(b, a, wins, losses, ties) for a, b, wins, losses, ties in KNOWN]), alpha=0.0)
    assert sorted(reversed_, key=reversed_.get, reverse=True) == ["C", "B", "A"]


def test_undefeated_system_stays_finite_with_regularisation():
    scores = bradley_terry(_battles([("A", "B", 5, 0, 0), ("B", "C", 3, 1, 0)]), alpha=0.1)
    assert all(math.isfinite(v) for v in scores.values())
    assert scores["A"] > scores["B"] > scores["C"]


def test_rank_systems_ci_counts_and_seed():
    battles = _battles([("A", "B", 6, 2, 1), ("B", "C", 6, 2, 1), ("A", "C", 8, 1, 0)])
    ranking = rank_systems(battles, resamples=300, seed=3)
    assert [s.system for s in ranking.systems] == ["A", "B", "C"]
    a = ranking.systems[0]
    assert (a.battles, a.wins, a.losses, a.ties) == (18, 14, 3, 1)
    assert all(s.ci_low <= s.score <= s.ci_high for s in ranking.systems)
    assert ranking.n_battles == len(battles) and ranking.components == 1
    again = rank_systems(battles, resamples=300, seed=3)
    assert [(s.ci_low, s.ci_high) for s in again.systems] == [(s.ci_low, s.ci_high) for s in ranking.systems]
    other = rank_systems(battles, resamples=300, seed=4)
    assert [(s.ci_low, s.ci_high) for s in other.systems] != [(s.ci_low, s.ci_high) for s in ranking.systems]


def test_elo_and_components():
    ratings = elo([Battle(system_a="A", system_b="B", outcome="a")], k=32, base=1000)
    assert ratings == {"A": pytest.approx(1016.0), "B": pytest.approx(984.0)}
    tie = elo([Battle(system_a="A", system_b="B", outcome="tie")])
    assert tie["A"] == tie["B"] == pytest.approx(1000.0)
    assert components(_battles([("A", "B", 1, 0, 0), ("C", "D", 1, 0, 0)])) == 2
