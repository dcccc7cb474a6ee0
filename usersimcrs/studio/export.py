"""`usersimcrs studio STUDY.yaml --export DIR`: the study's records in the formats the toolkit reads.

DIR holds, with no conversion step needed by `meta-eval` and `fidelity`:
- the conversations people held (chat and battle) as a converted human corpus: one run folder per
  CRS under ``cells/human__<crs>__studio/`` indexed as a matrix, simulator ``human``, each labelled
  conversation carrying its reference (``satisfied`` 1/0 and the rated aspects), written by the
  converters' writer exactly as `convert crsarena-dial` writes CRSArena-Dial;
- ``votes.jsonl``: the battle votes (`core.votes.VoteRecord`), ranked by `meta-eval` with Bradley-Terry;
- ``annotations/``: every annotated conversation (as stored in its source) with the mean of its
  annotators as ``metadata.reference`` (dialogue aspects) and on each system utterance (turn
  aspects), as a matrix of the source's folders; ``annotations.csv`` / ``annotations_turns.csv``
  (one row per rating, for `meta-eval --reference`) and ``agreement.csv`` (Krippendorff's alpha);
- ``turing.csv``: people's accuracy at telling human from simulated users, with its CI, beside the
  discriminator AUC of `fidelity` on the same two sources;
- ``study_summary.json``: the counts behind all of it, including what was not exported and why.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from data_converters.base import CellRun, ConversionOutput, ConversionReport
from data_converters.writer import write_output
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.manifest import scrub_secrets
from usersimcrs.core.votes import VOTES, VoteRecord
from usersimcrs.errors import DataError
from usersimcrs.pipeline.fidelity import fidelity
from usersimcrs.studio.aggregate import (
    agreement,
    annotation_tables,
    dialogue_references,
    turing_result,
    turn_references,
)
from usersimcrs.studio.config import HUMAN, Study
from usersimcrs.studio.dialogues import held_dialogue
from usersimcrs.studio.pool import PoolEntry
from usersimcrs.studio.service import load_pools
from usersimcrs.studio.state import StudyState
from usersimcrs.studio.store import LOG, read_state

DATASET = "studio"
ANNOTATIONS_DIR = "annotations"
ANNOTATIONS_CSV = "annotations.csv"
ANNOTATIONS_TURNS_CSV = "annotations_turns.csv"
AGREEMENT_CSV = "agreement.csv"
TURING_CSV = "turing.csv"
SUMMARY = "study_summary.json"


@dataclass
class ExportSummary:
    """What the export wrote and what it left out."""

    output: str
    participants: int = 0
    completed: int = 0
    conversations: int = 0
    conversations_failed: int = 0
    conversations_open: int = 0
    conversations_empty: int = 0
    labelled: int = 0
    votes: int = 0
    battles_without_vote: int = 0
    annotations: int = 0
    annotations_excluded: int = 0
    excluded_annotators: list[str] = field(default_factory=list)
    gold_checks: int = 0
    gold_passed: int = 0
    annotated_conversations: int = 0
    agreement: list[dict[str, Any]] = field(default_factory=list)
    turing: list[dict[str, Any]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def export_study(study: Study, output: str | Path) -> ExportSummary:
    """Write the export of `study` into `output` (replaces an earlier export there)."""
    state = read_state(study.folder)  # read-only: a study never served gives an empty export
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    summary = ExportSummary(output=str(out), participants=len(state.participants), completed=len(state.completions))
    if not (study.folder / LOG).exists():
        summary.notes.append(f"{study.folder}: no study records yet (serve the study first); the export is empty")
    _export_conversations(study, state, out, summary)
    if study.config.tasks.annotate is not None:
        source = study.annotate_source()
        if source is not None and source.exists():
            pools = load_pools(study)
            _export_annotations(study, state, pools.annotate.entries if pools.annotate else [], out, summary)
        else:
            summary.notes.append(f"{source}: the conversations to annotate are not made yet; no annotations exported")
    if study.config.tasks.turing is not None:
        _export_turing(study, state, out, summary)
    summary.files.append(SUMMARY)
    (out / SUMMARY).write_text(json.dumps(_jsonable(asdict(summary)), indent=1), encoding="utf-8")
    return summary


def _export_conversations(study: Study, state: StudyState, out: Path, summary: ExportSummary) -> None:
    """Chat and battle conversations as a human corpus (one run folder per CRS) and the votes."""
    by_crs: dict[str, list[Dialogue]] = {}
    exported: set[str] = set()
    for assignment in state.assignments.values():
        if assignment.task not in ("chat", "battle"):
            continue
        for side, conversation_id in enumerate(assignment.conversation_ids):
            conversation = state.conversations[conversation_id]
            if conversation.end is None:
                summary.conversations_open += 1
                continue
            if not conversation.exchanges:
                summary.conversations_empty += 1
                continue
            dialogue = held_dialogue(
                conversation,
                study=study.name,
                task=assignment.task,
                side="ab"[side] if assignment.task == "battle" else None,
            )
            by_crs.setdefault(conversation.crs, []).append(dialogue)
            exported.add(conversation_id)
            summary.conversations += 1
            summary.conversations_failed += dialogue.status == "failed"
            summary.labelled += conversation.label is not None
    votes = []
    for assignment in state.assignments.values():
        if assignment.task != "battle":
            continue
        vote = state.votes.get(assignment.assignment_id)
        if vote is None:
            summary.battles_without_vote += 1
            continue
        crs_a, crs_b = assignment.crs
        conversation_a, conversation_b = assignment.conversation_ids
        votes.append(
            VoteRecord(
                vote_id=f"{study.name}:{assignment.assignment_id}",
                user_id=assignment.participant_id,
                crs_a=crs_a,
                crs_b=crs_b,
                outcome=vote.outcome,
                winner=None if vote.outcome == "tie" else (crs_a if vote.outcome == "a" else crs_b),
                conversation_a=conversation_a,
                conversation_b=conversation_b,
                in_corpus_a=conversation_a in exported,
                in_corpus_b=conversation_b in exported,
                session_id=assignment.assignment_id,
                feedback=vote.feedback,
            )
        )
    summary.votes = len(votes)
    cells = []
    for crs in sorted(by_crs):
        dialogues = [d.model_copy(update={"index": i}) for i, d in enumerate(by_crs[crs])]
        section = (
            scrub_secrets({"name": crs, **study.run_config(crs).crs}) if crs in study.crs_configs else {"type": crs}
        )
        manifest = {
            "config": {"simulator": {"type": HUMAN}, "crs": section, "seed": study.config.seed},
            "human": True,
            "study": study.name,
        }
        cells.append(CellRun(simulator=HUMAN, crs=crs, dataset=DATASET, dialogues=dialogues, manifest=manifest))
    report = ConversionReport(dataset=DATASET, inputs=[str(study.folder / LOG)])
    report.counts_in["conversations"] = summary.conversations + summary.conversations_open + summary.conversations_empty
    if summary.conversations_open or summary.conversations_empty:
        report.written_in_part(
            "conversations",
            report.counts_in["conversations"],
            summary.conversations,
            "conversations a participant has not ended yet, or ended without a message, are not exported",
            open=summary.conversations_open,
            empty=summary.conversations_empty,
        )
    dialogues = [d for crs in sorted(by_crs) for d in by_crs[crs]]
    output = ConversionOutput(dialogues=dialogues, cells=cells, jsonl_files={VOTES: votes} if votes else {})
    write_output(output, report, out)
    summary.files += report.files


def _cell_axes(entry: PoolEntry) -> tuple[str, str, str]:
    """(simulator, CRS, dataset) of a source folder: its matrix cell name when it has one."""
    parts = entry.source.split("__")
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    return entry.simulator or "unknown", entry.crs or "unknown", DATASET


def _export_annotations(
    study: Study, state: StudyState, entries: list[PoolEntry], out: Path, summary: ExportSummary
) -> None:
    task = study.config.tasks.annotate
    assert task is not None and study.rubric is not None
    tables = annotation_tables(state, exclude_failed_gold=task.exclude_failed_gold)
    table = tables.table
    summary.annotations = int(
        table.loc[table["level"] == "dialogue", ["source", "conversation_id", "rater"]].drop_duplicates().shape[0]
    )
    summary.annotations_excluded = tables.excluded_records
    summary.excluded_annotators = tables.excluded_annotators
    summary.gold_checks, summary.gold_passed = tables.gold_checks, tables.gold_passed
    folder = out / ANNOTATIONS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    agreement_table = agreement(table, study.rubric)
    summary.agreement = agreement_table.to_dict("records")
    dialogue_part = table[table["level"] == "dialogue"].drop(columns=["level", "utterance"])
    dialogue_part[["conversation_id", "name", "value", "rater", "source"]].to_csv(folder / ANNOTATIONS_CSV, index=False)
    table[table["level"] == "turn"].drop(columns=["level"]).to_csv(folder / ANNOTATIONS_TURNS_CSV, index=False)
    agreement_table.to_csv(folder / AGREEMENT_CSV, index=False)
    references = dialogue_references(table)
    turns = turn_references(table)
    cells: dict[tuple[str, str, str], list[Dialogue]] = {}
    for entry in entries:
        key = (entry.source, entry.dialogue.conversation_id)
        if key not in references:
            continue
        dialogue = entry.dialogue.model_copy(deep=True)
        dialogue.metadata = {**dialogue.metadata, "reference": references[key], "annotation_study": study.name}
        for index, utterance in enumerate(dialogue.utterances):
            turn = turns.get((entry.source, dialogue.conversation_id, index))
            if turn is not None:
                utterance.metadata = {**utterance.metadata, "reference": turn}
        cells.setdefault(_cell_axes(entry), []).append(dialogue)
    summary.annotated_conversations = sum(len(v) for v in cells.values())
    runs = [
        CellRun(
            simulator=sim,
            crs=crs,
            dataset=dataset,
            dialogues=dialogues,
            manifest={"config": {"simulator": {"type": sim}, "crs": {"type": crs}}, "annotation_study": study.name},
        )
        for (sim, crs, dataset), dialogues in sorted(cells.items())
    ]
    report = ConversionReport(dataset=f"{study.name}-annotations", inputs=[str(study.annotate_source())])
    write_output(ConversionOutput(dialogues=[d for r in runs for d in r.dialogues], cells=runs), report, folder)
    summary.files += [f"{ANNOTATIONS_DIR}/{f}" for f in (ANNOTATIONS_CSV, ANNOTATIONS_TURNS_CSV, AGREEMENT_CSV)]
    summary.files += [f"{ANNOTATIONS_DIR}/{f}" for f in report.files]
    if tables.excluded_records:
        summary.notes.append(
            f"{tables.excluded_records} annotations of {len(tables.excluded_annotators)} annotator(s) who failed a "
            "gold check are left out (tasks.annotate.exclude_failed_gold)"
        )


def _export_turing(study: Study, state: StudyState, out: Path, summary: ExportSummary) -> None:
    task = study.config.tasks.turing
    assert task is not None
    result = turing_result(state, seed=study.config.seed)
    rows: list[dict[str, Any]] = [
        {
            "method": "people (turing task)",
            "group": "all",
            "statistic": "accuracy",
            "value": result.accuracy,
            "ci_low": result.ci_low,
            "ci_high": result.ci_high,
            "n": result.n_answers,
            "note": f"{result.n_participants} participants; CI: percentile bootstrap over participants; chance 0.5",
        },
        {
            "method": "people (turing task)",
            "group": "human conversations",
            "statistic": "accuracy",
            "value": result.accuracy_human,
            "n": result.n_human,
        },
        {
            "method": "people (turing task)",
            "group": "simulated conversations",
            "statistic": "accuracy",
            "value": result.accuracy_simulated,
            "n": result.n_simulated,
        },
    ]
    try:
        machine = fidelity(
            study.input_path(task.simulated), study.input_path(task.human), seed=study.config.seed, resamples=200
        )
        for row in machine.rows:
            if row.statistic == "discriminator_auc":
                rows.append(
                    {
                        "method": "discriminator (usersimcrs fidelity)",
                        "group": row.simulator,
                        "statistic": "discriminator_auc",
                        "value": row.value,
                        "ci_low": row.ci_low,
                        "ci_high": row.ci_high,
                        "n": row.n_simulated + row.n_human,
                        "note": row.note or "chance 0.5",
                    }
                )
    except DataError as exc:
        rows.append(
            {
                "method": "discriminator (usersimcrs fidelity)",
                "group": "all",
                "statistic": "discriminator_auc",
                "value": None,
                "n": 0,
                "note": f"not measured: {exc}",
            }
        )
    table = pd.DataFrame(rows, columns=["method", "group", "statistic", "value", "ci_low", "ci_high", "n", "note"])
    table.to_csv(out / TURING_CSV, index=False)
    summary.turing = table.to_dict("records")
    summary.files.append(TURING_CSV)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value
