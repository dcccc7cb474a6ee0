"""Preference Coverage PC_t and its increase rate PCIR_t (PEPPER §4.2, Eq. 1-2).

PC_t = mean over users of |(P_1 ∪ ... ∪ P_t) ∩ Y(u)| / |Y(u)| with each P_x cut at k. A dialogue that
ended before turn t keeps the coverage it reached (no new lists, nothing new covered).
"""

from __future__ import annotations

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.metrics.base import MetricContext, MetricFamily, Value, mean_or_none
from usersimcrs.metrics.targets import hit_targets, targets_of


def coverage_curve(dialogue: Dialogue, k: int, horizon: int) -> list[float] | None:
    """The user's cumulative coverage after each turn 1..horizon; None when there are no targets."""
    targets = targets_of(dialogue)
    if not targets:
        return None
    lists = dialogue.recommendation_lists()
    covered: set[int] = set()
    curve = []
    for turn in range(horizon):
        if turn < len(lists):
            covered |= hit_targets(lists[turn], targets, k)
        curve.append(len(covered) / len(targets))
    return curve


def preference_coverage(curves: list[list[float] | None]) -> list[float]:
    """PC_t for t = 1..T: the per-turn mean over users (users without targets left out)."""
    present = [c for c in curves if c is not None]
    if not present:
        return []
    horizon = max(len(c) for c in present)
    return [sum(c[t] for c in present) / len(present) for t in range(horizon)]


def increase_rate(pc: list[float]) -> list[float]:
    """PCIR_t = PC_t - PC_{t-1}, with PC_0 = 0."""
    return [value - (pc[t - 1] if t else 0.0) for t, value in enumerate(pc)]


def average_increase_rate(pc: list[float]) -> float | None:
    """PCIR_avg: the mean of PCIR_t over the T turns (equals PC_T / T)."""
    rates = increase_rate(pc)
    return mean_or_none(list(rates))


class CoverageFamily(MetricFamily):
    """pc@k (the user's coverage after T turns; its mean is PC_T@k) and pcir_avg@k (coverage / T)."""

    name = "coverage"

    def kept_on_failure(self, metric: str) -> bool:
        """Coverage is an outcome: a conversation that broke off keeps what it covered (PEPPER's rule for early ends)."""
        return True

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        out: dict[str, Value] = {}
        for k in ctx.options.coverage_ks:
            curve = coverage_curve(dialogue, k, ctx.horizon)
            out[f"pc@{k}"] = None if curve is None else curve[-1]
            out[f"pcir_avg@{k}"] = None if curve is None else average_increase_rate(curve)
        return out

    def per_turn(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {}
        for k in ctx.options.coverage_ks:
            curve = coverage_curve(dialogue, k, ctx.horizon)
            if curve is not None:
                out[f"pc@{k}"] = list(curve)
        return out
