"""The zero-LLM learned evaluator as operations: train it, predict with it, cross-validate it.

`train_evaluator(data, output)` fits a model on a converted corpus with per-aspect human ratings
(`usersimcrs convert crsarena-eval`) and saves it as plain JSON. `predict_evaluator(run, model,
output)` scores every conversation of a run folder or matrix (simulated or human) and writes a
CRSArena-Eval run file. `cross_validate_evaluator(data, output)` measures how far the whole
training procedure agrees with the humans on conversations (and CRSs) it did not see, with the
official rule, CIs and within-system figures, and writes the tables docs/meta-evaluation.md quotes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from usersimcrs.core.crsarena_eval import OFFICIAL, RunFileConversation, RunFileTurn
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.errors import UserError
from usersimcrs.pipeline.sources import load_sources

PREDICT_BATCH = 2048
CV_CONVERSATION_FILE = "cv_conversation_folds.json"
CV_SYSTEM_FILE = "cv_leave_one_crs_out.json"
CV_REPORT = "cv_report.md"


class TrainResult(BaseModel):
    """What `evaluator train` did."""

    model: str
    conversations: int
    turns: int
    data_sha256: str
    cv: dict[str, dict[str, float]] = Field(description="aspect -> pearson, spearman, n (selection CV)")
    hyper_parameters: dict[str, dict]
    seconds: float


class PredictResult(BaseModel):
    """What `evaluator predict` did, with its throughput."""

    output: str
    conversations: int
    turns: int
    failed_conversations_scored: int
    predict_seconds: float = Field(description="features and model only")
    total_seconds: float = Field(description="reading the run, predicting and writing the run file")
    conversations_per_second: float
    conversations_per_second_total: float
    warnings: list[str] = Field(default_factory=list)


def _dialogues(path: str | Path):
    return [d for source in load_sources(path) for d in source.run.dialogues]


def train_evaluator(data: str | Path, output: str | Path, *, folds: int = 5, seed: int = 0) -> TrainResult:
    """Fit the learned evaluator on the rated conversations under `data`; save it to `output` (JSON)."""
    from usersimcrs.analysis.evaluator_fit import fit, training_set
    from usersimcrs.judges.learned.model import save_model

    if folds < 2:
        raise UserError("--folds must be 2 or more")
    started = time.perf_counter()
    training = training_set(_dialogues(data), str(data))
    model = fit(training, folds=folds, seed=seed)
    path = save_model(model, output)
    return TrainResult(
        model=str(path),
        conversations=model.training.n_conversations,
        turns=model.training.n_turns,
        data_sha256=model.training.data_sha256,
        cv=model.cv["aspects"],
        hyper_parameters=model.hyper_parameters,
        seconds=time.perf_counter() - started,
    )


def predict_evaluator(
    run: str | Path, model: str | Path, output: str | Path, *, batch: int = PREDICT_BATCH, all_aspects: bool = False
) -> PredictResult:
    """Score every conversation under `run` (a run folder or a matrix) and write a run file to `output`
    with the official rule's seven aspects (`all_aspects`: every aspect the model has)."""
    from usersimcrs.core.crsarena_eval import write_run_file
    from usersimcrs.judges.learned.model import Evaluator, RunStats

    started = time.perf_counter()
    evaluator = Evaluator.load(model)
    stats = RunStats()
    predictions = []
    predict_seconds = 0.0
    failed = 0
    pending: list[Dialogue] = []

    def flush() -> None:
        nonlocal predict_seconds
        if not pending:
            return
        t0 = time.perf_counter()
        predictions.extend(evaluator.predict(pending, stats))
        predict_seconds += time.perf_counter() - t0
        pending.clear()

    for source in load_sources(run):
        for dialogue in source.run.iter_dialogues():
            failed += dialogue.status != "ok"
            pending.append(dialogue)
            if len(pending) >= batch:
                flush()
    flush()
    if not predictions:
        raise UserError(f"{run}: no conversations to score")
    if not all_aspects:
        predictions = [official_only(p) for p in predictions]
    path = write_run_file(output, predictions)
    total = time.perf_counter() - started
    n = len(predictions)
    return PredictResult(
        output=str(path),
        conversations=n,
        turns=sum(len(p.turns) for p in predictions),
        failed_conversations_scored=failed,
        predict_seconds=predict_seconds,
        total_seconds=total,
        conversations_per_second=n / predict_seconds if predict_seconds else float("inf"),
        conversations_per_second_total=n / total if total else float("inf"),
        warnings=evaluator.drift(stats),
    )


def official_only(conversation: RunFileConversation) -> RunFileConversation:
    """The conversation's predictions of the aspects the official rule reads (the others left out)."""
    keep = set(OFFICIAL)
    return RunFileConversation.model_construct(
        conv_id=conversation.conv_id,
        turns=[
            RunFileTurn.model_construct(
                turn_ind=t.turn_ind, turn_level_pred={k: v for k, v in t.turn_level_pred.items() if k in keep}
            )
            for t in conversation.turns
        ],
        dial_level_pred={k: v for k, v in conversation.dial_level_pred.items() if k in keep},
    )


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
) -> CrossValidationResult:
    """Out-of-fold predictions (conversation folds, and one CRS left out at a time) as run files, then the
    aspect meta-evaluation of both beside the surface baselines (and published figures): meta_eval.csv,
    report.html and cv_report.md (the Markdown tables of docs/meta-evaluation.md)."""
    from usersimcrs.analysis.evaluator_fit import Split, cross_validate, training_set
    from usersimcrs.core.crsarena_eval import write_run_file
    from usersimcrs.pipeline.aspect_meta_eval import meta_eval_aspects

    started = time.perf_counter()
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    training = training_set(_dialogues(data), str(data))
    say = progress or (lambda text: None)
    runs = []
    splits: list[tuple[Split, str, str]] = [("conversation", CV_CONVERSATION_FILE, f"learned ({folds}-fold CV)")]
    if leave_one_crs_out:
        splits.append(("system", CV_SYSTEM_FILE, "learned (leave-one-CRS-out)"))
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
    from usersimcrs.report.meta_eval_report import ASPECT_VIEWS
    from usersimcrs.report.tables import markdown_table

    lines = [
        f"Data: {data} ({result.n_conversations} conversations); {folds}-fold cross-validation grouped by "
        f"conversation and leave-one-CRS-out, seed {seed}; CIs: {result.ci_method}, {result.resamples} resamples.",
        "'*' marks the best figure of a column; published figures are cited as published.",
        "",
    ]
    for group in result.groups:
        for caption, statistics, ci in ASPECT_VIEWS:
            lines += [f"**{group}: {caption}**", "", markdown_table(result.wide(group, statistics, ci=ci))]
    return "\n".join(lines)
