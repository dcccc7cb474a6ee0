"""The validity gate: flags per conversation, so summaries can be given on all and on valid ones.

A conversation that crashed after two utterances must not enter the averages as if it were a
finished one (the anchor's judge gave such dialogues 4.7-4.9 of 5). Flags:

- ``failed``: the run recorded an error on it (status "failed");
- ``too_short``: fewer than `min_utterances` utterances or `min_system_turns` system turns (a user
  who accepts the first recommendation gives 3 utterances and 1 system turn: not too short);
- ``repetition_loop``: the same system text (case and spaces folded) at least `repeat_k` times;
- ``target_leakage``: a target title appears in a USER utterance of a simulator that must not say
  it (target-biased and target-free users describe targets without naming them);
- ``judge_parse_failure``: a judgment of the conversation has no value (the judge's reply did not parse);
- ``truncated_by_turn_limit``: the run stopped it at the turn limit (end reason "max_turns").

A flag that could not be evaluated is None ("not checked"), never False: leakage without targets
(or for a simulator that may name them), a judge parse failure without any judgment of the
conversation, truncation without an end reason. An unchecked flag never makes a conversation
invalid, and its rate is None over n = 0 checked conversations.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import normalize_title
from usersimcrs.metrics.targets import targets_of

FLAGS = [
    "failed",
    "too_short",
    "repetition_loop",
    "target_leakage",
    "judge_parse_failure",
    "truncated_by_turn_limit",
]
_SPACES = re.compile(r"\s+")


class ValidityOptions(BaseModel):
    """Thresholds of the gate and which flags make a conversation invalid."""

    model_config = ConfigDict(extra="forbid")

    min_utterances: int = Field(3, ge=0)
    min_system_turns: int = Field(1, ge=0)
    repeat_k: int = Field(3, ge=2)
    min_title_chars: int = Field(4, ge=1, description="shorter target titles are not checked for leakage")
    leakage_simulators: list[str] = Field(
        default_factory=lambda: ["target_biased", "target_free", "pepper", "ievalm"],
        description="simulator types (substring match, case-insensitive) that must never say a target title",
    )
    check_leakage: bool | None = Field(None, description="None = only for the simulator types above")
    invalidating: list[str] = Field(
        default_factory=lambda: ["failed", "too_short", "repetition_loop", "target_leakage"],
        description="flags that exclude a conversation from the 'valid' summaries",
    )


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text.strip().lower())


def repetition_loop(dialogue: Dialogue, k: int) -> bool:
    """The same (folded) non-empty system text occurs k or more times."""
    counts = Counter(_fold(u.text) for u in dialogue.agent_turns if u.text.strip())
    return any(n >= k for n in counts.values())


def _contains_title(text: str, key: str) -> bool:
    """Whole-word match of a normalised title inside normalised text."""
    folded = " " + normalize_title(text) + " "
    return f" {key} " in folded


def leaked_targets(dialogue: Dialogue, min_chars: int = 4) -> list[str]:
    """Target titles that a USER utterance says outright."""
    keys = checkable_titles(dialogue, min_chars)
    leaked = []
    for key, title in keys.items():
        if any(_contains_title(u.text, key) for u in dialogue.user_turns):
            leaked.append(title)
    return leaked


def checkable_titles(dialogue: Dialogue, min_chars: int = 4) -> dict[str, str]:
    """Normalised target title -> display title, for targets whose title is long enough to check."""
    keys = {}
    for target in targets_of(dialogue):
        key = normalize_title(target.title or target.raw or "")
        if len(key) >= min_chars:
            keys[key] = target.title or target.raw or key
    return keys


def simulator_of(dialogue: Dialogue, default: str | None) -> str | None:
    """The simulator type that produced the dialogue: its metadata when recorded, else the run's."""
    value = dialogue.metadata.get("simulator")
    if isinstance(value, dict):
        value = value.get("type")
    return str(value) if value else default


def _checks_leakage(simulator: str | None, options: ValidityOptions) -> bool:
    if options.check_leakage is not None:
        return options.check_leakage
    name = (simulator or "").lower().replace("-", "_")
    return any(s.lower().replace("-", "_") in name for s in options.leakage_simulators)


def parse_failures(judgments: Iterable[dict[str, Any]]) -> set[str]:
    """Conversation IDs with at least one judgment whose value is missing."""
    return {str(j.get("conversation_id")) for j in judgments if j.get("value") is None}


def leakage_flag(dialogue: Dialogue, simulator: str | None, options: ValidityOptions) -> tuple[bool | None, list[str]]:
    """(target_leakage, leaked titles); None when not checked: simulator exempt or no checkable target title."""
    if not _checks_leakage(simulator_of(dialogue, simulator), options):
        return None, []
    if not checkable_titles(dialogue, options.min_title_chars):
        return None, []
    leaks = leaked_targets(dialogue, options.min_title_chars)
    return bool(leaks), leaks


def flag_conversations(
    dialogues: list[Dialogue],
    *,
    judgments: Iterable[dict[str, Any]] = (),
    simulator: str | None = None,
    max_turns_reason: str = "max_turns",
    options: ValidityOptions | None = None,
) -> pd.DataFrame:
    """One row per conversation: every flag, `leaked` titles, and `valid` (no invalidating flag set)."""
    options = options or ValidityOptions()
    judgments = list(judgments)
    unparsed = parse_failures(judgments)
    judged = {str(j.get("conversation_id")) for j in judgments}
    rows = []
    for d in dialogues:
        leakage, leaks = leakage_flag(d, simulator, options)
        row: dict[str, Any] = {
            "conversation_id": d.conversation_id,
            "failed": d.status == "failed",
            "too_short": len(d.utterances) < options.min_utterances or len(d.agent_turns) < options.min_system_turns,
            "repetition_loop": repetition_loop(d, options.repeat_k),
            "target_leakage": leakage,
            "judge_parse_failure": (d.conversation_id in unparsed) if d.conversation_id in judged else None,
            "truncated_by_turn_limit": (d.end_reason == max_turns_reason) if d.end_reason is not None else None,
            "leaked": "; ".join(leaks),
        }
        row["valid"] = not any(row[flag] is True for flag in options.invalidating)
        rows.append(row)
    table = pd.DataFrame(rows, columns=["conversation_id", *FLAGS, "leaked", "valid"])
    return table.astype({flag: object for flag in FLAGS})


def is_set(values: pd.Series) -> pd.Series:
    """True where a flag is set; unchecked (None/NaN) and False are not set. Works on CSV-read columns too."""
    return values.map(
        lambda v: (
            v is True
            or (isinstance(v, (int, float)) and not pd.isna(v) and bool(v))
            or (isinstance(v, str) and v.strip().lower() == "true")
        )
    )


def is_checked(values: pd.Series) -> pd.Series:
    """True where a flag was evaluated (True or False), False where it holds None/NaN ("not checked")."""
    return values.map(lambda v: not (v is None or (isinstance(v, float) and pd.isna(v)) or v == ""))


def flag_counts(flags: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Flag -> (conversations with it set, conversations where it was checked), and the same for valid."""
    out = {}
    for flag in [*FLAGS, "valid"]:
        column = flags[flag] if flag in flags else pd.Series([], dtype=object)
        out[flag] = (int(is_set(column).sum()), int(is_checked(column).sum()))
    return out


def flag_rates(flags: pd.DataFrame) -> dict[str, float | None]:
    """Share of checked conversations carrying each flag, and the share that is valid; None = not checked (n=0)."""
    return {flag: (count / checked if checked else None) for flag, (count, checked) in flag_counts(flags).items()}
