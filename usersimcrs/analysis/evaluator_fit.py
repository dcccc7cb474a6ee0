"""Fitting the learned evaluator (scikit-learn) and estimating its agreement by cross-validation.

Per turn aspect a ridge regression over the standardised turn features and the TF-IDF weighted words
of three text blocks; per dialogue aspect a ridge over the means of the turn models' out-of-fold
predictions and, damped, the means of the turn features and the whole-conversation counts (stacking).
Linear models only: gradient-boosted trees (the feature set v2 models) learned which CRS spoke and
carried less to a CRS left out. Each ridge penalty is chosen by cross-validation grouped by CRS
(leave-one-CRS-out over the training CRSs when there are three or more, else 5 folds grouped by
conversation): the pooled out-of-fold Pearson r of the official rule decides, Spearman breaks ties.
The figure that chooses is the one a CRS the model never saw gets; folds that share a CRS reward
recognising the CRS. The fitted numbers go into a plain-data `LearnedModel`.

`cross_validate` estimates how well this whole procedure (selection included) agrees with humans:
each outer fold trains a model on the other folds and predicts its own conversations; grouping
the folds by CRS instead (`by="system"`) asks how it does on a CRS it never saw.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import numpy as np

from usersimcrs.analysis.aspect_agreement import Resamples, evaluator_rows, official
from usersimcrs.core.crsarena_eval import (
    BY_NAME,
    DIALOGUE_ASPECTS,
    TURN_ASPECTS,
    RunFileConversation,
    canonical,
    dataset_of,
    system_of,
    turn_index,
)
from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.errors import DataError
from usersimcrs.judges.learned.features import (
    EXTRA_FEATURES,
    FEATURES_VERSION,
    TEXT_BLOCKS,
    TURN_FEATURES,
    Catalogue,
    ConversationFeatures,
    conversation_features,
    dialogue_feature_names,
    dialogue_matrix,
    load_cues,
)
from usersimcrs.judges.learned.model import (
    FORMAT_VERSION,
    MODEL_FORMAT,
    AspectModel,
    CatalogueFacts,
    Evaluator,
    LearnedModel,
    Linear,
    Standardizer,
    TextBlock,
    TrainingFacts,
    Trees,
)
from usersimcrs.version import __version__

TURN_ALPHAS = (1.0, 3.0, 10.0, 30.0)
DIALOGUE_ALPHAS = (3.0, 10.0, 30.0, 100.0)
MIN_DF = 3
TEXT_WEIGHTS = {"assistant": 1.5, "previous_user": 0.5, "next_user": 1.0}
"""How much each text block counts against the numeric features (the block's TF-IDF rows are scaled)."""
MIN_CONVERSATIONS = 20


@dataclass
class TrainingSet:
    """Rated conversations as the fitting needs them: turn rows, text, gold ratings, groups."""

    conversation_ids: list[str]
    features: list[ConversationFeatures]
    systems: list[str]
    datasets: list[str]
    turn_conversation: np.ndarray
    hand: np.ndarray
    docs: dict[str, list[list[str]]]
    turn_gold: dict[str, np.ndarray]
    dialogue_gold: dict[str, np.ndarray]
    data_sha256: str
    source: str
    dialogues: list[Dialogue] = field(default_factory=list)
    catalogue: Catalogue | None = None
    corpus: list[str] = field(default_factory=list)

    def subset(self, conversations: np.ndarray) -> TrainingSet:
        """The training set restricted to conversations at the given positions (for cross-validation)."""
        keep = set(int(i) for i in conversations)
        rows = np.flatnonzero(np.isin(self.turn_conversation, list(keep)))
        order = sorted(keep)
        remap = {old: new for new, old in enumerate(order)}
        return TrainingSet(
            conversation_ids=[self.conversation_ids[i] for i in order],
            features=[self.features[i] for i in order],
            systems=[self.systems[i] for i in order],
            datasets=[self.datasets[i] for i in order],
            turn_conversation=np.asarray([remap[int(c)] for c in self.turn_conversation[rows]], dtype=int),
            hand=self.hand[rows],
            docs={b: [self.docs[b][r] for r in rows] for b in self.docs},
            turn_gold={a: v[rows] for a, v in self.turn_gold.items()},
            dialogue_gold={a: v[order] for a, v in self.dialogue_gold.items()},
            data_sha256=self.data_sha256,
            source=self.source,
            dialogues=[self.dialogues[i] for i in order] if self.dialogues else [],
            catalogue=self.catalogue,
            corpus=self.corpus,
        )


def _rating(reference: Any, name: str) -> float:
    if not isinstance(reference, dict):
        return np.nan
    for key, value in reference.items():
        if canonical(str(key)) == name and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return np.nan


def data_hash(dialogues: Sequence[Dialogue]) -> str:
    """SHA-256 of what training reads (IDs, speakers, texts, turn indices, ratings), in ID order."""
    digest = hashlib.sha256()
    for d in sorted(dialogues, key=lambda x: x.conversation_id):
        record = {
            "id": d.conversation_id,
            "reference": d.metadata.get("reference"),
            "turns": [
                [u.participant, u.text, u.metadata.get("turn_ind"), u.metadata.get("reference")] for u in d.utterances
            ],
        }
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def training_set(
    dialogues: Sequence[Dialogue], source: str, catalogue: Catalogue | None = None, corpus: Sequence[str] = ()
) -> TrainingSet:
    """The rated conversations of `dialogues` (those with at least one assistant turn) as a TrainingSet;
    `catalogue`: the item catalogue of the recommended-items features; `corpus`: the files `source`
    was converted from."""
    cues = load_cues()
    kept = [d for d in dialogues if any(u.participant == AGENT for u in d.utterances)]
    if len(kept) < MIN_CONVERSATIONS:
        raise DataError(
            f"{source}: {len(kept)} conversations with an assistant turn; training needs {MIN_CONVERSATIONS}"
        )
    features = [conversation_features(d, cues, catalogue) for d in kept]
    turn_gold: dict[str, list[float]] = {a: [] for a in TURN_ASPECTS}
    for d, f in zip(kept, features):
        by_turn = {}
        for i, u in enumerate(d.utterances):
            if u.participant == AGENT:
                by_turn[turn_index(i, u)] = u.metadata.get("reference")
        for turn in f.turn_inds:
            for a in TURN_ASPECTS:
                turn_gold[a].append(_rating(by_turn.get(turn), a))
    dialogue_gold = {a: np.asarray([_rating(d.metadata.get("reference"), a) for d in kept]) for a in DIALOGUE_ASPECTS}
    rated = sum(int(np.isfinite(v).sum()) for v in turn_gold.values()) + sum(
        int(np.isfinite(v).sum()) for v in dialogue_gold.values()
    )
    if not rated:
        raise DataError(
            f"{source}: no CRSArena-Eval ratings on the conversations (convert a rated corpus with "
            "`usersimcrs convert crsarena-eval`)"
        )
    return TrainingSet(
        conversation_ids=[d.conversation_id for d in kept],
        features=features,
        systems=[_system(d) for d in kept],
        datasets=[dataset_of(d.conversation_id) or str(d.metadata.get("dataset") or "all") for d in kept],
        turn_conversation=np.repeat(np.arange(len(kept)), [f.hand.shape[0] for f in features]),
        hand=np.vstack([f.hand for f in features]),
        docs={b: [doc for f in features for doc in f.docs[b]] for b in TEXT_BLOCKS},
        turn_gold={a: np.asarray(v, dtype=float) for a, v in turn_gold.items()},
        dialogue_gold=dialogue_gold,
        data_sha256=data_hash(kept),
        source=source,
        dialogues=list(kept),
        catalogue=catalogue,
        corpus=list(corpus),
    )


def _system(d: Dialogue) -> str:
    crs, part = system_of(d.conversation_id), dataset_of(d.conversation_id)
    return f"{crs}_{part}" if crs and part else d.agent_id


# ---------------------------------------------------------------- design matrices


@dataclass
class TurnDesign:
    """Scaler and vectorizers fitted on some turns, and the design they give any turns."""

    scaler: Any
    vectorizers: dict[str, Any]

    @classmethod
    def fit(cls, hand: np.ndarray, docs: dict[str, list[list[str]]]) -> TurnDesign:
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.preprocessing import StandardScaler

        vectorizers = {}
        for block in TEXT_BLOCKS:
            vectorizer = TfidfVectorizer(analyzer=_identity, min_df=MIN_DF, sublinear_tf=True, norm="l2")
            try:
                vectorizer.fit(docs[block])
            except ValueError:  # no term occurs MIN_DF times: the block adds nothing
                vectorizer = None
            vectorizers[block] = vectorizer
        return cls(scaler=StandardScaler().fit(hand), vectorizers=vectorizers)

    def matrix(self, hand: np.ndarray, docs: dict[str, list[list[str]]]):
        from scipy.sparse import csr_matrix, hstack

        parts = [csr_matrix(self.scaler.transform(hand))]
        for block in TEXT_BLOCKS:
            vectorizer = self.vectorizers[block]
            if vectorizer is not None:
                parts.append(TEXT_WEIGHTS[block] * vectorizer.transform(docs[block]))
        return hstack(parts).tocsr()

    def columns(self, blocks: Sequence[str]) -> np.ndarray:
        """The design's columns of the numeric features and of the given text blocks only."""
        keep = [np.arange(len(self.scaler.mean_))]
        offset = len(self.scaler.mean_)
        for block in TEXT_BLOCKS:
            vectorizer = self.vectorizers[block]
            if vectorizer is None:
                continue
            size = len(vectorizer.idf_)
            if block in blocks:
                keep.append(np.arange(offset, offset + size))
            offset += size
        return np.concatenate(keep)


def _identity(doc: list[str]) -> list[str]:
    return doc


def _ridge(alpha: float):
    from sklearn.linear_model import Ridge

    return Ridge(alpha=alpha)


def _score(pred: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    ok = np.isfinite(gold)
    pearson, spearman = official(pred[ok], gold[ok])
    return (pearson if np.isfinite(pearson) else -np.inf, spearman if np.isfinite(spearman) else -np.inf)


@dataclass
class Selection:
    """The chosen hyper-parameters of one aspect and the out-of-fold figures that chose them."""

    alpha: float
    blend: float
    pearson: float
    spearman: float
    oof: np.ndarray
    n: int


def _select(linear_oof: dict[float, np.ndarray], gold: np.ndarray) -> Selection:
    """The penalty whose out-of-fold predictions agree best with `gold` (Pearson, then Spearman)."""
    best: tuple[tuple[float, float], float, np.ndarray] | None = None
    for alpha, pred in linear_oof.items():
        score = _score(pred, gold)
        if best is None or score > best[0]:
            best = (score, alpha, pred)
    assert best is not None
    (pearson, spearman), alpha, pred = best
    return Selection(alpha, 1.0, pearson, spearman, pred, int(np.isfinite(gold).sum()))


def _folds(groups: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Folds over rows that keep every group (conversation) whole: the groups are shuffled with `seed`
    and dealt out in turn, so fold sizes differ by at most one group."""
    unique = np.unique(groups)
    k = max(2, min(folds, unique.size))
    order = np.random.default_rng(seed).permutation(unique)
    fold_of = {g: i % k for i, g in enumerate(order.tolist())}
    assigned = np.asarray([fold_of[g] for g in groups.tolist()])
    return [(np.flatnonzero(assigned != i), np.flatnonzero(assigned == i)) for i in range(k)]


MIN_SELECTION_SYSTEMS = 3
"""With this many training CRSs or more, hyper-parameters are chosen leaving one CRS out at a time."""


def selection_groups(data: TrainingSet, folds: int) -> tuple[np.ndarray, int, str]:
    """The groups the selection folds keep whole, per conversation, their number of folds and a description:
    the CRSs (one left out at a time) when there are `MIN_SELECTION_SYSTEMS` or more, else conversations."""
    systems = sorted(set(data.systems))
    if len(systems) >= MIN_SELECTION_SYSTEMS:
        index = {s: i for i, s in enumerate(systems)}
        return np.asarray([index[s] for s in data.systems]), len(systems), "leave-one-CRS-out"
    n = len(data.conversation_ids)
    return np.arange(n), folds, f"{folds}-fold cross-validation grouped by conversation (fewer than 3 CRSs)"


def _select_turns(data: TrainingSet, folds: int, seed: int) -> dict[str, Selection]:
    """Inner cross-validation (grouped by CRS, see `selection_groups`) of every turn aspect's (alpha, blend)."""
    aspects = [a for a in TURN_ASPECTS if np.isfinite(data.turn_gold[a]).sum() >= 2]
    linear = {a: {alpha: np.full(len(data.hand), np.nan) for alpha in TURN_ALPHAS} for a in aspects}
    groups, k, _ = selection_groups(data, folds)
    for train, test in _folds(groups[data.turn_conversation], k, seed):
        docs_train = {b: [data.docs[b][i] for i in train] for b in TEXT_BLOCKS}
        docs_test = {b: [data.docs[b][i] for i in test] for b in TEXT_BLOCKS}
        design = TurnDesign.fit(data.hand[train], docs_train)
        x_train, x_test = design.matrix(data.hand[train], docs_train), design.matrix(data.hand[test], docs_test)
        for a in aspects:
            y = data.turn_gold[a][train]
            ok = np.isfinite(y)
            for alpha in TURN_ALPHAS:
                linear[a][alpha][test] = _ridge(alpha).fit(x_train[ok], y[ok]).predict(x_test)
    return {a: _select(linear[a], data.turn_gold[a]) for a in aspects}


@dataclass(frozen=True)
class DialogueInputs:
    """The dialogue-matrix columns a dialogue aspect's ridge reads: the means of the turn models'
    predictions at full weight, and the means of the turn features with the whole-conversation extras
    damped by `FEATURE_DAMPING` (a stronger penalty on them)."""

    predictions: np.ndarray
    features: np.ndarray

    def design(self, scaled: np.ndarray) -> np.ndarray:
        """The ridge's inputs from the standardised dialogue matrix."""
        return np.hstack([scaled[:, self.predictions], FEATURE_DAMPING * scaled[:, self.features]])

    def coefficients(self, coef: np.ndarray, width: int) -> np.ndarray:
        """The ridge's coefficients as coefficients of the standardised dialogue matrix (`width` columns)."""
        out = np.zeros(width)
        out[self.predictions] = coef[: len(self.predictions)]
        out[self.features] = FEATURE_DAMPING * coef[len(self.predictions) :]
        return out


FEATURE_DAMPING = 0.35
"""How much the turn-feature means and extras count beside the mean turn predictions in a dialogue model.
Chosen once among 0.1, 0.2, 0.35 and 1, by leaving one CRS out on the ReDial half (docs/meta-evaluation.md):
at full weight they learned which CRS spoke and ranked the conversations of an unseen CRS worse."""


def dialogue_columns(turn_aspects: Sequence[str]) -> DialogueInputs:
    """The columns of the dialogue matrix a dialogue aspect's ridge reads: the mean of each turn model's
    predictions (the turns' relevance and interestingness carry to another CRS best), the means of the turn
    features (shares of replies that name titles, answer the requested genre, ask, repeat...; the user's
    reactions) and the whole-conversation extras. Not the other aggregates (min, max, first, last) and no
    trees: over 267 conversations those learned which CRS spoke."""
    names = dialogue_feature_names(turn_aspects)
    predictions = {f"mean_pred_{a}" for a in turn_aspects}
    keep = {f"mean_{f}" for f in TURN_FEATURES} | set(EXTRA_FEATURES)
    return DialogueInputs(
        predictions=np.asarray([i for i, name in enumerate(names) if name in predictions], dtype=np.int64),
        features=np.asarray([i for i, name in enumerate(names) if name in keep], dtype=np.int64),
    )


def _dialogue_matrix(data: TrainingSet, turn_predictions: np.ndarray) -> np.ndarray:
    return dialogue_matrix(data.features, turn_predictions)


def _select_dialogues(
    x: np.ndarray, data: TrainingSet, cols: DialogueInputs, folds: int, seed: int
) -> dict[str, Selection]:
    from sklearn.preprocessing import StandardScaler

    aspects = [a for a in DIALOGUE_ASPECTS if np.isfinite(data.dialogue_gold[a]).sum() >= 2]
    linear = {a: {alpha: np.full(len(x), np.nan) for alpha in DIALOGUE_ALPHAS} for a in aspects}
    groups, k, _ = selection_groups(data, folds)
    for train, test in _folds(groups, k, seed):
        scaler = StandardScaler().fit(x[train])
        s_train, s_test = cols.design(scaler.transform(x[train])), cols.design(scaler.transform(x[test]))
        for a in aspects:
            y = data.dialogue_gold[a][train]
            ok = np.isfinite(y)
            for alpha in DIALOGUE_ALPHAS:
                linear[a][alpha][test] = _ridge(alpha).fit(s_train[ok], y[ok]).predict(s_test)
    return {a: _select(linear[a], data.dialogue_gold[a]) for a in aspects}


def _export_trees(model: Any, columns: np.ndarray | None = None) -> Trees:
    """The fitted trees as plain lists; `columns` maps the features they were fitted on to the columns
    of the full matrix (a model fitted on some columns only)."""
    estimators = [stage[0].tree_ for stage in model.estimators_]

    def features(tree: Any) -> list[int]:
        if columns is None:
            return tree.feature.tolist()
        return np.where(tree.feature >= 0, columns[np.maximum(tree.feature, 0)], tree.feature).tolist()

    return Trees(
        init=float(np.asarray(model.init_.constant_).ravel()[0]),
        learning_rate=float(model.learning_rate),
        feature=[features(t) for t in estimators],
        threshold=[t.threshold.tolist() for t in estimators],
        left=[t.children_left.tolist() for t in estimators],
        right=[t.children_right.tolist() for t in estimators],
        value=[t.value[:, 0, 0].tolist() for t in estimators],
    )


def _standardizer(scaler: Any) -> Standardizer:
    return Standardizer(mean=scaler.mean_.tolist(), scale=scaler.scale_.tolist())


def _versions() -> dict[str, str]:
    import scipy
    import sklearn

    return {
        "usersimcrs": __version__,
        "scikit-learn": sklearn.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }


def _ranges(data: TrainingSet) -> dict[str, tuple[float, float]]:
    assistant: list[int] = []
    user: list[int] = []
    for d, f in zip(data.dialogues, data.features):
        for u, n in zip(d.utterances, f.words):
            (assistant if u.participant == AGENT else user).append(n)
    turns = [f.hand.shape[0] for f in data.features]
    out = {}
    for key, values in (("assistant_words", assistant), ("user_words", user), ("assistant_turns", turns)):
        if values:
            low, high = np.percentile(values, [1, 99])
            out[key] = (float(low), float(high))
    return out


def fit(data: TrainingSet, *, folds: int = 5, seed: int = 0) -> LearnedModel:
    """Choose hyper-parameters by grouped cross-validation and fit the final model on all of `data`."""
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits

    # one BLAS thread: the small dense solves here run several times slower when threads contend for cores
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        turn_selection = _select_turns(data, folds, seed)
        turn_aspects = list(turn_selection)
        oof = (
            np.column_stack([turn_selection[a].oof for a in turn_aspects])
            if turn_aspects
            else np.zeros((len(data.hand), 0))
        )
        x_dialogue = _dialogue_matrix(data, oof)
        cols = dialogue_columns(turn_aspects)
        dialogue_selection = _select_dialogues(x_dialogue, data, cols, folds, seed)

        design = TurnDesign.fit(data.hand, data.docs)
        x_turn = design.matrix(data.hand, data.docs)
        blocks = [
            TextBlock(name=b, terms=v.get_feature_names_out().tolist(), idf=v.idf_.tolist())
            for b, v in design.vectorizers.items()
            if v is not None
        ]
        width = len(TURN_FEATURES)

        def turn_linear(y: np.ndarray, alpha: float, reads: Sequence[str] = TEXT_BLOCKS) -> Linear:
            ok = np.isfinite(y)
            keep = design.columns(reads)
            ridge = _ridge(alpha).fit(x_turn[ok][:, keep], y[ok])
            coef = np.zeros(x_turn.shape[1])
            coef[keep] = ridge.coef_
            text, offset = {}, width
            for block in blocks:
                size = len(block.terms)
                if block.name in reads:
                    text[block.name] = (coef[offset : offset + size] * TEXT_WEIGHTS[block.name]).tolist()
                offset += size
            return Linear(intercept=float(ridge.intercept_), features=coef[:width].tolist(), text=text)

        aspects: list[AspectModel] = []
        for a, sel in turn_selection.items():
            y = data.turn_gold[a]
            ok = np.isfinite(y)
            aspects.append(_aspect(a, turn_linear(y, sel.alpha), sel))
        dialogue_scaler = StandardScaler().fit(x_dialogue)
        design_dialogue = cols.design(dialogue_scaler.transform(x_dialogue))
        for a, sel in dialogue_selection.items():
            y = data.dialogue_gold[a]
            ok = np.isfinite(y)
            ridge = _ridge(sel.alpha).fit(design_dialogue[ok], y[ok])
            coef = cols.coefficients(ridge.coef_, x_dialogue.shape[1])
            linear = Linear(intercept=float(ridge.intercept_), features=coef.tolist())
            aspects.append(_aspect(a, linear, sel))

    selections = {**turn_selection, **dialogue_selection}
    _, n_folds, grouping = selection_groups(data, folds)
    salt = hashlib.sha256(f"usersimcrs-ids:{data.data_sha256}:{seed}".encode()).hexdigest()[:16]
    model = LearnedModel(
        format=MODEL_FORMAT,
        format_version=FORMAT_VERSION,
        features_version=FEATURES_VERSION,
        cues_sha256=load_cues().sha256,
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        versions=_versions(),
        training=TrainingFacts(
            data_sha256=data.data_sha256,
            source=data.source,
            n_conversations=len(data.conversation_ids),
            n_turns=int(len(data.hand)),
            n_ratings={a: s.n for a, s in selections.items()},
            systems=sorted(set(data.systems)),
            datasets=sorted(set(data.datasets)),
            unknown_word_share=0.0,
            ranges=_ranges(data),
            id_salt=salt,
            conversation_hashes=sorted(
                hashlib.sha256((salt + cid).encode("utf-8")).hexdigest() for cid in data.conversation_ids
            ),
            corpus=list(data.corpus),
        ),
        catalogue=None
        if data.catalogue is None
        else CatalogueFacts(path=data.catalogue.path, sha256=data.catalogue.sha256, items=data.catalogue.size),
        cv={
            "kind": f"{grouping}, the cross-validation that chose the hyper-parameters (optimistic: it picked the "
            "winner; `usersimcrs evaluator cv` gives the nested estimate)",
            "grouping": grouping,
            "folds": n_folds,
            "seed": seed,
            "aspects": _selection_figures(data, turn_selection, dialogue_selection, seed),
        },
        hyper_parameters={
            a: {
                "alpha": s.alpha,
                "blend": s.blend,
                **(
                    {"text_weights": TEXT_WEIGHTS, "min_df": MIN_DF}
                    if BY_NAME[a].level == "turn"
                    else {
                        "reads": "mean turn predictions; means of the turn features and the whole-conversation "
                        f"counts damped by {FEATURE_DAMPING:g}"
                    }
                ),
            }
            for a, s in selections.items()
        },
        turn_features=list(TURN_FEATURES),
        dialogue_features=dialogue_feature_names(turn_aspects),
        turn_scaler=_standardizer(design.scaler),
        dialogue_scaler=_standardizer(dialogue_scaler),
        text_blocks=blocks,
        aspects=aspects,
    )
    model.training.unknown_word_share = _unknown_share(model, data)
    return model


CV_RESAMPLES = 300
"""Bootstrap resamples of the CIs a model records for its selection figures."""


def _selection_figures(
    data: TrainingSet, turns: dict[str, Selection], dialogues: dict[str, Selection], seed: int
) -> dict[str, dict[str, Any]]:
    """Per aspect, the chosen settings' out-of-fold agreement: pooled Pearson and Spearman, the within-CRS
    Pearson (n-weighted mean over CRSs) and their 95% CIs (conversations resampled within each CRS)."""
    import pandas as pd

    systems = pd.Series(data.systems, index=data.conversation_ids)
    draws = Resamples(systems, CV_RESAMPLES, seed)
    out: dict[str, dict[str, Any]] = {}
    for name, selection, conversation in [
        *((a, s, data.turn_conversation) for a, s in turns.items()),
        *((a, s, np.arange(len(data.conversation_ids))) for a, s in dialogues.items()),
    ]:
        gold = data.turn_gold[name] if name in turns else data.dialogue_gold[name]
        ok = np.isfinite(gold)
        pairs = pd.DataFrame(
            {
                "conversation_id": [data.conversation_ids[i] for i in conversation[ok]],
                "system": [data.systems[i] for i in conversation[ok]],
                "pred": selection.oof[ok],
                "gold": gold[ok],
            }
        )
        rows = {
            r.statistic: r for r in evaluator_rows(name, "computed", "all", name, BY_NAME[name].level, pairs, draws)
        }
        out[name] = {"n": selection.n, "pearson": selection.pearson, "spearman": selection.spearman}
        for statistic in ("pearson", "within_pearson"):
            row = rows[statistic]
            out[name].update(
                {
                    **({statistic: row.value} if statistic != "pearson" else {}),
                    f"{statistic}_ci": [row.ci_low, row.ci_high] if row.ci_low is not None else None,
                }
            )
    return out


def _aspect(name: str, linear: Linear, selection: Selection) -> AspectModel:
    spec = BY_NAME[name]
    return AspectModel(
        name=name,
        level=spec.level,
        low=spec.low,
        high=spec.high,
        linear=linear,
        blend=1.0,
    )


def _unknown_share(model: LearnedModel, data: TrainingSet) -> float:
    known = {t for b in model.text_blocks for t in b.terms if " " not in t}
    words = [t for doc in data.docs["assistant"] for t in doc if " " not in t]
    return sum(1 for t in words if t not in known) / len(words) if words else 0.0


# ---------------------------------------------------------------- nested cross-validation


Split = Literal["conversation", "system"]


def cross_validate(
    data: TrainingSet,
    *,
    folds: int = 5,
    by: Split = "conversation",
    seed: int = 0,
    on_fold: Callable[[int, int], None] | None = None,
) -> list[RunFileConversation]:
    """Out-of-fold predictions for every conversation: each outer fold is predicted by a model fitted
    (hyper-parameter selection included) on the others. `by="system"` leaves one CRS out per fold."""
    n = len(data.conversation_ids)
    if by == "system":
        systems = sorted(set(data.systems))
        if len(systems) < 2:
            raise DataError("leave-one-CRS-out needs conversations of at least two CRSs")
        outer = [np.flatnonzero(np.asarray(data.systems) == s) for s in systems]
    else:
        outer = [test for _, test in _folds(np.arange(n), folds, seed)]
    predictions: list[RunFileConversation] = []
    for k, test in enumerate(outer):
        train = np.setdiff1d(np.arange(n), test)
        model = fit(data.subset(train), folds=folds, seed=seed)
        # the test fold's features read the same catalogue as the training folds' (else they are 0 there)
        predictions += Evaluator(model, catalogue=data.catalogue).predict([data.dialogues[i] for i in test])
        if on_fold is not None:
            on_fold(k + 1, len(outer))
    order = {cid: i for i, cid in enumerate(data.conversation_ids)}
    return sorted(predictions, key=lambda p: order[p.conv_id])
