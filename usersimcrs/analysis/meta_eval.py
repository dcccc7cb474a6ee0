"""Meta-evaluation: does an automatic score (metric or judge) agree with what real humans said?

Two levels:
- conversation: the score of each conversation against its human reference. A binary reference
  (satisfied 1 / frustrated 0) gives the ROC AUC (0.5 = no better than chance, 1 = perfect
  separation, 0 = perfectly inverted); an ordinal one gives Spearman r and Kendall tau-b, and the
  quadratic-weighted kappa when both use the same integer scale.
- system: the ranking of systems (CRSs) by their mean score against the human ranking (Bradley-Terry
  strengths from pairwise votes, else the mean human reference per system): Kendall tau-b, Spearman r
  and pairwise accuracy (the share of system pairs that humans order and the score orders the same way).

Every statistic has a seeded percentile-bootstrap CI: conversation pairs are resampled at the
conversation level; at the system level the conversations are resampled within each system and,
when the human side comes from votes, the votes are resampled too and the BT model refitted.
"""

from __future__ import annotations

import itertools
from typing import Callable, Literal, Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from pydantic import BaseModel, Field

from usersimcrs.analysis.agreement import (
    kendall_tau_b,
    quadratic_weighted_kappa,
    spearman,
)
from usersimcrs.analysis.battles import DEFAULT_ALPHA, Battle, BattleRanking, bradley_terry
from usersimcrs.analysis.left_out import LeftOut
from usersimcrs.analysis.two_sample import roc_auc

Level = Literal["conversation", "system"]
SMALL_N = 30
CHANCE = {
    "auc": 0.5,
    "within_auc": 0.5,
    "pairwise_accuracy": 0.5,
    "spearman": 0.0,
    "within_spearman": 0.0,
    "kendall_tau_b": 0.0,
    "qwk": 0.0,
}
MIN_WITHIN = 3
"""A system needs this many conversations (and both sides varying) to count in a within-system figure."""
CI_METHOD = "percentile bootstrap, 95%"


class StatRow(BaseModel):
    """One statistic of one score at one level; value None when it could not be measured (see note)."""

    score: str
    level: Level
    statistic: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int
    note: str | None = None

    def caveats(self) -> list[str]:
        """Why this figure should be read with care (small n, CI spanning chance, not measured)."""
        out = []
        if self.value is None:
            out.append(self.note or "not measured")
            return out
        small = SMALL_N if self.level == "conversation" else 5
        if self.n < small:
            out.append(f"n = {self.n} < {small}: the CI is wide")
        chance = CHANCE.get(self.statistic)
        if (
            chance is not None
            and self.ci_low is not None
            and self.ci_high is not None
            and self.ci_low <= chance <= self.ci_high
        ):
            out.append(f"CI spans the chance value {chance:g}")
        return out


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def auc(scores: ArrayLike, labels: ArrayLike) -> float | None:
    """ROC AUC of `scores` for binary `labels` (1 = positive); None with fewer than one of each class."""
    y = np.asarray(labels, dtype=float)
    if y.size < 2 or len(set(y.tolist())) < 2:
        return None
    return roc_auc(y.astype(int), np.asarray(scores, dtype=float))


def label_kind(values: Sequence[float]) -> Literal["binary", "ordinal"]:
    """'binary' when the reference only takes the values 0 and 1, else 'ordinal'."""
    present = {float(v) for v in values if v is not None and np.isfinite(v)}
    return "binary" if present and present <= {0.0, 1.0} else "ordinal"


def same_integer_scale(a: ArrayLike, b: ArrayLike) -> bool:
    """True when both sides are integers and the score stays within the reference's observed range."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0 or not (np.all(x == np.rint(x)) and np.all(y == np.rint(y))):
        return False
    return bool(x.min() >= y.min() and x.max() <= y.max() and y.max() > y.min())


def pairwise_accuracy(score: dict[str, float], human: dict[str, float]) -> float | None:
    """Share of system pairs that humans order (no human tie) and the score orders the same way.

    A pair the score ties counts half. None when humans order no pair.
    """
    systems = sorted(set(score) & set(human))
    agree, total = 0.0, 0
    for a, b in itertools.combinations(systems, 2):
        h = np.sign(human[a] - human[b])
        if h == 0:
            continue
        s = np.sign(score[a] - score[b])
        total += 1
        agree += 1.0 if s == h else 0.5 if s == 0 else 0.0
    return agree / total if total else None


def _percentile_ci(draws: Sequence[float | None], confidence: float = 0.95) -> tuple[float | None, float | None]:
    """Percentile interval of the defined draws; None when fewer than half of the resamples were defined."""
    values = np.asarray([d for d in draws if d is not None and np.isfinite(d)], dtype=float)
    if values.size == 0 or values.size < len(draws) / 2:
        return None, None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_bootstrap(
    statistic: Callable[[np.ndarray, np.ndarray], float | None],
    x: np.ndarray,
    y: np.ndarray,
    *,
    resamples: int,
    seed: int,
) -> tuple[float | None, float | None]:
    """Percentile CI of statistic(x, y) over resampled pairs (seeded)."""
    if resamples <= 0 or x.size < 2:
        return None, None
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        idx = rng.integers(0, x.size, size=x.size)
        draws.append(statistic(x[idx], y[idx]))
    return _percentile_ci(draws)


def _correlation(fn: Callable) -> Callable[[np.ndarray, np.ndarray], float | None]:
    return lambda a, b: _finite(fn(list(a), list(b)))


def within_systems(
    fn: Callable[[np.ndarray, np.ndarray], float | None], x: np.ndarray, y: np.ndarray, systems: np.ndarray
) -> tuple[float | None, int]:
    """The statistic inside each system, averaged over systems weighted by their conversations; a system
    with fewer than `MIN_WITHIN` conversations or where it is undefined (one class, constant) is skipped.
    Returns the mean and how many conversations it rests on."""
    total, weight = 0.0, 0
    for system in sorted(set(systems.tolist())):
        part = systems == system
        if part.sum() < MIN_WITHIN:
            continue
        value = fn(x[part], y[part])
        if value is not None and np.isfinite(value):
            total += value * int(part.sum())
            weight += int(part.sum())
    return (total / weight if weight else None), weight


def _within_bootstrap(
    fn: Callable[[np.ndarray, np.ndarray], float | None],
    x: np.ndarray,
    y: np.ndarray,
    systems: np.ndarray,
    *,
    resamples: int,
    seed: int,
) -> tuple[float | None, float | None]:
    """Percentile CI of `within_systems`, conversations resampled inside each system (seeded)."""
    if resamples <= 0:
        return None, None
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(systems == s) for s in sorted(set(systems.tolist()))]
    draws = []
    for _ in range(resamples):
        idx = np.concatenate([rng.choice(m, size=m.size, replace=True) for m in members])
        draws.append(within_systems(fn, x[idx], y[idx], systems[idx])[0])
    return _percentile_ci(draws)


NO_WITHIN = "knows only the system: no within-system figure"


def conversation_stats(
    name: str,
    scores: Sequence[float | None],
    reference: Sequence[float | None],
    *,
    resamples: int = 1000,
    seed: int = 0,
    systems: Sequence[str] | None = None,
    within: bool = True,
) -> list[StatRow]:
    """AUC (binary reference) or Spearman, Kendall tau-b and QWK (ordinal) with bootstrap CIs. With
    `systems` (one per conversation), also the within-system AUC (binary) or Spearman (ordinal):
    the figure inside each system, n-weighted (see `within_systems`); `within=False` leaves it empty
    (a score that knows only the system)."""
    labels = list(systems) if systems is not None else [""] * len(scores)
    pairs = [
        (float(s), float(r), str(g))
        for s, r, g in zip(scores, reference, labels, strict=True)
        if s is not None and r is not None and np.isfinite(s) and np.isfinite(r)
    ]
    x = np.asarray([p[0] for p in pairs], dtype=float)
    y = np.asarray([p[1] for p in pairs], dtype=float)
    groups = np.asarray([p[2] for p in pairs], dtype=object)
    n = int(x.size)
    kind = label_kind(y.tolist())
    statistics: dict[str, Callable[[np.ndarray, np.ndarray], float | None]]
    if kind == "binary":
        statistics = {"auc": lambda a, b: auc(a, b)}
    else:
        statistics = {"spearman": _correlation(spearman), "kendall_tau_b": _correlation(kendall_tau_b)}
        if same_integer_scale(x, y):
            statistics["qwk"] = _correlation(quadratic_weighted_kappa)
    rows = []
    for i, (statistic, fn) in enumerate(statistics.items()):
        value = fn(x, y) if n >= 2 else None
        low, high = (
            paired_bootstrap(fn, x, y, resamples=resamples, seed=seed + i) if value is not None else (None, None)
        )
        note = None
        if value is None:
            note = "needs both classes in the reference" if kind == "binary" else "needs two pairs with varying values"
        rows.append(_conversation_row(name, statistic, value, low, high, n, note))
    if systems is not None:
        statistic, fn = (
            ("within_auc", statistics["auc"]) if kind == "binary" else ("within_spearman", statistics["spearman"])
        )
        if within and n >= 2:
            value, used = within_systems(fn, x, y, groups)
            low, high = (
                _within_bootstrap(fn, x, y, groups, resamples=resamples, seed=seed + 7)
                if value is not None
                else (None, None)
            )
            note = None if value is not None else f"no system with {MIN_WITHIN}+ conversations and both sides varying"
        else:
            value, used, low, high = None, 0, None, None
            note = NO_WITHIN if not within else "needs two pairs"
        rows.append(_conversation_row(name, statistic, value, low, high, used, note))
    return rows


def _conversation_row(
    score: str,
    statistic: str,
    value: float | None,
    low: float | None,
    high: float | None,
    n: int,
    note: str | None,
) -> StatRow:
    return StatRow(
        score=score, level="conversation", statistic=statistic, value=value, ci_low=low, ci_high=high, n=n, note=note
    )


def ranks_systems_only(row: StatRow) -> bool:
    """A within-system figure whose CI contains its chance value: agreement from telling systems apart."""
    return (
        row.statistic.startswith("within_")
        and row.value is not None
        and row.ci_low is not None
        and row.ci_high is not None
        and row.ci_low <= CHANCE[row.statistic] <= row.ci_high
    )


def system_means(table: pd.DataFrame, column: str) -> dict[str, float]:
    """Mean of `column` per system over the conversations where it is present."""
    values = pd.to_numeric(table[column], errors="coerce")
    means = values.groupby(table["system"]).mean().dropna()
    return {str(k): float(v) for k, v in means.items()}


def _system_figures(score: dict[str, float], human: dict[str, float]) -> dict[str, float | None]:
    systems = sorted(set(score) & set(human))
    a = [score[s] for s in systems]
    b = [human[s] for s in systems]
    return {
        "kendall_tau_b": _finite(kendall_tau_b(a, b)),
        "spearman": _finite(spearman(a, b)),
        "pairwise_accuracy": pairwise_accuracy(score, human),
    }


def human_system_scores(
    table: pd.DataFrame, battles: Sequence[Battle] | None, *, alpha: float = DEFAULT_ALPHA
) -> dict[str, float]:
    """The human side per system: BT strengths from the battles, else the mean reference."""
    if battles:
        return bradley_terry(list(battles), alpha=alpha)
    return system_means(table, "reference")


def _resample_within(table: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Resample conversations with replacement inside each system (every system keeps its size)."""
    positions = []
    for idx in table.groupby("system").indices.values():
        positions.append(rng.choice(idx, size=len(idx), replace=True))
    return table.iloc[np.concatenate(positions)] if positions else table


def system_stats(
    name: str,
    table: pd.DataFrame,
    *,
    battles: Sequence[Battle] | None = None,
    resamples: int = 1000,
    seed: int = 0,
    alpha: float = DEFAULT_ALPHA,
) -> tuple[list[StatRow], dict[str, float], dict[str, float]]:
    """System-level agreement of the score's ranking with the human ranking, with bootstrap CIs.

    `table` has columns system, reference and the score `name`. Returns the rows and the two
    per-system score maps (score means, human scores) the rows were computed from.
    """
    data = table[["system", "reference", name]].rename(columns={name: "score"})
    score = system_means(data, "score")
    human = human_system_scores(data, battles, alpha=alpha)
    point = _system_figures(score, human)
    n = len(set(score) & set(human))
    rng = np.random.default_rng(seed)
    battle_list = list(battles or [])
    draws: dict[str, list[float | None]] = {k: [] for k in point}
    if n >= 2 and resamples > 0:
        for _ in range(resamples):
            sample = _resample_within(data, rng)
            sample_battles = (
                [battle_list[i] for i in rng.integers(0, len(battle_list), size=len(battle_list))]
                if battle_list
                else None
            )
            figures = _system_figures(
                system_means(sample, "score"), human_system_scores(sample, sample_battles, alpha=alpha)
            )
            for key, value in figures.items():
                draws[key].append(value)
    rows = []
    for statistic, value in point.items():
        low, high = _percentile_ci(draws[statistic]) if value is not None and draws[statistic] else (None, None)
        note = (
            None
            if value is not None
            else (
                "needs two systems with both a score and a human score"
                if n < 2
                else "undefined (all systems tied on one side)"
            )
        )
        rows.append(
            StatRow(
                score=name, level="system", statistic=statistic, value=value, ci_low=low, ci_high=high, n=n, note=note
            )
        )
    return rows, score, human


CSV_COLUMNS = ["score", "level", "statistic", "value", "ci_low", "ci_high", "n"]
META_EVAL_CSV = "meta_eval.csv"
SYSTEMS_CSV = "meta_eval_systems.csv"
HUMAN_RANKING_CSV = "human_ranking.csv"
DEFAULT_REFERENCE_KEYS = ("satisfied", "rating", "satisfaction")
HumanSource = Literal["auto", "votes", "labels"]


class SystemScore(BaseModel):
    """One system under one score: its mean score (with n) and its human score (with what it rests on)."""

    score: str
    system: str
    mean: float | None
    n: int
    human: float | None
    human_n: int = Field(description="battles behind a BT score, or labelled conversations behind a mean")


class MetaEvalResult(BaseModel):
    """Everything meta-eval measured, with the settings that produced it."""

    path: str
    scores: list[str]
    reference_key: str | None = Field(description="None: no per-conversation reference, system level only (votes)")
    reference_kind: Literal["binary", "ordinal"] | None
    human_source: Literal["votes", "labels"]
    n_conversations: int
    n_labelled: int
    rows: list[StatRow]
    systems: list[SystemScore]
    human_ranking: BattleRanking | None = None
    notes: list[str] = Field(default_factory=list)
    resamples: int
    seed: int
    ci_method: str = CI_METHOD
    left_out: list[LeftOut] = Field(default_factory=list, description="conversations not evaluated, and why")
    output: str | None = None
    files: list[str] = Field(default_factory=list)

    def reference_line(self) -> str:
        """What the conversation level compared with, in one line (the console's and the report's)."""
        if self.reference_key is None:
            return (
                f"no per-conversation reference on the {self.n_conversations} conversations: conversation level "
                "not checked, system level against the votes only"
            )
        return (
            f"reference '{self.reference_key}' ({self.reference_kind}) on {self.n_labelled} of "
            f"{self.n_conversations} conversations"
        )

    def table(self) -> pd.DataFrame:
        """The rows in meta_eval.csv's columns."""
        return pd.DataFrame([r.model_dump(include=set(CSV_COLUMNS)) for r in self.rows], columns=CSV_COLUMNS)

    def systems_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            [s.model_dump() for s in self.systems], columns=["score", "system", "mean", "n", "human", "human_n"]
        )
