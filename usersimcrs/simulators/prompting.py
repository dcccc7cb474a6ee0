"""Prompt rendering shared by the LLM simulators: templates, history, needs, items, cleaning.

History is rendered once per turn, each utterance once with its speaker label (the anchor
toolkit printed "USER: USER: ..."), and always includes both participants.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from typing import Any, Iterable, Mapping

from usersimcrs.core.dialogue import AGENT, USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import ItemCollection, display_title
from usersimcrs.core.json_types import JSONObject, JSONSchema
from usersimcrs.core.profile import InformationNeed, Preferences
from usersimcrs.llm.base import Message

DEFAULT_LABELS = {USER: "USER", AGENT: "RECOMMENDER"}
_VARIABLE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
_WS = re.compile(r"[ \t]+")

# the short flag before the free text: constrained decoders write properties in schema order, so an
# answer cut off at max_tokens still holds a decision and an utterance it can be closed around
UTTERANCE_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {"end": {"type": "boolean"}, "utterance": {"type": "string"}},
    "required": ["utterance", "end"],
    "additionalProperties": False,
}


def derive_seed(seed: int, turn: int, purpose: str) -> int:
    """A 31-bit seed for one LLM call, fixed by the conversation seed, turn index and purpose."""
    digest = hashlib.sha256(f"{seed}:{turn}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def fill(template: str, variables: Mapping[str, Any]) -> str:
    """Replace ``{name}`` placeholders; unknown names and other braces (JSON examples) stay as they are."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        return str(variables[name]) if name in variables else match.group(0)

    return _VARIABLE.sub(replace, template)


def optional(template: str | None, value: str, **more: Any) -> str:
    """`template` filled with ``{value}`` when `value` is non-empty, else an empty string."""
    if not value or not template:
        return ""
    return fill(template, {"value": value, **more})


def squeeze(text: str) -> str:
    """Collapse blank-line runs left by empty optional sections."""
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def labels_of(prompt: Mapping[str, Any]) -> dict[str, str]:
    """Speaker labels from the prompt data (USER/AGENT -> label)."""
    return {**DEFAULT_LABELS, **(prompt.get("labels") or {})}


def utterance_line(utterance: Utterance, labels: Mapping[str, str]) -> str:
    """One history line: the speaker label once, then the text on one line."""
    text = _WS.sub(" ", utterance.text.replace("\n", " ")).strip()
    return f"{labels[utterance.participant]}: {text}"


def render_history(
    utterances: Iterable[Utterance],
    labels: Mapping[str, str],
    *,
    empty: str = "(no messages yet)",
    max_utterances: int | None = None,
) -> str:
    """The conversation as labelled lines, both participants, oldest first."""
    turns = list(utterances)
    if max_utterances is not None and len(turns) > max_utterances:
        turns = turns[-max_utterances:]
    return "\n".join(utterance_line(u, labels) for u in turns) or empty


def history_messages(utterances: Iterable[Utterance]) -> list[Message]:
    """Chat-mode history: the CRS speaks as 'user', the simulated user as 'assistant'."""
    return [Message(role="assistant" if u.participant == USER else "user", content=u.text) for u in utterances]


def render_need(need: InformationNeed, items: ItemCollection | None = None, *, show_targets: bool = False) -> str:
    """Constraints and requests as lines (targets only when asked for, by title)."""
    lines = [f"- {slot}: {value}" for slot, value in need.constraints.items()]
    if need.requests:
        lines.append(f"- you want to find out: {', '.join(need.requests)}")
    if show_targets and need.targets:
        lines.append(f"- you are hoping for: {', '.join(ref_title(t, items) for t in need.targets)}")
    return "\n".join(lines)


def render_preferences(prefs: Preferences, *, per_slot: int = 3) -> str:
    """The user's strongest liked and disliked slot values, one line each."""
    liked: list[str] = []
    disliked: list[str] = []
    for slot, values in prefs.slots.items():
        ranked = sorted(values.items(), key=lambda vs: (-vs[1], vs[0]))
        liked.extend(f"{v} ({slot})" for v, s in ranked[:per_slot] if s > 0)
        disliked.extend(f"{v} ({slot})" for v, s in ranked[::-1][:per_slot] if s < 0)
    lines = []
    if liked or prefs.likes:
        lines.append("- you like: " + "; ".join([*liked, *prefs.likes[:4]]))
    if disliked or prefs.dislikes:
        lines.append("- you dislike: " + "; ".join([*disliked, *prefs.dislikes[:4]]))
    return "\n".join(lines)


def ref_title(ref: ItemRef, items: ItemCollection | None = None) -> str:
    """A display title for an item reference (from the collection when the ID is known)."""
    item = items.get(ref.id) if items is not None and ref.id else None
    return display_title(item.title if item else ref.title or ref.raw or ref.id or "?")


def render_items(refs: Iterable[ItemRef], items: ItemCollection | None, *, slots: Iterable[str] | None = None) -> str:
    """Numbered item lines with metadata from the collection (title only when unknown)."""
    lines = []
    for rank, ref in enumerate(refs, start=1):
        item = items.get(ref.id) if items is not None and ref.id else None
        lines.append(f"{rank}. " + (item.describe(slots) if item else ref_title(ref, items)))
    return "\n".join(lines)


def _label_pattern(labels: Iterable[str]) -> str:
    names = sorted({re.escape(label) for label in labels if label}, key=len, reverse=True)
    return "|".join(names)


@functools.lru_cache(maxsize=256)
def _label_regexes(
    own_labels: tuple[str, ...], other_labels: tuple[str, ...]
) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None, re.Pattern[str] | None]:
    """`clean_utterance`'s patterns for a pair of label sets (built once, not on every turn): where another
    speaker's label starts, our own label at the start, and our own label on a later line."""
    own = _label_pattern(own_labels)
    other = _label_pattern(other_labels)
    cut = re.compile(rf"(?:^|\n|\s)(?:{other})\s*:", flags=re.I) if other else None
    if not own:
        return cut, None, None
    return cut, re.compile(rf"^\s*(?:{own})\s*:\s*", flags=re.I), re.compile(rf"\n\s*(?:{own})\s*:", flags=re.I)


def clean_utterance(
    text: str,
    *,
    own_labels: Iterable[str],
    other_labels: Iterable[str],
    stop_token: str | None = None,
    max_chars: int = 500,
) -> tuple[str, bool]:
    """Make a raw generation usable; returns (utterance, stop token seen).

    Strips our own speaker prefixes and wrapping quotes, cuts where another speaker's label
    starts (the model went on to write the recommender's turn), and removes the stop token.
    """
    stopped = False
    if stop_token and stop_token in text:
        stopped = True
        text = text.replace(stop_token, " ")
    text = text.strip().strip("\"'`").strip()
    cut_at_other, lead, again_at = _label_regexes(tuple(own_labels), tuple(other_labels))
    if cut_at_other is not None:
        cut = cut_at_other.search(text)
        if cut:
            text = text[: cut.start()]
    if lead is not None and again_at is not None:
        # a new turn of our own after some text also ends this utterance
        while lead.match(text):
            text = lead.sub("", text, count=1)
        again = again_at.search(text)
        if again:
            text = text[: again.start()]
    text = _WS.sub(" ", text.replace("\n", " ")).strip()
    text = text.strip("\"'` ").strip().rstrip(",:;-(").rstrip()
    if len(text) > max_chars:
        cut_at = max(text.rfind(". ", 0, max_chars), text.rfind("? ", 0, max_chars), text.rfind("! ", 0, max_chars))
        text = text[: cut_at + 1] if cut_at > 0 else text[:max_chars].rstrip()
    return text, stopped


_PLACEHOLDER = re.compile(r"\s*(<[^<>]*>|\[[^\[\]]*\]|\(.*\)|\.{2,}|\u2026)\s*")
_PLACEHOLDER_WORDS = {"user message", "your message", "message", "utterance", "text", "end", "true", "false"}


def unusable_reason(text: str, prompt_texts: Iterable[str], own: Iterable[str], crs: Iterable[str] = ()) -> str | None:
    """Why a cleaned generation cannot be sent (empty, placeholder, copied, repeated), or None.

    Small models often echo a format placeholder, a line of the instructions or the CRS's last
    turn; such output is replaced by a safe utterance rather than sent to the CRS. CRS turns are
    cut out of the prompt texts first and only a whole-utterance echo of one counts, so quoting a
    recommended title stays allowed.
    """
    if not text or not re.search(r"\w", text):
        return "empty"
    if _PLACEHOLDER.fullmatch(text) or text.lower().strip(" .!") in _PLACEHOLDER_WORDS:
        return "placeholder"
    folded = text.lower().strip()
    if folded in {o.lower().strip() for o in own}:
        return "repeated"
    if len(folded) < 12:  # too short to count as copied from the CRS or the instructions
        return None
    crs = [c.lower().strip() for c in crs if c.strip()]
    if any(folded == c or (len(folded) >= 25 and folded in c) for c in crs):
        return "copied"
    instructions = [p.lower() for p in prompt_texts]
    for turn in crs:
        instructions = [p.replace(turn, " ") for p in instructions]
    if any(_mostly_copied(folded, p) for p in instructions):
        return "copied"
    return None


def _mostly_copied(text: str, source: str, share: float = 0.6) -> bool:
    """True when one stretch of `source` makes up most of `text` (an echo of prompt lines).

    The longest common substring is at least `need` long exactly when some `need`-long window of
    `text` occurs in `source`, so substring searches in C replace difflib's longest-match scan
    (same answer, a fraction of the CPU on every user turn).
    """
    if text in source:
        return True
    need = max(20, math.ceil(share * len(text)))
    return any(text[start : start + need] in source for start in range(len(text) - need + 1))


def parse_json_object(text: str) -> JSONObject | None:
    """The first JSON object in `text` (models sometimes wrap it in prose or code fences)."""
    start = text.find("{")
    while start != -1:
        depth = 0
        for pos in range(start, len(text)):
            if text[pos] == "{":
                depth += 1
            elif text[pos] == "}":
                depth -= 1
                if depth == 0:
                    try:
                        value = json.loads(text[start : pos + 1])
                    except json.JSONDecodeError:
                        break
                    return value if isinstance(value, dict) else None
        start = text.find("{", start + 1)
    return None


def last_agent_turn(dialogue: Dialogue) -> Utterance | None:
    """The most recent CRS utterance."""
    for utterance in reversed(dialogue.utterances):
        if utterance.participant == AGENT:
            return utterance
    return None


def user_turn_count(dialogue: Dialogue) -> int:
    """How many user utterances the dialogue already has (the next turn's index)."""
    return sum(1 for u in dialogue.utterances if u.participant == USER)
