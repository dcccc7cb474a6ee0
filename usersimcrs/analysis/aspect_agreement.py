"""Agreement of per-aspect predictions with human ratings, by CRSArena-Eval's official rule and beyond.

The official rule (facts): predictions and gold ratings are paired by (conversation, assistant turn)
for turn aspects and by conversation for dialogue aspects, within one group (the dataset part of
the conversation ID); every pair of the group is pooled into one vector; a pair missing on either
side is dropped; scipy's `pearsonr` and `spearmanr` give the figures; a NaN prediction, a constant
predictor or fewer than two pairs give NaN.

Beyond the rule, with the same pairs:

- a bootstrap CI for every figure: conversations are resampled (with replacement, within each CRS so
  every CRS keeps its size), so the turns of one conversation move together. The same resamples
  serve every evaluator of a (group, aspect), so their intervals are comparable;
- the **within-system** correlation: the correlation inside each CRS, averaged over CRSs weighted
  by their pairs. A pooled correlation can be high merely because an evaluator tells good CRSs
  from bad ones; this one asks whether it also orders the conversations (turns) of one CRS;
- **system-level** agreement: each CRS's mean prediction against its mean human rating (Pearson,
  Spearman, Kendall tau-b over CRSs; with five CRSs these are coarse).

Inside the bootstrap, a resample is a vector of multiplicities per conversation and every statistic
is computed with those multiplicities as integer weights (a weighted correlation of the expanded
sample; ranks use the weighted average-rank formula), which is exact and vectorised.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from usersimcrs.analysis.left_out import LeftOut
from usersimcrs.analysis.meta_eval import _percentile_ci
from usersimcrs.core.crsarena_eval import canonical

Source = Literal["computed", "baseline", "published"]
POOLED = ("pearson", "spearman")
WITHIN = ("within_pearson", "within_spearman")
SYSTEM = ("system_pearson", "system_spearman", "system_kendall")
STATISTICS = (*POOLED, *WITHIN, *SYSTEM)
ALL_GROUPS = "all"
CI_METHOD = "percentile bootstrap, 95%, conversations resampled within each CRS"
NO_WITHIN = (
    "knows only the CRS: no within-CRS figure (inside a CRS its out-of-fold mean only mirrors the held-out rating)"
)
SYSTEMS_NOT_CONVERSATIONS = "ranks systems, not conversations"


def ranks_systems_only(row: AspectRow) -> bool:
    """A within-CRS figure whose CI contains 0: the evaluator's agreement comes from telling CRSs apart."""
    return (
        row.statistic == "within_pearson"
        and row.value is not None
        and row.ci_low is not None
        and row.ci_high is not None
        and row.ci_low <= 0.0 <= row.ci_high
    )


class AspectRow(BaseModel):
    """One figure: an evaluator's agreement with humans on one aspect, in one group, by one statistic.

    `n`: the pairs behind it (assistant turns or conversations; systems for system-level figures);
    `n_conversations` and `n_systems`: the conversations and CRSs they come from. `value` None means
    not measured (see `note`), never 0.
    """

    evaluator: str
    source: Source
    group: str
    aspect: str
    level: Literal["turn", "dialogue"]
    statistic: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    n_conversations: int | None = None
    n_systems: int | None = None
    note: str | None = None
    best: bool = False


def _finite(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def official(pred: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(Pearson, Spearman) exactly as the official rule computes them; NaN where the rule gives NaN."""
    from scipy.stats import pearsonr, spearmanr

    pred = np.asarray(pred, dtype=float)
    gold = np.asarray(gold, dtype=float)
    if pred.size < 2 or np.isnan(pred).any() or np.isnan(gold).any():
        return float("nan"), float("nan")
    if np.all(pred == pred[0]) or np.all(gold == gold[0]):
        return float("nan"), float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(pearsonr(pred, gold)[0]), float(spearmanr(pred, gold)[0])


# ---------------------------------------------------------------- weighted statistics (bootstrap)


def weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson r per row of the weights `w` (draws x pairs); `x`, `y` are vectors or draws x pairs."""
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=1) / total
        my = (w * y).sum(axis=1) / total
        dx = x - mx[:, None]
        dy = y - my[:, None]
        cov = (w * dx * dy).sum(axis=1)
        vx = (w * dx * dx).sum(axis=1)
        vy = (w * dy * dy).sum(axis=1)
        r = cov / np.sqrt(vx * vy)
        tiny_x = vx <= 1e-12 * (w * x * x).sum(axis=1)  # constant in this sample (up to rounding)
        tiny_y = vy <= 1e-12 * (w * y * y).sum(axis=1)
    r[tiny_x | tiny_y | ~np.isfinite(r)] = np.nan
    return np.clip(r, -1.0, 1.0)


def weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Average ranks of `values` in each expanded sample (row of integer weights `w`), per pair."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    group_of = np.empty(values.size, dtype=int)
    group_of[order] = np.cumsum(np.r_[True, ordered[1:] != ordered[:-1]]) - 1
    group_weight = np.add.reduceat(w[:, order], starts, axis=1)
    before = np.cumsum(group_weight, axis=1) - group_weight
    group_rank = before + (group_weight + 1.0) / 2.0
    return group_rank[:, group_of]


def weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spearman rho per row of the weights: Pearson of the weighted average ranks."""
    return weighted_pearson(weighted_ranks(x, w), weighted_ranks(y, w), w)


def kendall_tau_b_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Kendall tau-b between the columns of `a` and `b` for every row (few columns: systems)."""
    i, j = np.triu_indices(a.shape[1], k=1)
    sa = np.sign(a[:, i] - a[:, j])
    sb = np.sign(b[:, i] - b[:, j])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = (sa * sb).sum(axis=1) / np.sqrt((sa != 0).sum(axis=1) * (sb != 0).sum(axis=1))
    tau[~np.isfinite(tau)] = np.nan
    return tau


def _rank_rows(a: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=1)


# ---------------------------------------------------------------- resamples


class Resamples:
    """Conversation multiplicities for `resamples` bootstrap draws, stratified by system (seeded)."""

    def __init__(self, conversations: pd.Series, resamples: int, seed: int) -> None:
        """`conversations`: system per conversation ID (index = conversation IDs of one group)."""
        self.ids = list(conversations.index)
        self.position = {cid: i for i, cid in enumerate(self.ids)}
        counts = np.zeros((max(resamples, 0), len(self.ids)), dtype=float)
        rng = np.random.default_rng(seed)
        systems = conversations.to_numpy()
        for system in sorted(set(systems.tolist())):
            members = np.flatnonzero(systems == system)
            if resamples <= 0:
                continue
            picks = members[rng.integers(0, members.size, size=(resamples, members.size))]
            rows = np.repeat(np.arange(resamples), members.size)
            np.add.at(counts, (rows, picks.ravel()), 1.0)
        self.counts = counts

    @property
    def draws(self) -> int:
        return self.counts.shape[0]

    def weights(self, conversation_ids: pd.Series) -> np.ndarray:
        """Draws x pairs: each pair weighted by its conversation's multiplicity."""
        index = conversation_ids.map(self.position).to_numpy()
        return self.counts[:, index]


# ---------------------------------------------------------------- figures of one evaluator


def _ci(draws: np.ndarray | None, value: float | None) -> tuple[float | None, float | None]:
    if draws is None or value is None or draws.size == 0:
        return None, None
    return _percentile_ci([float(v) for v in draws])


def _within(pairs: pd.DataFrame) -> tuple[dict[str, float], int, int, int]:
    """Per-statistic n-weighted mean over systems of the in-system correlation; (figures, n pairs, systems used, systems)."""
    sums = {"within_pearson": 0.0, "within_spearman": 0.0}
    weights = {"within_pearson": 0, "within_spearman": 0}
    used = 0
    systems = 0
    for _, part in pairs.groupby("system", sort=True):
        systems += 1
        pearson, spearman = official(part["pred"].to_numpy(), part["gold"].to_numpy())
        if np.isfinite(pearson):
            sums["within_pearson"] += pearson * len(part)
            weights["within_pearson"] += len(part)
            used += 1
        if np.isfinite(spearman):
            sums["within_spearman"] += spearman * len(part)
            weights["within_spearman"] += len(part)
    figures = {k: sums[k] / weights[k] if weights[k] else float("nan") for k in sums}
    return figures, weights["within_pearson"], used, systems


def _within_draws(pairs: pd.DataFrame, w: np.ndarray) -> dict[str, np.ndarray]:
    num = {"within_pearson": np.zeros(w.shape[0]), "within_spearman": np.zeros(w.shape[0])}
    den = {"within_pearson": np.zeros(w.shape[0]), "within_spearman": np.zeros(w.shape[0])}
    systems = pairs["system"].to_numpy()
    x = pairs["pred"].to_numpy(dtype=float)
    y = pairs["gold"].to_numpy(dtype=float)
    for system in sorted(set(systems.tolist())):
        cols = np.flatnonzero(systems == system)
        ws = w[:, cols]
        size = ws.sum(axis=1)
        for key, fn in (("within_pearson", weighted_pearson), ("within_spearman", weighted_spearman)):
            r = fn(x[cols], y[cols], ws)
            ok = np.isfinite(r)
            num[key][ok] += r[ok] * size[ok]
            den[key][ok] += size[ok]
    with np.errstate(invalid="ignore", divide="ignore"):
        return {k: np.where(den[k] > 0, num[k] / den[k], np.nan) for k in num}


def _system_figures(means: pd.DataFrame) -> dict[str, float]:
    from scipy.stats import kendalltau

    if len(means) < 2:
        return {k: float("nan") for k in SYSTEM}
    pearson, spearman = official(means["pred"].to_numpy(), means["gold"].to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau = float(kendalltau(means["pred"], means["gold"], variant="b")[0])
    return {"system_pearson": pearson, "system_spearman": spearman, "system_kendall": tau}


def _system_draws(pairs: pd.DataFrame, w: np.ndarray) -> dict[str, np.ndarray]:
    systems = pairs["system"].to_numpy()
    x = pairs["pred"].to_numpy(dtype=float)
    y = pairs["gold"].to_numpy(dtype=float)
    names = sorted(set(systems.tolist()))
    mx = np.empty((w.shape[0], len(names)))
    my = np.empty_like(mx)
    for k, system in enumerate(names):
        cols = np.flatnonzero(systems == system)
        size = w[:, cols].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mx[:, k] = (w[:, cols] @ x[cols]) / size
            my[:, k] = (w[:, cols] @ y[cols]) / size
    ones = np.ones_like(mx)
    return {
        "system_pearson": weighted_pearson(mx, my, ones),
        "system_spearman": weighted_pearson(_rank_rows(mx), _rank_rows(my), ones),
        "system_kendall": kendall_tau_b_rows(mx, my),
    }


def evaluator_rows(
    evaluator: str,
    source: Source,
    group: str,
    aspect: str,
    level: Literal["turn", "dialogue"],
    pairs: pd.DataFrame,
    resamples: Resamples | None,
    *,
    within_crs: bool = True,
) -> list[AspectRow]:
    """Every statistic of one evaluator on one aspect in one group.

    `pairs` has columns conversation_id, system, pred, gold (one row per paired turn or conversation,
    missing pairs already dropped). `within_crs=False`: an evaluator that knows only the CRS (its
    within-CRS figures are left empty: any value would be an artefact of how it was made out of fold).
    """
    n = len(pairs)
    n_conv = int(pairs["conversation_id"].nunique()) if n else 0
    base = {"evaluator": evaluator, "source": source, "group": group, "aspect": aspect, "level": level}
    pred = pairs["pred"].to_numpy(dtype=float)
    gold = pairs["gold"].to_numpy(dtype=float)
    has_nan = bool(np.isnan(pred).any())
    pearson, spearman = official(pred, gold)
    within, within_n, used, n_sys = _within(pairs) if n else ({k: float("nan") for k in WITHIN}, 0, 0, 0)
    means = pairs.groupby("system")[["pred", "gold"]].mean() if n else pd.DataFrame(columns=["pred", "gold"])
    system = _system_figures(means)
    point: dict[str, float] = {"pearson": pearson, "spearman": spearman, **within, **system}

    draws: dict[str, np.ndarray] = {}
    if resamples is not None and resamples.draws and n >= 2 and not has_nan:
        w = resamples.weights(pairs["conversation_id"])
        draws["pearson"] = weighted_pearson(pred, gold, w)
        draws["spearman"] = weighted_spearman(pred, gold, w)
        draws.update(_within_draws(pairs, w))
        if len(means) >= 2:
            draws.update(_system_draws(pairs, w))

    def note(statistic: str) -> str | None:
        if statistic in WITHIN and not within_crs:
            return NO_WITHIN
        if n == 0:
            return "no pairs: no prediction matches a rated turn or conversation"
        if has_nan:
            return "a prediction is NaN: the official rule gives NaN"
        if statistic in WITHIN and used < n_sys:
            return f"{n_sys - used} of {n_sys} CRSs left out: constant prediction or rating inside them"
        if statistic in SYSTEM and len(means) < 3:
            return f"only {len(means)} CRSs"
        if not np.isfinite(point[statistic]):
            return "undefined: constant prediction or rating, or fewer than two pairs"
        return None

    rows = []
    for statistic in STATISTICS:
        value = _finite(point[statistic]) if within_crs or statistic not in WITHIN else None
        low, high = _ci(draws.get(statistic), value)
        if statistic in SYSTEM:
            size, systems = len(means), len(means)
        elif statistic in WITHIN:
            size, systems = within_n, used
        else:
            size, systems = n, int(pairs["system"].nunique()) if n else 0
        rows.append(
            AspectRow(
                **base,
                statistic=statistic,
                value=value,
                ci_low=low,
                ci_high=high,
                n=size,
                n_conversations=n_conv,
                n_systems=systems,
                note=note(statistic),
            )
        )
    return rows


def pair(gold: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """Gold and predictions of one aspect joined on (conversation_id, turn_ind); unpaired rows dropped.

    `gold`: conversation_id, turn_ind, system, group, gold; `pred`: conversation_id, turn_ind, pred
    (turn_ind -1 for a dialogue aspect). A repeated prediction key keeps its mean.
    """
    if pred.empty or gold.empty:
        return gold.iloc[0:0].assign(pred=pd.Series(dtype=float))
    pred = pred.groupby(["conversation_id", "turn_ind"], as_index=False)["pred"].mean()
    return gold.merge(pred, on=["conversation_id", "turn_ind"], how="inner")


def mark_best(rows: list[AspectRow]) -> list[AspectRow]:
    """Mark the highest value per (group, aspect, statistic) across every evaluator and source (ties all)."""
    best: dict[tuple[str, str, str], float] = {}
    for row in rows:
        if row.value is not None:
            key = (row.group, row.aspect, row.statistic)
            best[key] = max(best.get(key, -np.inf), round(row.value, 3))
    for row in rows:
        key = (row.group, row.aspect, row.statistic)
        row.best = row.value is not None and round(row.value, 3) == best.get(key)
    return rows


PUBLISHED_GROUPS = {"CRSArena-Eval_RD": "redial", "CRSArena-Eval_KG": "opendialkg"}
"""The halves of the published tables (baselines.json) and the dataset group each one is."""


def published_rows(table: dict, levels: dict[str, Literal["turn", "dialogue"]]) -> list[AspectRow]:
    """Rows for published figures (`baselines.json`: half -> evaluator -> aspect -> pearson_r/spearman_rho).

    Cited as published: values only, no n or CI; a figure the table leaves empty stays None.
    """
    rows = []
    for half, evaluators in table.items():
        group = PUBLISHED_GROUPS.get(half, half.rsplit("_", 1)[-1].lower())
        if not isinstance(evaluators, dict):
            continue
        for evaluator, aspects in evaluators.items():
            if not isinstance(aspects, dict):
                continue
            for aspect_name, figures in aspects.items():
                name = canonical(str(aspect_name))
                if name not in levels or not isinstance(figures, dict):
                    continue
                for statistic, key in (("pearson", "pearson_r"), ("spearman", "spearman_rho")):
                    value = figures.get(key)
                    rows.append(
                        AspectRow(
                            evaluator=str(evaluator),
                            source="published",
                            group=group,
                            aspect=name,
                            level=levels[name],
                            statistic=statistic,
                            value=float(value) if isinstance(value, (int, float)) else None,
                            note=None if isinstance(value, (int, float)) else "not reported",
                        )
                    )
    return rows


class EvaluatorInfo(BaseModel):
    """One evaluator in the table: where its figures come from and how many predictions it had."""

    name: str
    source: Source
    origin: str = Field(description="the file, judge or rule its predictions come from")
    predictions: int | None = None
    failed: int = Field(default=0, description="judgments without a value (they pair with nothing)")
    note: str | None = None


ASPECT_CSV_COLUMNS = [
    "evaluator",
    "source",
    "group",
    "aspect",
    "level",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "n",
    "n_conversations",
    "n_systems",
    "best",
    "note",
]


class AspectMetaEvalResult(BaseModel):
    """Everything the aspect meta-evaluation measured, with the settings that produced it."""

    path: str
    aspects: list[str]
    groups: list[str]
    evaluators: list[EvaluatorInfo]
    rows: list[AspectRow]
    gold: dict[str, int] = Field(description="rated pairs per aspect (turns or conversations)")
    n_conversations: int
    published_source: str | None = None
    notes: list[str] = Field(default_factory=list)
    resamples: int
    seed: int
    ci_method: str = CI_METHOD
    left_out: list[LeftOut] = Field(default_factory=list, description="conversations without a rating, per input")
    output: str | None = None
    files: list[str] = Field(default_factory=list)
    in_training: int | None = Field(
        None, description="conversations of the input a given learned model was trained on (None: no model given)"
    )
    training_included: bool = Field(False, description="whether those conversations are in the figures")

    def systems_only(self, group: str) -> dict[str, list[str]]:
        """Per evaluator, the aspects whose within-CRS CI contains 0 (it ranks systems, not conversations)."""
        out: dict[str, list[str]] = {}
        for row in self.rows:
            if row.group == group and ranks_systems_only(row):
                out.setdefault(row.evaluator, []).append(row.aspect)
        return out

    def table(self) -> pd.DataFrame:
        """The rows in meta_eval.csv's columns (one figure per row)."""
        return pd.DataFrame([r.model_dump() for r in self.rows], columns=ASPECT_CSV_COLUMNS)

    def wide(self, group: str, statistics: tuple[str, ...], *, ci: bool = False) -> pd.DataFrame:
        """Evaluators x (aspect, statistic) for one group; the best figure of a column carries a '*'."""
        order = {e.name: i for i, e in enumerate(self.evaluators)}
        cells: dict[str, dict[str, str]] = {}
        for row in self.rows:
            if row.group != group or row.statistic not in statistics:
                continue
            label = f"{row.evaluator} ({row.source})"
            text = "–" if row.value is None else f"{row.value:.3f}{'*' if row.best else ''}"
            if ci and row.value is not None and row.ci_low is not None and row.ci_high is not None:
                text += f" [{row.ci_low:.2f}, {row.ci_high:.2f}]"
            if ranks_systems_only(row):
                text += " †"
            column = row.aspect if len(statistics) == 1 else f"{row.aspect} {SHORT.get(row.statistic, row.statistic)}"
            cells.setdefault(label, {})[column] = text
        columns = [a if len(statistics) == 1 else f"{a} {SHORT.get(s, s)}" for a in self.aspects for s in statistics]
        labels = sorted(cells, key=lambda k: (order.get(k.rsplit(" (", 1)[0], len(order)), k))
        data = [{"evaluator": label, **{c: cells[label].get(c, "–") for c in columns}} for label in labels]
        return pd.DataFrame(data, columns=["evaluator", *columns])


SHORT = {
    "pearson": "r",
    "spearman": "rho",
    "within_pearson": "r within",
    "within_spearman": "rho within",
    "system_pearson": "r systems",
    "system_spearman": "rho systems",
    "system_kendall": "tau systems",
}
