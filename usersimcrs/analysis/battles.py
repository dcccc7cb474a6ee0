"""Ranking systems from pairwise battles (human votes): Bradley-Terry with bootstrap CIs, and Elo.

Bradley-Terry (BT) gives each system a log-strength theta so that P(i beats j) = 1 / (1 + exp(theta_j -
theta_i)). It is fitted with choix's iterative Luce spectral ranking (`ilsr_pairwise`) with a small
regularisation `alpha`, so that a system that never loses still gets a finite score. A tie counts as
half a win for each side: every decisive battle enters twice as (winner, loser), every tie once in each
direction. Scores are centred (mean 0 over the systems in the battles). Systems in separate
components of the battle graph (never compared, not even indirectly) are only tied together by the
regularisation; `components` says how many there are.

Elo is a second view that depends on the order of the battles (K-factor updates in recorded order).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, Field

from usersimcrs.core.votes import VoteRecord

DEFAULT_ALPHA = 0.1
ELO_K = 32.0
ELO_BASE = 1000.0


class Battle(BaseModel):
    """One comparison of two systems: `a` won, `b` won, or a tie."""

    system_a: str
    system_b: str
    outcome: Literal["a", "b", "tie"]


class SystemStrength(BaseModel):
    """One system's BT log-strength with its bootstrap CI, its record in the battles, and its Elo."""

    system: str
    score: float
    ci_low: float | None = None
    ci_high: float | None = None
    battles: int
    wins: int
    losses: int
    ties: int
    elo: float


class BattleRanking(BaseModel):
    """Every system's strength, best first, with how the CIs were made."""

    systems: list[SystemStrength]
    n_battles: int
    components: int = Field(description="connected components of the battle graph (1 = every pair comparable)")
    alpha: float
    resamples: int
    seed: int
    confidence: float
    method: str = "bradley_terry (choix.ilsr_pairwise, ties = half wins); percentile bootstrap over battles"

    def scores(self) -> dict[str, float]:
        """System -> BT log-strength."""
        return {s.system: s.score for s in self.systems}


def battles_from_votes(votes: Iterable[VoteRecord]) -> list[Battle]:
    """Human votes as battles (CRS names are the systems)."""
    return [Battle(system_a=v.crs_a, system_b=v.crs_b, outcome=v.outcome) for v in votes]


def _systems(battles: Sequence[Battle]) -> list[str]:
    return sorted({b.system_a for b in battles} | {b.system_b for b in battles})


def _pairs(battles: Sequence[Battle], index: dict[str, int]) -> list[tuple[int, int]]:
    """(winner, loser) pairs with decisive battles doubled and ties split, i.e. ties as half wins."""
    pairs = []
    for battle in battles:
        a, b = index[battle.system_a], index[battle.system_b]
        if battle.outcome == "a":
            pairs += [(a, b), (a, b)]
        elif battle.outcome == "b":
            pairs += [(b, a), (b, a)]
        else:
            pairs += [(a, b), (b, a)]
    return pairs


def bradley_terry(
    battles: Sequence[Battle], *, alpha: float = DEFAULT_ALPHA, systems: Sequence[str] | None = None
) -> dict[str, float]:
    """BT log-strengths (centred) of the systems in `battles` (or of `systems`; unseen ones get 0)."""
    import choix

    names = list(systems) if systems is not None else _systems(battles)
    if not names:
        return {}
    index = {name: i for i, name in enumerate(names)}
    pairs = _pairs(battles, index)
    if not pairs or len(names) < 2:
        return {name: 0.0 for name in names}
    params = choix.ilsr_pairwise(len(names), pairs, alpha=alpha)
    params = params - params.mean()
    return {name: float(params[i]) for name, i in index.items()}


def elo(battles: Sequence[Battle], *, k: float = ELO_K, base: float = ELO_BASE) -> dict[str, float]:
    """Elo ratings after the battles in their recorded order (a tie scores 0.5 for each side)."""
    ratings: dict[str, float] = defaultdict(lambda: base)
    for battle in battles:
        ra, rb = ratings[battle.system_a], ratings[battle.system_b]
        expected_a = 1.0 / (1.0 + 10 ** ((rb - ra) / 400.0))
        actual_a = {"a": 1.0, "b": 0.0, "tie": 0.5}[battle.outcome]
        ratings[battle.system_a] = ra + k * (actual_a - expected_a)
        ratings[battle.system_b] = rb - k * (actual_a - expected_a)
    return dict(ratings)


def components(battles: Sequence[Battle]) -> int:
    """Connected components of the graph whose edges are the battles."""
    parent = {name: name for name in _systems(battles)}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for battle in battles:
        parent[find(battle.system_a)] = find(battle.system_b)
    return len({find(name) for name in parent})


def record(battles: Sequence[Battle]) -> dict[str, dict[str, int]]:
    """Per system: battles, wins, losses and ties."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: {"battles": 0, "wins": 0, "losses": 0, "ties": 0})
    for battle in battles:
        for side, name in (("a", battle.system_a), ("b", battle.system_b)):
            row = out[name]
            row["battles"] += 1
            if battle.outcome == "tie":
                row["ties"] += 1
            elif battle.outcome == side:
                row["wins"] += 1
            else:
                row["losses"] += 1
    return dict(out)


def bootstrap_bradley_terry(
    battles: Sequence[Battle], *, resamples: int = 1000, seed: int = 0, alpha: float = DEFAULT_ALPHA
) -> dict[str, np.ndarray]:
    """BT scores of each system over `resamples` resamples of the battles (NaN where a system is absent)."""
    names = _systems(battles)
    rng = np.random.default_rng(seed)
    draws = {name: np.full(resamples, np.nan) for name in names}
    n = len(battles)
    for r in range(resamples):
        sample = [battles[i] for i in rng.integers(0, n, size=n)]
        for name, value in bradley_terry(sample, alpha=alpha).items():
            draws[name][r] = value
    return draws


def rank_systems(
    battles: Sequence[Battle],
    *,
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
    confidence: float = 0.95,
) -> BattleRanking:
    """BT scores with percentile-bootstrap CIs (resampling battles, seeded), records and Elo, best first."""
    battles = list(battles)
    scores = bradley_terry(battles, alpha=alpha)
    draws = bootstrap_bradley_terry(battles, resamples=resamples, seed=seed, alpha=alpha) if resamples else {}
    tail = (1.0 - confidence) / 2.0 * 100
    records = record(battles)
    elos = elo(battles)
    rows = []
    for name, score in scores.items():
        values = draws.get(name)
        low = high = None
        if values is not None and np.isfinite(values).any():
            low, high = (float(v) for v in np.nanpercentile(values, [tail, 100 - tail]))
        rows.append(SystemStrength(system=name, score=score, ci_low=low, ci_high=high, elo=elos[name], **records[name]))
    rows.sort(key=lambda s: (-s.score, s.system))
    return BattleRanking(
        systems=rows,
        n_battles=len(battles),
        components=components(battles),
        alpha=alpha,
        resamples=resamples,
        seed=seed,
        confidence=confidence,
    )
