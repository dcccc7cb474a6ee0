"""Simulator fidelity: how far simulated conversations are from human ones, feature by feature.

Per conversation we measure simple, documented features of the user side (`conversation_features`):
conversation length in utterances, mean words per user utterance, distinct-1/2 of the user's text,
and the shares of user turns that ask a question, reject or accept a recommendation (lexical cues,
see the lists below: English, crude on purpose, identical for both sides). Each numeric feature is
compared by the Kolmogorov-Smirnov statistic (0 = same distribution, 1 = disjoint) and the
Wasserstein distance (in the feature's own unit); annotated user dialogue acts by the Jensen-Shannon
divergence of their intent distributions (base 2, 0..1). CIs resample each side's conversations.
Note that distances between finite samples are above 0 even for the same source (KS of two
samples of 25 from one distribution is typically 0.1-0.3).

A discriminator (logistic regression on the numeric features, stratified k-fold, seeded) tries to
tell simulated from human conversations: ROC AUC 0.5 means it cannot, 1 means it always can.

Context baselines: the same distances and discriminator between two *human* populations that differ
only in context (ReDial vs INSPIRED seekers; people who talked to a human recommender vs people who
talked to CRSs). A feature on which the simulated users are further from humans than such human
populations are from each other says something about the user; one on which they are not may be
about the partner or the setting (`context_readings`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, Field

from usersimcrs.analysis.left_out import LeftOut
from usersimcrs.analysis.two_sample import ks_statistic as two_sample_ks
from usersimcrs.analysis.two_sample import roc_auc
from usersimcrs.core.dialogue import USER, Dialogue

NUMERIC_FEATURES = [
    "utterances",
    "user_words",
    "distinct_1",
    "distinct_2",
    "question_share",
    "reject_share",
    "accept_share",
]
ACTS = "user_dialogue_acts"
MIN_ACTS = 5

_WORD = re.compile(r"[a-z0-9']+")
QUESTION_STARTS = (
    "what",
    "which",
    "who",
    "whom",
    "whose",
    "where",
    "when",
    "why",
    "how",
    "can",
    "could",
    "would",
    "will",
    "do",
    "does",
    "did",
    "is",
    "are",
    "was",
    "were",
    "have",
    "has",
    "any",
    "should",
)
ACCEPT_CUES = (
    "sounds good",
    "sounds great",
    "sounds interesting",
    "i'll watch",
    "i will watch",
    "i'll check",
    "i will check",
    "will check it out",
    "i'll take",
    "i'll try",
    "i like it",
    "i love it",
    "i like that",
    "that's great",
    "that is great",
    "great choice",
    "good choice",
    "perfect",
    "i'd like to watch",
    "i want to watch",
    "i'll go with",
    "i have not seen",
    "haven't seen it",
    "thank you",
    "thanks",
)
REJECT_CUES = (
    "not interested",
    "don't like",
    "do not like",
    "didn't like",
    "did not like",
    "don't want",
    "do not want",
    "no thanks",
    "no thank you",
    "already seen",
    "already watched",
    "seen it",
    "seen that",
    "watched it",
    "something else",
    "another one",
    "anything else",
    "not really",
    "not what i",
    "not quite",
    "what else",
    "something different",
    "not that",
    "hate",
    "boring",
    "not a fan",
    "doesn't sound",
    "does not sound",
    "not good",
    "wrong",
    "that's not",
    "that is not",
)


def words(text: str) -> list[str]:
    """Lower-cased word tokens (letters, digits, apostrophes)."""
    return _WORD.findall(text.lower())


def is_question(text: str) -> bool:
    """A question mark, or a first word that opens English questions (what, how, can, do, ...)."""
    tokens = words(text)
    return "?" in text or bool(tokens and tokens[0] in QUESTION_STARTS)


def has_cue(text: str, cues: Sequence[str]) -> bool:
    """True when one of the phrases occurs in the lower-cased text at word boundaries."""
    lowered = " " + " ".join(words(text)) + " "
    return any(f" {cue} " in lowered for cue in cues)


def is_reject(text: str) -> bool:
    """A reject cue, or a turn that opens with a bare 'no'."""
    tokens = words(text)
    return has_cue(text, REJECT_CUES) or bool(tokens and tokens[0] in ("no", "nope", "nah"))


def distinct_n(token_lists: Sequence[Sequence[str]], n: int) -> float | None:
    """Distinct n-grams / all n-grams over the given utterances (None without any n-gram)."""
    grams = [tuple(tokens[i : i + n]) for tokens in token_lists for i in range(len(tokens) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def _share(flags: Sequence[bool]) -> float | None:
    return float(np.mean(flags)) if flags else None


def conversation_features(dialogue: Dialogue) -> dict[str, float | None]:
    """The numeric features of one conversation (None where the conversation has no user turn)."""
    user = [u.text for u in dialogue.utterances if u.participant == USER]
    tokens = [words(text) for text in user]
    return {
        "utterances": float(len(dialogue.utterances)),
        "user_words": float(np.mean([len(t) for t in tokens])) if tokens else None,
        "distinct_1": distinct_n(tokens, 1),
        "distinct_2": distinct_n(tokens, 2),
        "question_share": _share([is_question(t) for t in user]),
        "reject_share": _share([is_reject(t) for t in user]),
        "accept_share": _share([has_cue(t, ACCEPT_CUES) for t in user]),
    }


def user_intents(dialogues: Sequence[Dialogue]) -> Counter[str]:
    """How often each intent occurs among the user turns' dialogue acts."""
    counts: Counter[str] = Counter()
    for dialogue in dialogues:
        for utterance in dialogue.utterances:
            if utterance.participant == USER:
                counts.update(act.intent for act in utterance.dialogue_acts)
    return counts


class FidelityRow(BaseModel):
    """One distance (or the discriminator) for one simulator; value None when not measured (see note)."""

    simulator: str
    feature: str
    statistic: str
    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n_simulated: int
    n_human: int
    simulated_mean: float | None = None
    human_mean: float | None = None
    note: str | None = None


def _clean(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """scipy's ks_2samp statistic, without the p-value it would compute and we do not use (20x faster)."""
    return two_sample_ks(a, b)


def wasserstein(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import wasserstein_distance

    return float(wasserstein_distance(a, b))


def js_divergence(a: Counter[str], b: Counter[str]) -> float | None:
    """Jensen-Shannon divergence (base 2, 0..1) of two count distributions over the union of their keys."""
    from scipy.spatial.distance import jensenshannon

    keys = sorted(set(a) | set(b))
    p = np.asarray([a.get(k, 0) for k in keys], dtype=float)
    q = np.asarray([b.get(k, 0) for k in keys], dtype=float)
    if p.sum() == 0 or q.sum() == 0:
        return None
    return float(jensenshannon(p / p.sum(), q / q.sum(), base=2) ** 2)


def _two_sample_ci(
    statistic, a: Sequence | np.ndarray, b: Sequence | np.ndarray, *, resamples: int, seed: int
) -> tuple[float | None, float | None]:
    """Percentile CI (95%) of statistic(a*, b*) with each side resampled independently (seeded)."""
    if resamples <= 0 or len(a) < 2 or len(b) < 2:
        return None, None
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        ia, ib = rng.integers(0, len(a), size=len(a)), rng.integers(0, len(b), size=len(b))
        # numeric samples arrive as arrays (one fancy index, same draws as the list path)
        sa = a[ia] if isinstance(a, np.ndarray) else [a[i] for i in ia]
        sb = b[ib] if isinstance(b, np.ndarray) else [b[i] for i in ib]
        value = statistic(sa, sb)
        if value is not None:
            draws.append(value)
    if len(draws) < resamples / 2:
        return None, None
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def feature_distances(
    simulator: str, simulated: pd.DataFrame, human: pd.DataFrame, *, resamples: int = 1000, seed: int = 0
) -> list[FidelityRow]:
    """KS and Wasserstein per numeric feature, with bootstrap CIs."""
    rows = []
    for j, feature in enumerate(NUMERIC_FEATURES):
        a, b = _clean(simulated[feature].tolist()), _clean(human[feature].tolist())
        sim_mean = float(a.mean()) if a.size else None
        human_mean = float(b.mean()) if b.size else None
        for k, (name, fn) in enumerate((("ks", ks_statistic), ("wasserstein", wasserstein))):
            if a.size == 0 or b.size == 0:
                rows.append(
                    FidelityRow(
                        simulator=simulator,
                        feature=feature,
                        statistic=name,
                        value=None,
                        n_simulated=int(a.size),
                        n_human=int(b.size),
                        note="no values on one side",
                        simulated_mean=sim_mean,
                        human_mean=human_mean,
                    )
                )
                continue
            low, high = _two_sample_ci(
                fn,
                a,
                b,
                resamples=resamples,
                seed=seed + 10 * j + k,
            )
            rows.append(
                FidelityRow(
                    simulator=simulator,
                    feature=feature,
                    statistic=name,
                    value=fn(a, b),
                    ci_low=low,
                    ci_high=high,
                    n_simulated=int(a.size),
                    n_human=int(b.size),
                    simulated_mean=sim_mean,
                    human_mean=human_mean,
                )
            )
    return rows


def act_distance(
    simulator: str, simulated: Sequence[Dialogue], human: Sequence[Dialogue], *, resamples: int = 1000, seed: int = 0
) -> FidelityRow:
    """JS divergence of the user intent distributions; not checked unless both sides are annotated."""
    a, b = user_intents(simulated), user_intents(human)

    def row(value: float | None, low: float | None = None, high: float | None = None, note: str | None = None):
        return FidelityRow(
            simulator=simulator,
            feature=ACTS,
            statistic="js_divergence",
            value=value,
            ci_low=low,
            ci_high=high,
            n_simulated=len(simulated),
            n_human=len(human),
            note=note,
        )

    if sum(a.values()) < MIN_ACTS or sum(b.values()) < MIN_ACTS:
        side = "simulated" if sum(a.values()) < MIN_ACTS else "human"
        return row(None, note=f"not checked: the {side} conversations carry fewer than {MIN_ACTS} user dialogue acts")
    per_a = [user_intents([d]) for d in simulated]
    per_b = [user_intents([d]) for d in human]
    low, high = _two_sample_ci(
        lambda x, y: js_divergence(sum(x, Counter()), sum(y, Counter())), per_a, per_b, resamples=resamples, seed=seed
    )
    return row(js_divergence(a, b), low, high)


def discriminator_auc(
    simulator: str,
    simulated: pd.DataFrame,
    human: pd.DataFrame,
    *,
    seed: int = 0,
    folds: int = 5,
    resamples: int = 1000,
) -> FidelityRow:
    """Cross-validated ROC AUC of a logistic regression telling simulated (1) from human (0) conversations.

    Features: the numeric features, median-imputed and standardised inside each fold. The CI
    resamples the out-of-fold predictions (it does not refit), so it shows the evaluation noise only.
    """
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = pd.concat([simulated[NUMERIC_FEATURES], human[NUMERIC_FEATURES]], ignore_index=True).astype(float)
    y = np.asarray([1] * len(simulated) + [0] * len(human))

    def row(value: float | None, low: float | None = None, high: float | None = None, note: str | None = None):
        return FidelityRow(
            simulator=simulator,
            feature="all",
            statistic="discriminator_auc",
            value=value,
            ci_low=low,
            ci_high=high,
            n_simulated=len(simulated),
            n_human=len(human),
            note=note,
        )

    k = min(folds, len(simulated), len(human))
    if k < 2:
        return row(None, note="needs at least 2 conversations on each side")
    x = x.loc[:, x.notna().any()]
    model = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(), LogisticRegression(max_iter=1000))
    splitter = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    proba = cross_val_predict(model, x, y, cv=splitter, method="predict_proba")[:, 1]
    value = roc_auc(y, proba)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        idx = rng.integers(0, len(y), size=len(y))
        if len(set(y[idx])) == 2:
            draws.append(roc_auc(y[idx], proba[idx]))
    low, high = (float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))) if draws else (None, None)
    return row(value, low, high, note=f"logistic regression, {k}-fold stratified CV, seed {seed}")


def discriminator_verdict(row: FidelityRow) -> str:
    """One line on what a discriminator AUC and its CI say (or why there is none)."""
    if row.value is None:
        return f"discriminator not run ({row.note})"
    figure = f"discriminator AUC {row.value:.3f}"
    if row.ci_low is None or row.ci_high is None:
        return f"{figure} (no CI), n {row.n_simulated} simulated / {row.n_human} human"
    figure += f" [{row.ci_low:.3f}, {row.ci_high:.3f}], n {row.n_simulated} simulated / {row.n_human} human"
    if row.ci_low <= 0.5 <= row.ci_high:
        return f"simulated users cannot be told from humans by these features (CI spans 0.5); {figure}"
    if row.ci_low > 0.5:
        return f"simulated users are told apart from humans; {figure}"
    return f"below 0.5: a cross-validation artefact of small samples, not 'more human than humans'; {figure}"


CSV_COLUMNS = [
    "simulator",
    "feature",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "n_simulated",
    "n_human",
    "simulated_mean",
    "human_mean",
]
FIDELITY_CSV = "fidelity.csv"
FEATURES_CSV = "fidelity_features.csv"
HUMAN = "human"


CONTEXT = "context: "
ABOUT_USER = "about the user"
ABOUT_PARTNER = "may be about the partner"
NOT_CHECKED = "not checked"


def context_baseline(
    a_name: str, a: pd.DataFrame, b_name: str, b: pd.DataFrame, *, why: str, seed: int = 0, resamples: int = 1000
) -> list[FidelityRow]:
    """Feature distances and the discriminator AUC between two human populations (a as 'simulated', b as 'human').

    Rows are named ``context: A vs B`` and the AUC's note says what the populations differ in (`why`).
    """
    name = f"{CONTEXT}{a_name} vs {b_name}"
    rows = feature_distances(name, a, b, resamples=resamples, seed=seed)
    auc = discriminator_auc(name, a, b, seed=seed, resamples=resamples)
    auc.note = f"context baseline: {why}" + (f"; {auc.note}" if auc.note else "")
    return [*rows, auc]


class FeatureReading(BaseModel):
    """Whether one feature's distance from humans is about the simulated user or may be about the partner."""

    simulator: str
    feature: str
    simulated_ks: float | None
    context_ks: float | None = Field(description="the largest KS between two human populations of the baselines")
    context: str | None = Field(None, description="the baseline that gave context_ks")
    reading: str


def context_readings(rows: Sequence[FidelityRow], baselines: Sequence[FidelityRow]) -> list[FeatureReading]:
    """Per simulator and feature: about the user when even the KS's lower CI bound exceeds every context baseline's
    KS (human populations in different settings agree more closely than this); else it may be about the partner."""
    context: dict[str, tuple[float, str]] = {}
    for row in baselines:
        if row.statistic == "ks" and row.value is not None:
            best = context.get(row.feature)
            if best is None or row.value > best[0]:
                context[row.feature] = (row.value, row.simulator.removeprefix(CONTEXT))
    out = []
    for row in rows:
        if row.statistic != "ks":
            continue
        ctx_value, ctx_name = context.get(row.feature, (None, None))
        if row.value is None or ctx_value is None:
            reading = NOT_CHECKED
        else:
            low = row.ci_low if row.ci_low is not None else row.value
            reading = ABOUT_USER if low > ctx_value else ABOUT_PARTNER
        out.append(
            FeatureReading(
                simulator=row.simulator,
                feature=row.feature,
                simulated_ks=row.value,
                context_ks=ctx_value,
                context=ctx_name,
                reading=reading,
            )
        )
    return out


def readings_text(readings: Sequence[FeatureReading], simulator: str) -> list[str]:
    """Lines that say which differences are about the user and which may be about the partner."""
    mine = [r for r in readings if r.simulator == simulator]
    lines = []
    user = [f"{r.feature} (KS {r.simulated_ks:.2f} > {r.context_ks:.2f})" for r in mine if r.reading == ABOUT_USER]
    partner = [
        f"{r.feature} (KS {r.simulated_ks:.2f}, context {r.context_ks:.2f})" for r in mine if r.reading == ABOUT_PARTNER
    ]
    if user:
        lines.append(
            f"{simulator}: about the user (further from humans than human populations in different settings are "
            f"from each other): {', '.join(user)}"
        )
    if partner:
        lines.append(
            f"{simulator}: may be about the partner or setting (human populations that differ only in context are "
            f"as far apart): {', '.join(partner)}"
        )
    return lines


def baseline_verdict(baselines: Sequence[FidelityRow]) -> str:
    """The context baselines' AUCs on one line, to read beside a simulator's AUC."""
    parts = []
    for row in baselines:
        if row.statistic != "discriminator_auc":
            continue
        label = row.simulator.removeprefix(CONTEXT)
        if row.value is None:
            parts.append(f"{label}: not run ({row.note})")
            continue
        ci = f" [{row.ci_low:.3f}, {row.ci_high:.3f}]" if row.ci_low is not None and row.ci_high is not None else ""
        parts.append(f"{label}: AUC {row.value:.3f}{ci} (n {row.n_simulated} / {row.n_human})")
    return "context baseline (the same discriminator on two human populations): " + "; ".join(parts) if parts else ""


class FidelityResult(BaseModel):
    """Every distance and discriminator AUC, per simulated run, with the settings that produced them."""

    simulated: str
    human: str
    groups: list[str]
    n_human: int
    rows: list[FidelityRow]
    resamples: int
    seed: int
    ci_method: str = "percentile bootstrap, 95%, each side resampled"
    baselines: list[FidelityRow] = Field(
        default_factory=list, description="context baselines: the same figures between two human populations"
    )
    readings: list[FeatureReading] = Field(default_factory=list)
    reference: str | None = Field(None, description="the human reference file read (bundled by default)")
    human_holdout: float = 0.0
    left_out: list[LeftOut] = Field(default_factory=list, description="conversations not compared, and why")
    output: str | None = None
    files: list[str] = Field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """Simulator rows, then the context baselines; `reading` on each simulator KS row."""
        reading = {(r.simulator, r.feature): r.reading for r in self.readings}
        records = [
            {**r.model_dump(), "reading": reading.get((r.simulator, r.feature)) if r.statistic == "ks" else None}
            for r in [*self.rows, *self.baselines]
        ]
        return pd.DataFrame(records, columns=[*CSV_COLUMNS, "note", "reading"])
