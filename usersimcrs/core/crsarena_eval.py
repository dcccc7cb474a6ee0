"""CRSArena-Eval's facts and formats: the rated aspects and their scales, the conversation-ID layout,
the standard run file (predictions per assistant turn and per dialogue), and how a score about one
assistant turn is named among a conversation's judgments.

Facts (FACE, SIGIR 2026; the public meta-evaluation interface): per assistant turn, relevance
(documented 0-3, 0-2 observed) and interestingness (0-2); per dialogue, understanding,
task_completion, interest_arousal, preference_elicitation, explanation (0-2), efficiency (0-1) and
dialogue_overall (0-4). The official rule scores seven of them (`OFFICIAL`). A conversation ID is
``<crs>_<dataset>_<uuid>``. A run file is a JSON list of
``{"conv_id", "turns": [{"turn_ind", "turn_level_pred": {...}}], "dial_level_pred": {...}}``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from usersimcrs.errors import DataError

AspectLevel = Literal["turn", "dialogue"]


class Aspect(BaseModel):
    """One rated aspect: its level (one score per assistant turn or per dialogue) and its scale."""

    model_config = ConfigDict(frozen=True)

    name: str
    level: AspectLevel
    low: float
    high: float
    official: bool = Field(description="scored by the official rule and reported in the published tables")


ASPECTS: tuple[Aspect, ...] = (
    Aspect(name="relevance", level="turn", low=0, high=3, official=True),
    Aspect(name="interestingness", level="turn", low=0, high=2, official=True),
    Aspect(name="understanding", level="dialogue", low=0, high=2, official=True),
    Aspect(name="task_completion", level="dialogue", low=0, high=2, official=True),
    Aspect(name="interest_arousal", level="dialogue", low=0, high=2, official=True),
    Aspect(name="efficiency", level="dialogue", low=0, high=1, official=True),
    Aspect(name="dialogue_overall", level="dialogue", low=0, high=4, official=True),
    Aspect(name="preference_elicitation", level="dialogue", low=0, high=2, official=False),
    Aspect(name="explanation", level="dialogue", low=0, high=2, official=False),
)
BY_NAME = {a.name: a for a in ASPECTS}
OFFICIAL = tuple(a.name for a in ASPECTS if a.official)
TURN_ASPECTS = tuple(a.name for a in ASPECTS if a.level == "turn")
DIALOGUE_ASPECTS = tuple(a.name for a in ASPECTS if a.level == "dialogue")
ALIASES = {"dialog_overall": "dialogue_overall", "overall_impression": "dialogue_overall"}
"""Other spellings of an aspect in run files and published tables (baselines.json says dialog_overall)."""

TURN_MARK = "@"


def canonical(name: str) -> str:
    """The aspect's canonical name (aliases resolved); other names are returned unchanged."""
    return ALIASES.get(name, name)


def aspect(name: str) -> Aspect | None:
    """The aspect called `name` (or one of its aliases), None for any other name."""
    return BY_NAME.get(canonical(name))


def select_aspects(spec: str | Iterable[str] | None) -> list[str]:
    """Aspect names from 'official' (default), 'all' or a comma-separated list; unknown names are a DataError."""
    if spec is None or spec == "official":
        return list(OFFICIAL)
    if spec == "all":
        return [a.name for a in ASPECTS]
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec) if s.strip()]
    unknown = [n for n in names if aspect(n) is None]
    if unknown:
        raise DataError(
            f"unknown aspect(s) {', '.join(unknown)}; CRSArena-Eval aspects: {', '.join(a.name for a in ASPECTS)}"
        )
    return list(dict.fromkeys(canonical(n) for n in names))


def system_of(conversation_id: str) -> str | None:
    """The CRS part of ``<crs>_<dataset>_<uuid>`` (None when the ID has no '_')."""
    parts = conversation_id.split("_")
    return parts[0] if len(parts) >= 2 and parts[0] else None


def dataset_of(conversation_id: str) -> str | None:
    """The dataset part of ``<crs>_<dataset>_<uuid>``, the official rule's group (None without one)."""
    parts = conversation_id.split("_")
    return parts[1] if len(parts) >= 2 and parts[1] else None


def turn_score_name(name: str, turn_ind: int) -> str:
    """The judgment name of a score about one assistant turn: ``relevance@3`` (3 = the turn's index)."""
    return f"{name}{TURN_MARK}{int(turn_ind)}"


def split_score_name(name: str) -> tuple[str, int | None]:
    """(aspect, turn index) of a judgment name; the index is None for a whole-conversation score."""
    base, mark, turn = name.rpartition(TURN_MARK)
    if mark and base and turn.isdigit():
        return base, int(turn)
    return name, None


def turn_index(position: int, utterance: Any) -> int:
    """An utterance's turn index: its recorded ``metadata["turn_ind"]`` (converted corpora), else its
    position in the dialogue (what CRSArena-Eval's turn_ind is for a conversation stored whole)."""
    value = utterance.metadata.get("turn_ind")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else position


# ---------------------------------------------------------------- the run file


def _number(value: Any) -> float:
    """A prediction as the official rule reads it (parseFloat): a non-number is NaN, never dropped."""
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class RunFileTurn(BaseModel):
    """The predictions for one assistant turn."""

    model_config = ConfigDict(extra="allow")

    turn_ind: int
    turn_level_pred: dict[str, float] = Field(default_factory=dict)

    @field_validator("turn_level_pred", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return {canonical(str(k)): _number(v) for k, v in value.items()} if isinstance(value, dict) else value


class RunFileConversation(BaseModel):
    """One conversation of a run file: per-turn and per-dialogue predictions."""

    model_config = ConfigDict(extra="allow")

    conv_id: str
    turns: list[RunFileTurn] = Field(default_factory=list)
    dial_level_pred: dict[str, float] = Field(default_factory=dict)

    @field_validator("dial_level_pred", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return {canonical(str(k)): _number(v) for k, v in value.items()} if isinstance(value, dict) else value


def looks_like_run_file(data: Any) -> bool:
    """Whether parsed JSON has the run-file shape (a list of objects with `conv_id` and predictions)."""
    return (
        isinstance(data, list)
        and bool(data)
        and all(isinstance(r, dict) and "conv_id" in r and ("turns" in r or "dial_level_pred" in r) for r in data)
    )


def parse_run_file(data: Any, source: str) -> list[RunFileConversation]:
    """Validate parsed run-file JSON; a bad record is a DataError naming `source` and its position."""
    if not isinstance(data, list):
        raise DataError(f"{source}: a run file is a JSON list of conversations")
    out = []
    seen: set[str] = set()
    for position, record in enumerate(data):
        try:
            conversation = RunFileConversation.model_validate(record)
        except ValueError as exc:
            first = " ".join(str(exc).split())[:200]
            raise DataError(f"{source}[{position}]: not a run-file conversation ({first})") from None
        if conversation.conv_id in seen:
            raise DataError(f"{source}[{position}]: conversation {conversation.conv_id!r} appears twice")
        seen.add(conversation.conv_id)
        out.append(conversation)
    return out


def read_run_file(path: str | Path) -> list[RunFileConversation]:
    """A run file from disk (aliases such as dialog_overall read as dialogue_overall)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON run file ({exc})") from None
    return parse_run_file(data, str(path))


def clip(name: str, value: float) -> float:
    """`value` inside the aspect's scale (run files are read with the official scale in mind)."""
    spec = BY_NAME[canonical(name)]
    return min(spec.high, max(spec.low, float(value)))


def run_file_json(conversations: Iterable[RunFileConversation]) -> str:
    """The run file's text: one JSON list, keys as the official rule reads them; non-finite values left out."""
    records = []
    for conversation in conversations:
        turns = [
            {
                "turn_ind": t.turn_ind,
                "turn_level_pred": {k: v for k, v in t.turn_level_pred.items() if math.isfinite(v)},
            }
            for t in conversation.turns
        ]
        dial = {k: v for k, v in conversation.dial_level_pred.items() if math.isfinite(v)}
        records.append({"conv_id": conversation.conv_id, "turns": turns, "dial_level_pred": dial})
    return orjson.dumps(records, option=orjson.OPT_INDENT_2).decode("utf-8")  # json's indent is pure Python: slow


def write_run_file(path: str | Path, conversations: Iterable[RunFileConversation]) -> Path:
    """Write a run file whole (temporary file + rename: a crash never leaves half of one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(run_file_json(conversations), encoding="utf-8")
    os.replace(tmp, path)
    return path


__all__ = [
    "ALIASES",
    "ASPECTS",
    "Aspect",
    "DIALOGUE_ASPECTS",
    "OFFICIAL",
    "RunFileConversation",
    "RunFileTurn",
    "TURN_ASPECTS",
    "aspect",
    "canonical",
    "clip",
    "dataset_of",
    "looks_like_run_file",
    "parse_run_file",
    "read_run_file",
    "run_file_json",
    "select_aspects",
    "split_score_name",
    "system_of",
    "turn_index",
    "turn_score_name",
    "write_run_file",
]
