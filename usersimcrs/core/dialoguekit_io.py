"""DialogueKit JSON reader/writer that keeps IDs, acts, slots and metadata across a round trip.

DialogueKit 0.1.1 writes ``"conversation ID"``/``"utterance ID"`` but reads ``conversation_id``/
``utterance_id``, and some annotated files write ``"slots"`` instead of ``"slot_values"``; this
reader accepts all of them and the writer emits the spellings DialogueKit's reader expects. Our
run fields (status, end reason, seed, profile, ...) travel in ``metadata["usersimcrs"]``; the
profile is written in full there (a run folder stores it once, in `profiles.jsonl`), so one
exported file is self-contained.

Real exports hold dialogue acts whose intent is null or empty (DialogueKit reads them as acts
without an intent); our acts need an intent, so such acts are dropped, the utterance is kept, and
`read_dialoguekit_report` says how many were dropped.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, computed_field

from usersimcrs.core.dialogue import Annotation, Dialogue, DialogueAct, ItemRef, SlotValue, Utterance
from usersimcrs.core.json_types import JSON, JSONObject
from usersimcrs.core.storage import write_atomic
from usersimcrs.core.text_repair import merge_counts, repair_value
from usersimcrs.core.validation import describe_validation_error
from usersimcrs.errors import DataError

logger = logging.getLogger(__name__)

_RUN_KEY = "usersimcrs"
_UTTERANCE_KEYS = {
    "participant",
    "utterance",
    "text",
    "utterance_id",
    "utterance ID",
    "dialogue_acts",
    "annotations",
    "utterance_feedback",
    "feedback",
    "items",
    "latency_s",
    "metadata",
}
_RUN_FIELDS = ("status", "error", "end_reason", "index", "seed", "profile", "profile_id", "timings")


class ActCounts(BaseModel):
    """Dialogue acts seen while reading, and those dropped because they carry no intent."""

    read: int = 0
    dropped_null_intent: int = 0
    dropped_empty_intent: int = 0
    slots_dropped: int = 0
    utterances_affected: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def dropped(self) -> int:
        return self.dropped_null_intent + self.dropped_empty_intent


class DialogueKitRead(BaseModel):
    """What one DialogueKit file held: the dialogues, and what the reader had to leave out."""

    source: str
    dialogues: list[Dialogue]
    acts: ActCounts
    repairs: dict[str, int] = Field(
        default_factory=dict, description="hostile values repaired on reading (core/text_repair.py), by kind"
    )


def _slot_value(raw: JSON, where: str) -> SlotValue:
    if isinstance(raw, dict):
        start, end = raw.get("start"), raw.get("end")
        return SlotValue(
            slot=str(raw.get("slot")),
            value=_opt_str(raw.get("value")),
            start=start if _is_int(start) else None,
            end=end if _is_int(end) else None,
        )
    if isinstance(raw, (list, tuple)) and raw:
        padded = list(raw) + [None] * (4 - len(raw))
        start, end = padded[2], padded[3]
        return SlotValue(
            slot=str(padded[0]),
            value=_opt_str(padded[1]),
            start=start if _is_int(start) else None,
            end=end if _is_int(end) else None,
        )
    raise DataError(f"{where}: slot value must be [slot, value, start, end], got {raw!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _participant_id(raw: Any, default: str) -> str:
    """`{"id": ...}` (DialogueKit) or a bare ID string; anything else falls back to `default`."""
    if isinstance(raw, dict):
        value = raw.get("id", default)
        return default if value is None else str(value)
    if isinstance(raw, (str, int)) and not isinstance(raw, bool):
        return str(raw)
    return default


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _acts(raw_acts: JSON, where: str, counts: ActCounts) -> list[DialogueAct]:
    """An utterance's acts; acts with a null/missing or empty intent are dropped and counted in `counts`."""
    acts = []
    dropped_here = 0
    for j, act in enumerate(raw_acts or []):
        place = f"{where}.dialogue_acts[{j}]"
        if not isinstance(act, dict):
            raise DataError(f"{place}: a dialogue act must be an object")
        slots = act.get("slot_values", act.get("slots")) or []
        if not isinstance(slots, list):
            raise DataError(f"{place}: slot_values must be a list")
        counts.read += 1
        intent = act.get("intent")
        if intent is None or (isinstance(intent, str) and not intent.strip()):
            if intent is None:
                counts.dropped_null_intent += 1
            else:
                counts.dropped_empty_intent += 1
            counts.slots_dropped += len(slots)
            dropped_here += 1
            continue
        if not isinstance(intent, (str, int)) or isinstance(intent, bool):
            raise DataError(f"{place}: intent must be a string, got {type(intent).__name__}")
        acts.append(DialogueAct(intent=str(intent), slot_values=[_slot_value(s, place) for s in slots]))
    counts.utterances_affected += dropped_here > 0
    return acts


def _utterance(raw: JSON, where: str, counts: ActCounts) -> Utterance:
    if not isinstance(raw, dict):
        raise DataError(f"{where}: utterance must be an object")
    participant = str(raw.get("participant", "")).upper()
    if participant not in ("USER", "AGENT"):
        raise DataError(f"{where}: participant must be USER or AGENT, got {raw.get('participant')!r}")
    text = raw.get("utterance", raw.get("text"))
    if not isinstance(text, str):
        raise DataError(f"{where}: missing utterance text")
    acts = _acts(raw.get("dialogue_acts"), where, counts)
    annotations = []
    for ann in raw.get("annotations") or []:
        if isinstance(ann, dict):
            annotations.append(Annotation(key=str(ann.get("key")), value=ann.get("value")))
        elif isinstance(ann, (list, tuple)) and len(ann) == 2:
            annotations.append(Annotation(key=str(ann[0]), value=ann[1]))
        else:
            raise DataError(f"{where}: annotation must be [key, value], got {ann!r}")
    metadata = dict(raw.get("metadata") or {}) if isinstance(raw.get("metadata"), dict) else {}
    for key, value in raw.items():
        if key not in _UTTERANCE_KEYS:
            metadata[key] = value
    feedback = raw.get("utterance_feedback", raw.get("feedback"))
    feedback = feedback if _is_int(feedback) else None
    raw_items = raw.get("items") or []
    if not isinstance(raw_items, list):
        raise DataError(f"{where}: items must be a list")
    try:
        items = [ItemRef.model_validate(i) for i in raw_items if isinstance(i, dict)]
    except ValidationError as exc:
        raise DataError(describe_validation_error(exc, source=where, prefix="items")) from None
    uid = raw.get("utterance_id", raw.get("utterance ID"))
    return Utterance(
        participant=participant,
        text=text,
        utterance_id=None if uid is None else str(uid),
        dialogue_acts=acts,
        annotations=annotations,
        feedback=feedback,
        items=items,
        latency_s=raw.get("latency_s")
        if isinstance(raw.get("latency_s"), (int, float)) and not isinstance(raw.get("latency_s"), bool)
        else None,
        metadata=metadata,
    )


def dialogue_from_dialoguekit(raw: JSON, where: str = "dialogue", counts: ActCounts | None = None) -> Dialogue:
    """One DialogueKit dialogue object -> Dialogue (IDs kept; other toolkits' `metadata.error` -> failed).

    Acts without an intent are dropped; pass `counts` to learn how many.
    """
    counts = ActCounts() if counts is None else counts
    if not isinstance(raw, dict):
        raise DataError(f"{where}: dialogue must be an object")
    cid = raw.get("conversation_id", raw.get("conversation ID"))
    if cid is None:
        raise DataError(f"{where}: missing conversation_id")
    if not isinstance(cid, (str, int)) or isinstance(cid, bool):
        raise DataError(f"{where}: conversation_id must be a string, got {type(cid).__name__}")
    turns = raw.get("conversation")
    if not isinstance(turns, list):
        raise DataError(f"{where}: 'conversation' must be a list of utterances")
    metadata = raw.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DataError(f"{where}: metadata must be an object")
    metadata = dict(metadata)
    run = metadata.pop(_RUN_KEY, None) or {}
    if not isinstance(run, dict):
        raise DataError(f"{where}: metadata.{_RUN_KEY} must be an object")
    utterances = [_utterance(u, f"{where}.conversation[{i}]", counts) for i, u in enumerate(turns)]
    try:
        dialogue = Dialogue(
            conversation_id=str(cid),
            agent_id=_participant_id(raw.get("agent"), "Agent"),
            user_id=_participant_id(raw.get("user"), "User"),
            metadata=metadata,
            utterances=utterances,
            **{k: run[k] for k in _RUN_FIELDS if k in run and run[k] is not None},
        )
    except ValidationError as exc:
        raise DataError(describe_validation_error(exc, source=where, prefix=f"metadata.{_RUN_KEY}")) from None
    if not run and metadata.get("error"):
        dialogue.status = "failed"
        dialogue.error = str(metadata["error"])
    return dialogue


def read_dialoguekit_report(path: str | Path) -> DialogueKitRead:
    """Read a DialogueKit JSON file (a list of dialogues) with counts of the acts left out."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc
    except RecursionError:
        raise DataError(f"{path}: JSON nested deeper than Python reads (a corrupt or hostile file)") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise DataError(f"{path}: unreadable JSON value ({exc})") from None
    data, repairs = repair_value(data)  # lone surrogates, NaN, deep nesting: kept, repaired and counted
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of dialogues")
    counts = ActCounts()
    dialogues = [dialogue_from_dialoguekit(d, f"{path}[{i}]", counts) for i, d in enumerate(data)]
    return DialogueKitRead(source=str(path), dialogues=dialogues, acts=counts, repairs=merge_counts(repairs))


def read_dialoguekit(path: str | Path) -> list[Dialogue]:
    """Read a DialogueKit JSON file (a list of dialogues); dropped intent-less acts are logged."""
    result = read_dialoguekit_report(path)
    if result.acts.dropped:
        logger.warning(
            "%s: dropped %d of %d dialogue acts without an intent (%d null, %d empty)",
            path,
            result.acts.dropped,
            result.acts.read,
            result.acts.dropped_null_intent,
            result.acts.dropped_empty_intent,
        )
    return result.dialogues


def dialogue_to_dialoguekit(dialogue: Dialogue) -> JSONObject:
    """Dialogue -> a DialogueKit JSON object that DialogueKit 0.1.1's reader loads with its IDs."""
    turns = []
    for utt in dialogue.utterances:
        out: dict[str, Any] = {"participant": utt.participant, "utterance": utt.text}
        if utt.utterance_id is not None:
            out["utterance_id"] = utt.utterance_id
        out["dialogue_acts"] = [
            {"intent": act.intent, "slot_values": [[s.slot, s.value, s.start, s.end] for s in act.slot_values]}
            for act in utt.dialogue_acts
        ]
        if utt.annotations:
            out["annotations"] = [[a.key, a.value] for a in utt.annotations]
        if utt.feedback is not None:
            out["utterance_feedback"] = utt.feedback
        if utt.items:
            out["items"] = [i.model_dump(exclude_none=True) for i in utt.items]
        if utt.latency_s is not None:
            out["latency_s"] = utt.latency_s
        if utt.metadata:
            out["metadata"] = utt.metadata
        turns.append(out)
    metadata = dict(dialogue.metadata)
    run = {k: getattr(dialogue, k) for k in _RUN_FIELDS}
    run["profile"] = dialogue.profile.model_dump(mode="json") if dialogue.profile is not None else None
    metadata[_RUN_KEY] = run
    return {
        "conversation_id": dialogue.conversation_id,
        "agent": {"id": dialogue.agent_id, "type": "AGENT"},
        "user": {"id": dialogue.user_id, "type": "USER"},
        "metadata": metadata,
        "conversation": turns,
    }


def write_dialoguekit(dialogues: list[Dialogue], path: str | Path) -> None:
    """Write dialogues as one DialogueKit JSON file (whole or not at all: a full disk leaves the old file)."""
    payload = [dialogue_to_dialoguekit(d) for d in dialogues]
    write_atomic(path, json.dumps(payload, ensure_ascii=False, indent=1, default=str))
