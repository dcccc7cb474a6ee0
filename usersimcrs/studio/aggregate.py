"""From people's answers to figures: annotation tables, agreement, references, Turing accuracy.

Annotations: one row per (conversation, criterion, annotator) for dialogue-level criteria and per
(conversation, utterance, criterion, annotator) for turn-level ones. Gold conversations are checks,
never data; annotators who failed a gold check are left out when the study says so (counted).
Agreement per criterion is Krippendorff's alpha (ordinal; units = conversations, or system turns
for turn-level criteria; `analysis.agreement.krippendorff_alpha`), with the units rated by at
least two annotators counted. The reference of a conversation is the mean of its annotators.

Turing: accuracy = share of right guesses, with a percentile-bootstrap CI that resamples
participants (each person's guesses move together), plus the accuracy on each kind.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from usersimcrs.judges.rubrics import Rubric
from usersimcrs.studio.records import AnnotationRecord
from usersimcrs.studio.state import StudyState

ANNOTATION_COLUMNS = ["conversation_id", "source", "name", "value", "rater", "level", "utterance"]
BOOTSTRAP = 1000


@dataclass
class AnnotationTables:
    """Valid annotations as a long table, and who was left out."""

    table: pd.DataFrame
    excluded_annotators: list[str]
    excluded_records: int
    gold_checks: int
    gold_passed: int


def failed_gold(state: StudyState) -> set[str]:
    """Annotators who failed at least one gold check."""
    return {r.participant_id for r in state.annotations.values() if r.gold is not None and r.gold_passed is False}


def annotation_tables(state: StudyState, *, exclude_failed_gold: bool) -> AnnotationTables:
    """The long table of non-gold annotations (see module docstring)."""
    failed = failed_gold(state) if exclude_failed_gold else set()
    rows, excluded = [], 0
    gold = [r for r in state.annotations.values() if r.gold is not None]
    for record in state.annotations.values():
        if record.gold is not None:
            continue
        if record.participant_id in failed:
            excluded += 1
            continue
        rows += _rows(record, state)
    table = pd.DataFrame(rows, columns=ANNOTATION_COLUMNS)
    return AnnotationTables(
        table=table,
        excluded_annotators=sorted(failed),
        excluded_records=excluded,
        gold_checks=len(gold),
        gold_passed=sum(1 for r in gold if r.gold_passed),
    )


def _rows(record: AnnotationRecord, state: StudyState) -> list[dict[str, object]]:
    assignment = state.assignments[record.assignment_id]
    source = assignment.shown[record.position].source
    base = {"conversation_id": record.conversation_id, "source": source, "rater": record.participant_id}
    rows: list[dict[str, object]] = [
        {**base, "name": name, "value": value, "level": "dialogue", "utterance": None}
        for name, value in record.ratings.items()
    ]
    for utterance, ratings in record.turn_ratings.items():
        rows += [
            {**base, "name": name, "value": value, "level": "turn", "utterance": int(utterance)}
            for name, value in ratings.items()
        ]
    return rows


def agreement(table: pd.DataFrame, rubric: Rubric) -> pd.DataFrame:
    """Krippendorff's alpha (ordinal) per criterion, with the units and raters behind it."""
    # lazy: scipy and scikit-learn only when the agreement is computed
    from usersimcrs.analysis.agreement import krippendorff_alpha

    out = []
    for criterion in rubric.criteria:
        part = table[table["name"] == criterion.name]
        unit = ["source", "conversation_id"] + (["utterance"] if criterion.level == "turn" else [])
        row: dict[str, object] = {"name": criterion.name, "level": criterion.level, "ratings": len(part)}
        if part.empty:
            out.append({**row, "units": 0, "units_2plus": 0, "raters": 0, "krippendorff_alpha": None})
            continue
        keys = part[unit].astype(str).agg("|".join, axis=1)
        wide = part.assign(unit=keys).pivot_table(index="rater", columns="unit", values="value", aggfunc="mean")
        per_unit = wide.notna().sum(axis=0)
        # alpha needs at least one unit rated twice; with none there is no agreement to measure
        multiple = bool((per_unit >= 2).any())
        alpha = krippendorff_alpha(wide.to_numpy(dtype=float).tolist(), "ordinal") if multiple else float("nan")
        out.append(
            {
                **row,
                "units": int(wide.shape[1]),
                "units_2plus": int((per_unit >= 2).sum()),
                "raters": int(len(wide)),
                "krippendorff_alpha": None if not np.isfinite(alpha) else round(float(alpha), 4),
            }
        )
    return pd.DataFrame(
        out, columns=["name", "level", "ratings", "units", "units_2plus", "raters", "krippendorff_alpha"]
    )


def dialogue_references(table: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """(source, conversation) -> criterion -> mean rating, with `annotators` = how many rated it."""
    part = table[table["level"] == "dialogue"]
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (source, conversation), group in part.groupby(["source", "conversation_id"]):
        means = group.groupby("name")["value"].mean()
        out[(str(source), str(conversation))] = {
            **{str(k): round(float(v), 4) for k, v in means.items()},
            "annotators": float(group["rater"].nunique()),
        }
    return out


def turn_references(table: pd.DataFrame) -> dict[tuple[str, str, int], dict[str, float]]:
    """(source, conversation, utterance index) -> criterion -> mean rating."""
    part = table[table["level"] == "turn"]
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    for (source, conversation, utterance), group in part.groupby(["source", "conversation_id", "utterance"]):
        means = group.groupby("name")["value"].mean()
        out[(str(source), str(conversation), int(utterance))] = {str(k): round(float(v), 4) for k, v in means.items()}
    return out


@dataclass
class TuringResult:
    """People's accuracy at telling human from simulated users."""

    n_answers: int
    n_participants: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    accuracy_human: float | None
    accuracy_simulated: float | None
    n_human: int
    n_simulated: int


def turing_result(state: StudyState, *, seed: int, resamples: int = BOOTSTRAP) -> TuringResult:
    """Accuracy with a participant-level percentile bootstrap CI (None where nothing was answered)."""
    answers = list(state.turing.values())
    if not answers:
        return TuringResult(0, 0, None, None, None, None, None, 0, 0)
    frame = pd.DataFrame(
        {"participant": [a.participant_id for a in answers], "right": [a.answer == a.truth for a in answers]}
    )
    by_kind = {kind: [a.answer == a.truth for a in answers if a.truth == kind] for kind in ("human", "simulated")}
    groups = [g["right"].to_numpy(dtype=float) for _, g in frame.groupby("participant")]
    low = high = None
    if len(groups) >= 2 and resamples > 0:
        rng = np.random.default_rng(seed)
        draws = []
        for _ in range(resamples):
            picked = rng.integers(0, len(groups), size=len(groups))
            values = np.concatenate([groups[i] for i in picked])
            draws.append(values.mean())
        low, high = (float(x) for x in np.quantile(draws, [0.025, 0.975]))
    return TuringResult(
        n_answers=len(answers),
        n_participants=len(groups),
        accuracy=float(frame["right"].mean()),
        ci_low=low,
        ci_high=high,
        accuracy_human=float(np.mean(by_kind["human"])) if by_kind["human"] else None,
        accuracy_simulated=float(np.mean(by_kind["simulated"])) if by_kind["simulated"] else None,
        n_human=len(by_kind["human"]),
        n_simulated=len(by_kind["simulated"]),
    )
