"""Where a simulated user's words came from, as recorded on each USER utterance
(`metadata["generation"]`), and the counts a run reports of turns the model did not write.

Labels, by kind:

- the model's own words: ``structured`` (its JSON answer), ``text`` (its plain-text answer);
- repaired (the model's words, not in the form asked for): ``repaired:prose`` (JSON was asked for,
  prose came back and was used), ``repaired:closed`` (a JSON answer cut off at the token cap and
  closed around what was there);
- fallback (not the model's words): ``fallback:<problem>``, a canned utterance sent because the
  model's answer was unusable (``empty``, ``placeholder``, ``copied``, ``repeated``, ...);
- template: ``template:<what>``, text the simulator's design writes by rule (e.g. the dual-prompt
  user's closing line after the model decided to stop), not a replacement for a failed answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

GENERATION_KEY = "generation"
STRUCTURED = "structured"
TEXT = "text"
REPAIRED_PROSE = "repaired:prose"
REPAIRED_CLOSED = "repaired:closed"
FALLBACK = "fallback"
TEMPLATE = "template"

Kind = Literal["model", "repaired", "fallback", "template"]
MOSTLY_CANNED = 0.5
"""Above this share of canned (fallback) user turns, a run's console and report open with a warning and
its metric values are marked: they measure the CRS's answers to canned lines, not to the LLM user."""


def fallback_label(problem: str | None) -> str:
    """The label of a canned utterance sent instead of an unusable answer (`problem` says why)."""
    return f"{FALLBACK}:{problem or 'empty'}"


def kind_of(label: Any) -> Kind | None:
    """The kind of a generation label; None for an utterance without one (rule-based users, the CRS)."""
    if not isinstance(label, str) or not label:
        return None
    head = label.split(":", 1)[0]
    if head == FALLBACK:
        return "fallback"
    if head == "repaired":
        return "repaired"
    if head == TEMPLATE:
        return "template"
    return "model"


def user_turn_kinds(utterances: Iterable[Any]) -> dict[str, int]:
    """Counts of USER turns by kind (`model`, `repaired`, `fallback`, `template`) and `labelled` (turns
    with any label) over utterances given as `Utterance` models or as their stored dicts."""
    counts = {"labelled": 0, "model": 0, "repaired": 0, "fallback": 0, "template": 0}
    for utterance in utterances:
        participant, metadata = _fields(utterance)
        if participant != "USER":
            continue
        kind = kind_of(metadata.get(GENERATION_KEY))
        if kind is not None:
            counts["labelled"] += 1
            counts[kind] += 1
    return counts


def mostly_canned(canned: int | float, labelled: int | float) -> bool:
    """Whether more than `MOSTLY_CANNED` of the labelled user turns were canned fallbacks."""
    return bool(labelled) and canned / labelled > MOSTLY_CANNED


def canned_warning(canned: int | float, labelled: int | float) -> str | None:
    """The line a run's console and report open with when most user turns were canned (None otherwise)."""
    if not mostly_canned(canned, labelled):
        return None
    return (
        f"warning: {int(canned)} of {int(labelled)} LLM user turns ({canned / labelled:.0%}) were canned fallbacks, "
        "not the model's words: the metrics measure the CRS's answers to canned lines (marked 'canned'); "
        "use a more capable model, or simulator.on_unusable: fail to fail such conversations instead"
    )


def canned_mark(share: float | None) -> str:
    """' ⚠ 75% canned' after a value computed mostly over canned user turns, else ''."""
    return f" ⚠ {share:.0%} canned" if share is not None and share > MOSTLY_CANNED else ""


def _fields(utterance: Any) -> tuple[Any, Mapping[str, Any]]:
    if isinstance(utterance, Mapping):
        return utterance.get("participant"), utterance.get("metadata") or {}
    return getattr(utterance, "participant", None), getattr(utterance, "metadata", None) or {}
