"""The learned evaluator's saved model: plain JSON (numbers, words, names), and prediction from it.

A model file holds, per aspect, a linear part (standardised turn or dialogue features plus TF-IDF
weighted words of the reply, the user turn before it and the user's reaction) and an ensemble of
small regression trees over the same numeric features, blended with a weight chosen by
cross-validation. Dialogue aspects also read aggregates of the turn models' predictions.

Loading a model trusts only its numbers: nothing in the file is executed or imported (no pickle).
It checks the format and feature versions and the hash of the cue lists the features used, and
refuses a model made for other ones with one line. What it does trust is that the numbers were
fitted on data like the conversations it scores; `drift` says when a run looks unlike them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from usersimcrs.core.crsarena_eval import BY_NAME, RunFileConversation, RunFileTurn
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialogue_text import DialogueText
from usersimcrs.core.validation import describe_validation_error
from usersimcrs.errors import DataError, UserError
from usersimcrs.judges.learned.features import (
    FEATURES_VERSION,
    TEXT_BLOCKS,
    TURN_FEATURES,
    Catalogue,
    ConversationFeatures,
    ConversationText,
    conversation_features,
    conversation_text,
    dialogue_feature_names,
    dialogue_matrix,
    load_cues,
)

MODEL_FORMAT = "usersimcrs-learned-evaluator"


def proxy_name(aspect: str) -> str:
    """The prediction column of a dialogue aspect's turn-level proxy model."""
    return f"{aspect}_turn"


FORMAT_VERSION = 3


class _Plain(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Standardizer(_Plain):
    """Feature means and scales (a zero-variance feature has scale 1, as scikit-learn does)."""

    mean: list[float]
    scale: list[float]


class TextBlock(_Plain):
    """The vocabulary of one text block (unigrams and bigrams) with each term's IDF weight."""

    name: str
    terms: list[str]
    idf: list[float]

    @model_validator(mode="after")
    def _aligned(self) -> TextBlock:
        if len(self.terms) != len(self.idf):
            raise ValueError(f"text block {self.name}: {len(self.terms)} terms but {len(self.idf)} IDF weights")
        return self


class Linear(_Plain):
    """intercept + coefficients of the standardised features + coefficients of each text block's terms."""

    intercept: float
    features: list[float]
    text: dict[str, list[float]] = Field(default_factory=dict)


class Trees(_Plain):
    """Gradient-boosted regression trees: init + learning_rate * sum of the leaves reached.

    Per tree, node arrays as scikit-learn stores them (children -1 at a leaf; go left when
    feature value <= threshold, compared in float32 as scikit-learn does).
    """

    init: float
    learning_rate: float
    feature: list[list[int]]
    threshold: list[list[float]]
    left: list[list[int]]
    right: list[list[int]]
    value: list[list[float]]


class AspectModel(_Plain):
    """One aspect's predictor: blend * linear + (1 - blend) * trees, clipped to the aspect's scale."""

    name: str
    level: Literal["turn", "dialogue"]
    low: float
    high: float
    linear: Linear
    trees: Trees | None = None
    blend: float = Field(ge=0.0, le=1.0, description="weight of the linear part")


class TrainingFacts(_Plain):
    """What the model was trained on: a hash of the rated conversations, their numbers and ranges."""

    data_sha256: str
    source: str
    n_conversations: int
    n_turns: int
    n_ratings: dict[str, int]
    systems: list[str]
    datasets: list[str]
    unknown_word_share: float = Field(description="share of the training words outside the vocabulary")
    ranges: dict[str, tuple[float, float]] = Field(
        description="1st and 99th percentile of assistant words, user words and assistant turns"
    )
    id_salt: str = Field(description="salt of the conversation-ID hashes (from the training data's hash and the seed)")
    conversation_hashes: list[str] = Field(
        description="SHA-256 of salt + conversation ID of every training conversation, sorted: tells which "
        "conversations of a scored run the model was trained on without storing the IDs"
    )
    corpus: list[str] = Field(
        default_factory=list, description="the files the training folder was converted from (its conversion report)"
    )

    def hash_id(self, conversation_id: str) -> str:
        """The salted hash of one conversation ID, as `conversation_hashes` stores them."""
        return hashlib.sha256((self.id_salt + conversation_id).encode("utf-8")).hexdigest()


class CVFigures(_Plain):
    """One aspect's agreement figures recorded at training (out-of-fold predictions of the chosen settings)."""

    n: int
    pearson: float
    spearman: float
    within_pearson: float | None = None
    pearson_ci: tuple[float, float] | None = None
    within_pearson_ci: tuple[float, float] | None = None


class CatalogueFacts(_Plain):
    """The item catalogue the features looked titles up in (path as given at training, its hash, size)."""

    path: str
    sha256: str
    items: int


class LearnedModel(_Plain):
    """The whole saved model (JSON)."""

    format: str
    format_version: int
    features_version: int
    cues_sha256: str
    created: str
    versions: dict[str, str] = Field(description="libraries the model was fitted with")
    training: TrainingFacts
    catalogue: CatalogueFacts | None = Field(
        default=None, description="the item catalogue of the recommended-items features (None: those features are 0)"
    )
    cv: dict[str, Any] = Field(description="cross-validation figures recorded at training")
    hyper_parameters: dict[str, dict[str, Any]]
    turn_features: list[str]
    dialogue_features: list[str]
    turn_scaler: Standardizer
    dialogue_scaler: Standardizer
    text_blocks: list[TextBlock]
    aspects: list[AspectModel]
    proxies: list[AspectModel] = Field(
        default_factory=list,
        description="turn-level linear models of dialogue aspects (each turn rated with its conversation's "
        "rating); their predictions are inputs of the dialogue models only, never an output",
    )

    @property
    def turn_aspects(self) -> list[str]:
        return [a.name for a in self.aspects if a.level == "turn"]

    @property
    def prediction_columns(self) -> list[str]:
        """The turn-level predictions the dialogue models read: turn aspects, then proxies."""
        return self.turn_aspects + [proxy_name(a.name) for a in self.proxies]

    @property
    def dialogue_aspects(self) -> list[str]:
        return [a.name for a in self.aspects if a.level == "dialogue"]


def check_compatible(model: LearnedModel, source: str) -> None:
    """Refuse (one line) a model this version cannot use: another format, feature set or cue list."""
    if model.format != MODEL_FORMAT:
        raise UserError(f"{source}: not a learned-evaluator model (format {model.format!r})")
    if model.format_version != FORMAT_VERSION:
        raise UserError(
            f"{source}: model format v{model.format_version}, this usersimcrs reads v{FORMAT_VERSION}; "
            "retrain it with `usersimcrs evaluator train`"
        )
    cues = load_cues().sha256
    if model.features_version != FEATURES_VERSION or model.cues_sha256 != cues:
        raise UserError(
            f"{source}: trained on feature set v{model.features_version} (cues {model.cues_sha256[:12]}), this "
            f"usersimcrs computes v{FEATURES_VERSION} (cues {cues[:12]}); retrain it with `usersimcrs evaluator train`"
        )
    expected_dialogue = dialogue_feature_names(model.prediction_columns)
    if model.turn_features != list(TURN_FEATURES) or model.dialogue_features != expected_dialogue:
        raise UserError(f"{source}: its feature names differ from this usersimcrs's; retrain it")
    blocks = {b.name: len(b.terms) for b in model.text_blocks}
    if any(p.level != "turn" or p.trees is not None for p in model.proxies):
        raise UserError(f"{source}: a proxy model is not a linear turn model; retrain it")
    for spec in [*model.aspects, *model.proxies]:
        if spec.name not in BY_NAME:
            raise UserError(f"{source}: unknown aspect {spec.name!r}")
        width = len(TURN_FEATURES) if spec.level == "turn" else len(expected_dialogue)
        if len(spec.linear.features) != width or any(len(v) != blocks.get(k, -1) for k, v in spec.linear.text.items()):
            raise UserError(f"{source}: aspect {spec.name}: coefficient counts do not match its features")


def load_model(path: str | Path) -> LearnedModel:
    """Read and check a model file; every problem is one line naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: model file not found (train one with `usersimcrs evaluator train`)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON model ({exc})") from None
    if isinstance(data, dict) and data.get("format") not in (None, MODEL_FORMAT):
        raise UserError(f"{path}: not a learned-evaluator model (format {data.get('format')!r})")
    try:
        model = LearnedModel.model_validate(data)
    except ValidationError as exc:
        raise DataError(describe_validation_error(exc, source=str(path))) from None
    check_compatible(model, str(path))
    return model


def save_model(model: LearnedModel, path: str | Path) -> Path:
    """Write the model as JSON (temporary file + rename)."""
    import os

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(model.model_dump_json(), encoding="utf-8")
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------- prediction


@dataclass
class _CompiledTrees:
    """All trees laid out as complete binary trees of the same depth (heap order: the children of
    node h are 2h+1 and 2h+2), so every tree is walked at once with three lookups per level. A leaf
    above the bottom becomes a node that always goes left (threshold +inf) down to copies of itself."""

    init: float
    rate: float
    feature: np.ndarray  # trees x internal nodes
    threshold: np.ndarray  # trees x internal nodes
    value: np.ndarray  # trees x leaves
    depth: int

    @classmethod
    def of(cls, trees: Trees) -> _CompiledTrees:
        depth = max(1, max(_depth(lf, rt) for lf, rt in zip(trees.left, trees.right)))
        inner, leaves = 2**depth - 1, 2**depth
        feature = np.zeros((len(trees.feature), inner), dtype=np.int64)
        threshold = np.full((len(trees.feature), inner), np.inf)
        value = np.zeros((len(trees.feature), leaves))
        for t, (feat, thr, left, right, val) in enumerate(
            zip(trees.feature, trees.threshold, trees.left, trees.right, trees.value)
        ):
            stack = [(0, 0, 0)]  # (node, heap position, level)
            while stack:
                node, heap, level = stack.pop()
                if left[node] < 0:  # a leaf: every bottom position under `heap` gets its value
                    first = heap
                    for _ in range(depth - level):
                        first = 2 * first + 1
                    span = 2 ** (depth - level)
                    value[t, first - inner : first - inner + span] = val[node]
                    continue
                feature[t, heap], threshold[t, heap] = feat[node], thr[node]
                stack += [(left[node], 2 * heap + 1, level + 1), (right[node], 2 * heap + 2, level + 1)]
        return cls(trees.init, trees.learning_rate, feature, threshold, value, depth)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if x.shape[0] == 0:
            return np.zeros(0)
        x32 = x.astype(np.float32).astype(np.float64)  # scikit-learn compares float32 inputs
        count = self.feature.shape[0]
        tree = np.arange(count)[None, :]
        rows = np.arange(x.shape[0])[:, None]
        heap = np.zeros((x.shape[0], count), dtype=np.int64)
        for _ in range(self.depth):
            right = x32[rows, self.feature[tree, heap]] > self.threshold[tree, heap]
            heap = 2 * heap + 1 + right
        leaves = heap - (2**self.depth - 1)
        return self.init + self.rate * self.value[tree, leaves].sum(axis=1)


def _depth(left: list[int], right: list[int]) -> int:
    """The depth of a tree given as child arrays (a lone root has depth 0)."""
    depth = {0: 0}
    stack = [0]
    while stack:
        node = stack.pop()
        for child in (left[node], right[node]):
            if child >= 0:
                depth[child] = depth[node] + 1
                stack.append(child)
    return max(depth.values())


@dataclass
class _CompiledAspect:
    spec: AspectModel
    intercept: float
    weights: np.ndarray
    text: dict[str, np.ndarray]
    trees: _CompiledTrees | None


@dataclass
class RunStats:
    """What a run's text looks like next to the training data (for `drift`)."""

    words: int = 0
    unknown_words: int = 0
    assistant_words: list[int] | None = None
    user_words: list[int] | None = None
    assistant_turns: list[int] | None = None
    conversations: int = 0
    without_assistant_turn: int = 0

    def add(self, other: RunStats) -> None:
        """Fold in the counts of another batch (e.g. from a worker process)."""
        self.words += other.words
        self.unknown_words += other.unknown_words
        self.conversations += other.conversations
        self.without_assistant_turn += other.without_assistant_turn
        for name in ("assistant_words", "user_words", "assistant_turns"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if theirs:
                setattr(self, name, (mine or []) + theirs)


class TextVectors:
    """The text blocks' vocabularies, turning term lists into TF-IDF rows as scikit-learn's
    TfidfVectorizer did at training (sublinear term frequency, L2 norm), a whole batch at once."""

    def __init__(self, blocks: Sequence[TextBlock]) -> None:
        vocab = {b.name: {t: i for i, t in enumerate(b.terms)} for b in blocks}
        self.idf = {b.name: np.asarray(b.idf, dtype=float) for b in blocks}
        # one lookup per term for all blocks: term -> global id -> the block's column (-1: not in it)
        every = sorted({t for b in blocks for t in b.terms})
        self.term_ids = {t: i for i, t in enumerate(every)}
        self.columns = {name: np.asarray([v.get(t, -1) for t in every], dtype=np.int64) for name, v in vocab.items()}
        self.unigrams = frozenset(t for t in every if " " not in t)

    def matrix(self, block: str, docs: Sequence[list[str]], known: dict[int, list[int]] | None = None):
        """TF-IDF rows of `docs` over `block`'s vocabulary. `known`: term ids of docs already looked up
        (by object identity), shared across blocks (the same user turn serves two blocks)."""
        from scipy.sparse import csr_matrix

        idf = self.idf[block]
        size = idf.size
        lookup = self.term_ids.get
        cache = known if known is not None else {}
        ids = []
        for doc in docs:
            hit = cache.get(id(doc))
            if hit is None:
                hit = cache[id(doc)] = [g for g in map(lookup, doc) if g is not None]
            ids.append(hit)
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        terms = np.fromiter((g for row in ids for g in row), dtype=np.int64, count=int(lengths.sum()))
        cols = self.columns[block][terms] if terms.size else terms
        rows = np.repeat(np.arange(len(ids), dtype=np.int64), lengths)
        keep = cols >= 0
        keys, counts = np.unique(rows[keep] * size + cols[keep], return_counts=True)
        r, c = keys // size, keys % size
        weights = (1.0 + np.log(counts)) * idf[c]
        norms = np.sqrt(np.bincount(r, weights=weights * weights, minlength=len(ids)))
        weights = weights / norms[r]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=len(ids)))])
        return csr_matrix((weights, c, indptr), shape=(len(ids), size))


@dataclass
class ScoredBatch:
    """A batch's predictions as arrays: per conversation its ID and assistant turn indices; the turn
    predictions (one row per assistant turn, in conversation order) and the dialogue predictions (one
    row per conversation), one column per aspect. Cheap to send between processes."""

    conversation_ids: list[str]
    turn_inds: list[list[int]]
    turn_names: list[str]
    turn_values: np.ndarray
    dialogue_names: list[str]
    dialogue_values: np.ndarray

    def conversations(self, aspects: Collection[str] | None = None) -> list[RunFileConversation]:
        """The predictions as run-file conversations, of the given aspects only (default: all)."""
        turn_keep = [i for i, a in enumerate(self.turn_names) if aspects is None or a in aspects]
        dial_keep = [i for i, a in enumerate(self.dialogue_names) if aspects is None or a in aspects]
        turn_names = [self.turn_names[i] for i in turn_keep]
        dial_names = [self.dialogue_names[i] for i in dial_keep]
        turn_rows = self.turn_values[:, turn_keep].tolist()  # Python floats: indexing numpy per value is slow
        dial_rows = self.dialogue_values[:, dial_keep].tolist()
        out = []
        start = 0
        for n, (conversation_id, turn_inds) in enumerate(zip(self.conversation_ids, self.turn_inds)):
            turns = [
                RunFileTurn.model_construct(turn_ind=turn, turn_level_pred=dict(zip(turn_names, turn_rows[start + k])))
                for k, turn in enumerate(turn_inds)
            ]
            start += len(turn_inds)
            out.append(
                RunFileConversation.model_construct(
                    conv_id=conversation_id, turns=turns, dial_level_pred=dict(zip(dial_names, dial_rows[n]))
                )
            )
        return out


def trained_on(model: LearnedModel, conversation_ids: Iterable[str]) -> list[str]:
    """The conversation IDs among `conversation_ids` that the model was trained on (by salted ID hash)."""
    trained = frozenset(model.training.conversation_hashes)
    return [cid for cid in conversation_ids if model.training.hash_id(cid) in trained]


def catalogue_path(model: LearnedModel, source: str, items: str | Path | None = None) -> Path | None:
    """The item catalogue a model's features read: `items` when given, else the file named at training;
    a model trained without one needs none. A missing file stops with one line naming it."""
    if model.catalogue is None:
        return None
    path = Path(items) if items is not None else Path(model.catalogue.path)
    if not path.is_file():
        raise UserError(
            f"{source}: the model compares recommendations with the item catalogue {path}, which is not there; "
            "give the catalogue with --items FILE"
        )
    return path


class Evaluator:
    """A loaded model ready to score conversations (numpy only; no scikit-learn needed)."""

    def __init__(
        self, model: LearnedModel, catalogue: Catalogue | None = None, catalogue_file: Path | None = None
    ) -> None:
        """`catalogue`: the item catalogue, or `catalogue_file` to read it from when the first conversation is
        scored (a process that only checks the model, or hands the scoring to workers, never reads it)."""
        self.model = model
        self._catalogue = catalogue
        self.catalogue_file = catalogue_file
        self.trained = frozenset(model.training.conversation_hashes)
        self.cues = load_cues()
        self.text = TextVectors(model.text_blocks)
        self.turn_mean = np.asarray(model.turn_scaler.mean)
        self.turn_scale = np.asarray(model.turn_scaler.scale)
        self.dial_mean = np.asarray(model.dialogue_scaler.mean)
        self.dial_scale = np.asarray(model.dialogue_scaler.scale)
        self.aspects = [
            _CompiledAspect(
                spec=a,
                intercept=a.linear.intercept,
                weights=np.asarray(a.linear.features, dtype=float),
                text={k: np.asarray(v, dtype=float) for k, v in a.linear.text.items()},
                trees=_CompiledTrees.of(a.trees) if a.trees is not None and a.trees.feature else None,
            )
            for a in [*model.aspects, *model.proxies]
        ]
        self.proxies = self.aspects[len(model.aspects) :]
        self.aspects = self.aspects[: len(model.aspects)]

    @classmethod
    def load(cls, path: str | Path, items: str | Path | None = None) -> Evaluator:
        model = load_model(path)
        return cls(model, catalogue_file=catalogue_path(model, str(path), items))

    @property
    def catalogue(self) -> Catalogue | None:
        """The item catalogue the features read (read from its file on first use)."""
        if self._catalogue is None and self.catalogue_file is not None:
            self._catalogue = Catalogue.load(self.catalogue_file)
        return self._catalogue

    def in_training(self, conversation_ids: Iterable[str]) -> list[bool]:
        """Whether each conversation was one of the model's training conversations (by salted ID hash)."""
        return [self.model.training.hash_id(cid) in self.trained for cid in conversation_ids]

    def _predict(self, aspect: _CompiledAspect, x: np.ndarray, scaled: np.ndarray, text: dict[str, Any]) -> np.ndarray:
        linear = aspect.intercept + scaled @ aspect.weights
        for block, coef in aspect.text.items():
            linear = linear + text[block] @ coef
        if aspect.trees is None:
            return linear
        blend = aspect.spec.blend
        return blend * linear + (1.0 - blend) * aspect.trees.predict(x)

    def score(
        self, conversations: Iterable[Dialogue | DialogueText | ConversationText], stats: RunStats | None = None
    ) -> ScoredBatch:
        """Predictions for every conversation as arrays (clipped to each aspect's scale); one batch of
        model calls. A conversation without an assistant turn gets no turn predictions and dialogue
        predictions from its extras only (counted in `stats.without_assistant_turn`)."""
        batch = [c if isinstance(c, tuple) else conversation_text(c) for c in conversations]
        features = [conversation_features(c, self.cues, self.catalogue) for c in batch]
        if stats is not None:
            self._observe(batch, features, stats)
        turn_aspects = [a for a in self.aspects if a.spec.level == "turn"]
        dial_aspects = [a for a in self.aspects if a.spec.level == "dialogue"]
        hand = np.vstack([f.hand for f in features]) if features else np.zeros((0, len(TURN_FEATURES)))
        scaled = (hand - self.turn_mean) / self.turn_scale
        known: dict[int, list[int]] = {}  # a user turn is the reaction to one reply and the request of the next
        text = {
            block: self.text.matrix(block, [doc for f in features for doc in f.docs[block]], known)
            for block in TEXT_BLOCKS
        }
        columns = [self._predict(a, hand, scaled, text) for a in turn_aspects + self.proxies]
        dial_x = dialogue_matrix(features, np.column_stack(columns) if columns else np.zeros((len(hand), 0)))
        dial_scaled = (dial_x - self.dial_mean) / self.dial_scale
        low = np.asarray([a.spec.low for a in turn_aspects])
        high = np.asarray([a.spec.high for a in turn_aspects])
        turn_values = (
            np.clip(np.column_stack(columns[: len(turn_aspects)]), low, high)
            if turn_aspects
            else np.zeros((len(hand), 0))
        )
        dial_values = (
            np.column_stack(
                [np.clip(self._predict(a, dial_x, dial_scaled, {}), a.spec.low, a.spec.high) for a in dial_aspects]
            )
            if dial_aspects
            else np.zeros((len(batch), 0))
        )
        return ScoredBatch(
            conversation_ids=[conversation_id for conversation_id, _ in batch],
            turn_inds=[f.turn_inds for f in features],
            turn_names=[a.spec.name for a in turn_aspects],
            turn_values=turn_values,
            dialogue_names=[a.spec.name for a in dial_aspects],
            dialogue_values=dial_values,
        )

    def predict(
        self, conversations: Iterable[Dialogue | DialogueText | ConversationText], stats: RunStats | None = None
    ) -> list[RunFileConversation]:
        """`score` as run-file conversations (every aspect of the model)."""
        return self.score(conversations, stats).conversations()

    def _observe(self, batch: list[ConversationText], features: list[ConversationFeatures], stats: RunStats) -> None:
        stats.assistant_words = stats.assistant_words if stats.assistant_words is not None else []
        stats.user_words = stats.user_words if stats.user_words is not None else []
        stats.assistant_turns = stats.assistant_turns if stats.assistant_turns is not None else []
        for (_, turns), f in zip(batch, features):
            stats.conversations += 1
            stats.assistant_turns.append(f.hand.shape[0])
            if f.hand.shape[0] == 0:
                stats.without_assistant_turn += 1
            for u, n in zip(turns, f.words):
                (stats.assistant_words if u.assistant else stats.user_words).append(n)
            for doc in f.docs["assistant"]:
                unigrams = [t for t in doc if " " not in t]
                stats.words += len(unigrams)
                stats.unknown_words += sum(1 for t in unigrams if t not in self.text.unigrams)

    def drift(self, stats: RunStats) -> list[str]:
        """Warnings when the scored run looks unlike the training data (vocabulary, lengths)."""
        facts = self.model.training
        out = []
        if stats.words:
            share = stats.unknown_words / stats.words
            if share > facts.unknown_word_share + UNKNOWN_MARGIN:
                out.append(
                    f"{share:.0%} of the assistant words are outside the model's vocabulary (training data: "
                    f"{facts.unknown_word_share:.0%}): another domain or language? Its scores may not mean much here"
                )
        for key, values in (
            ("assistant_words", stats.assistant_words),
            ("user_words", stats.user_words),
            ("assistant_turns", stats.assistant_turns),
        ):
            if not values or key not in facts.ranges:
                continue
            low, high = facts.ranges[key]
            arr = np.asarray(values, dtype=float)
            outside = float(np.mean((arr < low) | (arr > high)))
            if outside > OUTSIDE_SHARE:
                out.append(
                    f"{outside:.0%} of the {key.replace('_', ' ')} values lie outside the training range "
                    f"[{low:g}, {high:g}] (1st-99th percentile): lengths unlike the training data"
                )
        if stats.without_assistant_turn:
            out.append(f"{stats.without_assistant_turn} conversations have no assistant turn (no turn predictions)")
        catalogue = self.model.catalogue
        if catalogue is not None and self.catalogue_sha256() not in (None, catalogue.sha256):
            out.append(
                f"the item catalogue differs from the one the model was trained with ({catalogue.path}): the "
                "recommended-items features may read differently"
            )
        return out

    def catalogue_sha256(self) -> str | None:
        """The SHA-256 of the catalogue in use (from its file, without parsing it), None without one."""
        if self._catalogue is not None:
            return self._catalogue.sha256
        if self.catalogue_file is None:
            return None
        return hashlib.sha256(self.catalogue_file.read_bytes()).hexdigest()


UNKNOWN_MARGIN = 0.15
"""A run's out-of-vocabulary share may exceed the training data's by this much before a warning."""
OUTSIDE_SHARE = 0.10
"""Share of values outside the training's 1st-99th percentile range that triggers a warning (2% is expected)."""
