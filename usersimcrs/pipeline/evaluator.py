"""The zero-LLM learned evaluator as operations: train it, predict with it, cross-validate it.

`train_evaluator(data, output)` fits a model on a converted corpus with per-aspect human ratings
(`usersimcrs convert crsarena-eval`) and saves it as plain JSON. `predict_evaluator(run, model,
output)` scores every conversation of a run folder or matrix (simulated or human) and writes a
CRSArena-Eval run file. `cross_validate_evaluator(data, output)` measures how far the whole
training procedure agrees with the humans on conversations (and CRSs) it did not see, with the
official rule, CIs and within-system figures, and writes the tables docs/meta-evaluation.md quotes.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from data_converters.writer import REPORT
from usersimcrs.core.crsarena_eval import OFFICIAL, write_run_file
from usersimcrs.core.dialogue_text import DialogueText
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.errors import UserError
from usersimcrs.judges.learned.features import Catalogue
from usersimcrs.judges.learned.model import (
    CVFigures,
    Evaluator,
    RunStats,
    ScoredBatch,
    catalogue_path,
    load_model,
    save_model,
    trained_on,
)
from usersimcrs.pipeline.sources import load_sources

PREDICT_BATCH = 2048
MAX_WORKERS = 4
SPAN_BYTES = 4 << 20
"""About 1,200 stored conversations of CRS Arena's length: big enough that a worker's start-up and the
transfer of its results are small beside its work, small enough to share a 10,000-conversation run."""


CV_CONVERSATION_FILE = "cv_conversation_folds.json"
CV_SYSTEM_FILE = "cv_leave_one_crs_out.json"
CV_REPORT = "cv_report.md"
LOCO_LABEL = "learned (leave-one-CRS-out)"


def random_label(folds: int) -> str:
    """The label of the random-fold figure: it says the folds share CRSs with training."""
    return f"learned ({folds}-fold CV, CRSs shared with training)"


class TrainResult(BaseModel):
    """What `evaluator train` did."""

    model: str
    conversations: int
    turns: int
    data_sha256: str
    cv: dict[str, CVFigures] = Field(description="aspect -> figures of the selection's cross-validation")
    cv_kind: str = ""
    corpus: list[str] = Field(default_factory=list, description="the files the training folder was converted from")
    hyper_parameters: dict[str, dict]
    seconds: float


class PredictResult(BaseModel):
    """What `evaluator predict` did, with its throughput."""

    output: str
    conversations: int
    turns: int
    in_training: int = Field(0, description="scored conversations the model was trained on (salted ID hashes)")
    failed_conversations_scored: int
    workers: int = Field(description="worker processes that read and scored (0: this one)")
    predict_seconds: float = Field(description="reading the run from disk and scoring it (features and model)")
    cpu_seconds: float = Field(description="CPU time of reading and scoring, all processes (free of other load)")
    total_seconds: float = Field(description="also loading the model and writing the run file")

    @property
    def conversations_per_cpu_second(self) -> float:
        return self.conversations / self.cpu_seconds if self.cpu_seconds else float("inf")

    conversations_per_second: float
    conversations_per_second_total: float
    warnings: list[str] = Field(default_factory=list)


def _dialogues(path: str | Path):
    return [d for source in load_sources(path) for d in source.run.dialogues]


def converted_from(data: str | Path) -> list[str]:
    """The files a converted folder was made from (the names its conversion report gives), else []."""
    import json

    path = Path(data) / REPORT
    try:
        inputs = json.loads(path.read_text(encoding="utf-8")).get("inputs") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [Path(str(name)).name for name in inputs]


def _catalogue(items: str | Path | None):
    return Catalogue.load(items) if items is not None else None


def _training_set(data: str | Path, items: str | Path | None):
    # lazy: scikit-learn, scipy and pandas only when a model is fitted
    from usersimcrs.analysis.evaluator_fit import training_set

    return training_set(_dialogues(data), str(data), _catalogue(items), converted_from(data))


def training_count(run: str | Path, model: str | Path) -> tuple[int, int]:
    """(conversations under `run` the model was trained on, conversations under `run`)."""
    ids = [d.conversation_id for source in load_sources(run) for d in source.run.iter_dialogues()]
    return len(trained_on(load_model(model), ids)), len(ids)


def in_training_line(trained: int, total: int) -> str:
    """The sentence every command that scores with a learned model prints about its training data."""
    if not trained:
        return f"none of the {total} conversations is in the model's training data"
    return (
        f"{trained} of the {total} conversations are in the model's training data: their scores are in-sample, "
        "not evidence (meta-eval --model MODEL leaves them out)"
    )


DOCS_MODEL = Path("models") / "learned.json"
"""The model file the docs' `evaluator train` command writes (relative to the working folder): `report`
uses it when no model is named and it is there, and says so."""


def docs_model(folder: str | Path = ".") -> tuple[Path | None, str]:
    """The docs' model under `folder` when it is there and this usersimcrs can use it, with the line to print:
    which file, when it was trained and on what (a stale model is never used in silence), or why it is not
    used (another feature set, a missing catalogue: the report goes on without it)."""
    path = Path(folder) / DOCS_MODEL
    if not path.is_file():
        return None, ""
    try:
        model = load_model(path)
        catalogue_path(model, str(path))
    except UserError as exc:
        return None, f"learned evaluator: {exc} (found at the docs' model path: the report leaves it out)"
    facts = model.training
    return path, (
        f"learned evaluator: {path} (the docs' model path), trained {model.created} on {facts.n_conversations} "
        f"conversations of {facts.source}; --model FILE names another, --no-model leaves it out"
    )


def train_evaluator(
    data: str | Path, output: str | Path, *, folds: int = 5, seed: int = 0, items: str | Path | None = None
) -> TrainResult:
    """Fit the learned evaluator on the rated conversations under `data`; save it to `output` (JSON).
    `items`: the item catalogue the recommended-items features look titles up in (None: those features are 0)."""
    # lazy: scikit-learn, scipy and pandas only when a model is fitted
    from usersimcrs.analysis.evaluator_fit import fit

    if folds < 2:
        raise UserError("--folds must be 2 or more")
    started = time.perf_counter()
    training = _training_set(data, items)
    model = fit(training, folds=folds, seed=seed)
    path = save_model(model, output)
    return TrainResult(
        model=str(path),
        conversations=model.training.n_conversations,
        turns=model.training.n_turns,
        data_sha256=model.training.data_sha256,
        cv={a: CVFigures.model_validate(f) for a, f in model.cv["aspects"].items()},
        cv_kind=model.cv["kind"],
        corpus=model.training.corpus,
        hyper_parameters=model.hyper_parameters,
        seconds=time.perf_counter() - started,
    )


def predict_evaluator(
    run: str | Path,
    model: str | Path,
    output: str | Path,
    *,
    batch: int = PREDICT_BATCH,
    all_aspects: bool = False,
    workers: int | None = None,
    span_bytes: int = SPAN_BYTES,
    items: str | Path | None = None,
) -> PredictResult:
    """Score every conversation under `run` (a run folder or a matrix) and write a run file to `output`
    with the official rule's seven aspects (`all_aspects`: every aspect the model has).

    Each run folder's dialogue file is cut into spans of whole lines (about `span_bytes` each); with
    more than one span, `workers` processes (default: one per CPU, at most 4) each read and score
    whole spans while this one waits; `workers=0`, or a single span, reads and scores here. Every
    span is scored in batches of `batch` conversations. The output keeps the run's order. `items`:
    the item catalogue, when not the one the model names. `in_training` counts the conversations the
    model was trained on (their scores are in-sample, not evidence).
    """
    from concurrent.futures import ProcessPoolExecutor

    started = time.perf_counter()
    items_path = str(items) if items is not None else None
    evaluator = _evaluator(str(model), items_path)  # a bad or incompatible model stops here, before any work
    workers = max(0, workers if workers is not None else min(os.cpu_count() or 1, MAX_WORKERS))
    scoring = time.perf_counter()
    cpu = _cpu_seconds()
    jobs = [
        (str(model), str(folder.path), span, batch, items_path)
        for folder in (RunFolder(source.run.path) for source in load_sources(run))
        for span in folder.dialogue_spans(max(1, -(-_size(folder) // max(1, span_bytes))))
    ]
    parts: list[ScoredSpan]
    if workers and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            parts = list(pool.map(_score_span, *zip(*jobs)))
    else:
        workers = 0
        parts = [_score_span(*job) for job in jobs]
    scoring_seconds = time.perf_counter() - scoring
    cpu_seconds = _cpu_seconds() - cpu  # this process and its finished workers
    stats = RunStats()
    for part in parts:
        stats.add(part.stats)
    n = sum(len(b.conversation_ids) for part in parts for b in part.batches)
    trained = sum(sum(evaluator.in_training(b.conversation_ids)) for part in parts for b in part.batches)
    if not n:
        raise UserError(f"{run}: no conversations to score")
    aspects = None if all_aspects else set(OFFICIAL)
    path = write_run_file(output, (c for part in parts for b in part.batches for c in b.conversations(aspects)))
    total = time.perf_counter() - started
    return PredictResult(
        output=str(path),
        conversations=n,
        turns=sum(len(t) for part in parts for b in part.batches for t in b.turn_inds),
        in_training=trained,
        failed_conversations_scored=sum(part.failed for part in parts),
        workers=workers,
        predict_seconds=scoring_seconds,
        cpu_seconds=cpu_seconds,
        total_seconds=total,
        conversations_per_second=n / scoring_seconds if scoring_seconds else float("inf"),
        conversations_per_second_total=n / total if total else float("inf"),
        warnings=evaluator.drift(stats),
    )


def _size(folder) -> int:
    path = folder.dialogues_path
    return path.stat().st_size if path.exists() else 0


@dataclass
class ScoredSpan:
    """What scoring one span of a dialogue file gave: its batches' predictions, drift counts, failed runs."""

    batches: list[ScoredBatch]
    stats: RunStats
    failed: int


def _score_span(model: str, folder: str, span: tuple[int, int], batch: int, items: str | None = None) -> ScoredSpan:
    """Read one span of a run folder's dialogue file and score it in batches (in a worker or in-process)."""
    evaluator = _evaluator(model, items)
    stats = RunStats()
    batches: list[ScoredBatch] = []
    pending: list[DialogueText] = []
    failed = 0
    for dialogue in RunFolder(folder).dialogue_texts(span):
        failed += dialogue.status != "ok"
        pending.append(dialogue)
        if len(pending) >= batch:
            batches.append(evaluator.score(pending, stats))
            pending = []
    if pending:
        batches.append(evaluator.score(pending, stats))
    return ScoredSpan(batches, stats, failed)


def _cpu_seconds() -> float:
    """CPU time of this process and of its children that have ended (user + system)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@functools.lru_cache(maxsize=2)
def _evaluator(path: str, items: str | None = None) -> Evaluator:
    """The loaded model of `path` (and its item catalogue), once per process (the main one and each worker)."""
    return Evaluator.load(path, items)


class CrossValidationResult(BaseModel):
    """The nested cross-validation of the learned evaluator, scored like any evaluator by meta-eval."""

    output: str
    folds: int
    seed: int
    conversations: int
    files: list[str]
    seconds: float


def cross_validate_evaluator(
    data: str | Path,
    output: str | Path,
    *,
    folds: int = 5,
    seed: int = 0,
    leave_one_crs_out: bool = True,
    published: str | Path | None = None,
    resamples: int = 1000,
    progress: Callable[[str], None] | None = None,
    items: str | Path | None = None,
    random_folds: bool = True,
) -> CrossValidationResult:
    """Out-of-fold predictions as run files: first one CRS left out at a time (the figure a CRS the
    evaluator never saw gets, which leads), then `folds` random folds grouped by conversation (CRSs
    shared between training and test: a second, labelled figure); then the aspect meta-evaluation of
    both beside the baselines (CRS identity, conversation length, assistant words; published figures):
    meta_eval.csv, report.html and cv_report.md (the Markdown tables of docs/meta-evaluation.md)."""
    # lazy: scikit-learn, scipy and pandas only when a model is cross-validated
    from usersimcrs.analysis.evaluator_fit import Split, cross_validate
    from usersimcrs.pipeline.aspect_meta_eval import meta_eval_aspects

    started = time.perf_counter()
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    training = _training_set(data, items)
    say = progress or (lambda text: None)
    runs = []
    splits: list[tuple[Split, str, str]] = []
    if leave_one_crs_out:
        splits.append(("system", CV_SYSTEM_FILE, LOCO_LABEL))
    if random_folds or not splits:
        splits.append(("conversation", CV_CONVERSATION_FILE, random_label(folds)))
    for by, file, label in splits:

        def fold_done(k: int, n: int, by: str = by) -> None:
            say(f"{by} split: fold {k} of {n}")

        predictions = cross_validate(training, folds=folds, by=by, seed=seed, on_fold=fold_done)
        write_run_file(folder / file, predictions)
        runs.append(f"{label}={folder / file}")
    result = meta_eval_aspects(
        data, folder, aspects="all", judgments=runs, published=published, resamples=resamples, seed=seed
    )
    (folder / CV_REPORT).write_text(cv_markdown(result, folds, seed, data), encoding="utf-8")
    return CrossValidationResult(
        output=str(folder),
        folds=folds,
        seed=seed,
        conversations=len(training.conversation_ids),
        files=[*(f for _, f, _ in splits), *result.files, CV_REPORT],
        seconds=time.perf_counter() - started,
    )


def cv_markdown(result, folds: int, seed: int, data: str | Path) -> str:
    """The cross-validation tables as Markdown (pooled with CIs, within-system, system level)."""
    # lazy: matplotlib and pandas only when the CV report is written
    from usersimcrs.report.meta_eval_report import ASPECT_VIEWS, systems_only_lines
    from usersimcrs.report.tables import markdown_table

    lines = [
        f"Data: {data} ({result.n_conversations} conversations); leave-one-CRS-out first (every CRS's "
        f"conversations predicted by a model trained on the other CRSs only: the figure a new CRS gets), then "
        f"{folds}-fold cross-validation grouped by conversation (folds share CRSs with training: it rewards "
        f"recognising a CRS); hyper-parameters chosen inside each training part by leave-one-CRS-out; seed "
        f"{seed}; CIs: {result.ci_method}, {result.resamples} resamples.",
        "Baselines: conversation length (utterances), assistant utterance length (mean words per assistant turn), "
        "CRS identity (the mean rating of the other conversations of the same CRS; it has no within-CRS figure).",
        "'*' marks the best figure of a column; published figures are cited as published.",
        "",
    ]
    for group in result.groups:
        for caption, statistics, ci in ASPECT_VIEWS:
            lines += [f"**{group}: {caption}**", "", markdown_table(result.wide(group, statistics, ci=ci))]
        lines += [f"- {line}" for line in systems_only_lines(result, group)]
    return "\n".join(lines)
