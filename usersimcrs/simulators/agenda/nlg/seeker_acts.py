"""Dialogue acts of human seekers' messages, for the corpus NLG: which real message can speak which act.

A message that carries dialogue acts of its own (an annotated corpus) keeps them, its slot values
becoming placeholders. Otherwise its titles (from the corpus's item annotations), genres
(annotations, the cue file's genre words and the item collection's genre values) and people
(annotations) become ``{TITLE}``, ``{GENRE}`` and ``{PERSON}``; cue patterns (prompts/seeker_acts.yaml) then give each sentence its
intents, and each placeholder joins the act of its sentence that can carry it. A message that any
sentence or placeholder does not fit is left out: the pool holds only messages whose every part the
simulated user can say as its own.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from usersimcrs.config import read_yaml
from usersimcrs.core.dialogue import USER, Dialogue, DialogueAct, SlotValue, Utterance
from usersimcrs.simulators.agenda.nlg.templates import act_signature, templatise
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

SEEKER_ACTS_PATH = Path(__file__).resolve().parents[1] / "prompts" / "seeker_acts.yaml"
PLACEHOLDERS = ("TITLE", "GENRE", "PERSON")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_SLOT_MARK = re.compile(r"\{(TITLE|GENRE|PERSON)\}")
_TOKEN = re.compile(r"\{[A-Z]+\}|[\w']+")
_NEGATION = re.compile(r"\b(?:not|no|never|nor)\b|n't\b", re.I)


@dataclass(frozen=True)
class SeekerCues:
    """The compiled cue file."""

    greeting: re.Pattern[str]
    intents: tuple[tuple[str, re.Pattern[str]], ...]
    filler: re.Pattern[str]
    carries: dict[str, frozenset[str]]
    item_info: tuple[tuple[str, re.Pattern[str]], ...]
    genre_words: dict[str, str]
    function_words: frozenset[str]
    min_coverage: float
    negative_intents: frozenset[str]
    capitalised_ok: frozenset[str]


@lru_cache(maxsize=4)
def load_cues(path: str = str(SEEKER_ACTS_PATH)) -> SeekerCues:
    """Compile a cue file once per process (read-only data)."""
    data: dict[str, Any] = read_yaml(path)
    flags = re.I
    genre_words = {
        str(word).lower(): str(genre) for genre, words in (data.get("genre_words") or {}).items() for word in words
    }
    return SeekerCues(
        greeting=re.compile(data["greeting"], flags),
        intents=tuple(
            (str(intent), re.compile("|".join(f"(?:{p})" for p in patterns), flags))
            for intent, patterns in (data.get("intents") or {}).items()
        ),
        filler=re.compile(data["filler"], flags),
        carries={str(k): frozenset(v) for k, v in (data.get("carries") or {}).items()},
        item_info=tuple((str(slot), re.compile(p, flags)) for slot, p in (data.get("item_info") or {}).items()),
        genre_words=genre_words,
        function_words=frozenset(str(w).lower() for w in data.get("function_words") or []),
        min_coverage=float(data.get("min_coverage", 0.0)),
        negative_intents=frozenset(str(i) for i in data.get("negative_intents") or []),
        capitalised_ok=frozenset(str(w) for w in data.get("capitalised_ok") or []),
    )


@dataclass(frozen=True)
class SeekerMessage:
    """One labelled human message: its text with placeholders, its acts and where it came from."""

    template: str
    acts: tuple[DialogueAct, ...]
    origin: str
    words: int


@dataclass(frozen=True)
class SeekerPool:
    """Labelled seeker messages by act signature, and the counts of what went into the pool."""

    by_signature: dict[str, tuple[SeekerMessage, ...]]
    conversations: int
    held_out: int
    messages: int
    labelled: int

    def candidates(self, acts: list[DialogueAct]) -> list[SeekerMessage]:
        """Messages that speak exactly `acts` (in order); a feedback act's title may be left unsaid."""
        out: list[SeekerMessage] = []
        for key in dict.fromkeys("|".join(parts) for parts in itertools.product(*(_variants(a) for a in acts))):
            out.extend(self.by_signature.get(key, ()))
        return out


def _variants(act: DialogueAct) -> list[str]:
    """Signatures that may speak `act`: its own, and without the title for feedback on the item just shown."""
    signature = act_signature(act)
    if act.intent.startswith("NOTE.") and any(canonical_slot(sv.slot) == "TITLE" for sv in act.slot_values):
        rest = DialogueAct(
            intent=act.intent, slot_values=[sv for sv in act.slot_values if canonical_slot(sv.slot) != "TITLE"]
        )
        return [signature, act_signature(rest)]
    return [signature]


class SeekerLabeller:
    """Labels seeker messages with acts; `genres` maps extra genre spellings (lower case) to a genre."""

    def __init__(self, cues: SeekerCues | None = None, genres: Iterable[str] = ()) -> None:
        self.cues = cues or load_cues()
        words = dict(self.cues.genre_words)
        for genre in genres:
            words.setdefault(genre.lower(), genre.lower())
        keys = sorted(words, key=len, reverse=True)
        self.genre_words = words
        self._genre = re.compile(r"\b(" + "|".join(re.escape(k) for k in keys) + r")s?\b", re.I) if keys else None

    def label_dialogue(self, dialogue: Dialogue) -> list[SeekerMessage]:
        """Every USER message of `dialogue` that its own dialogue acts (an annotated corpus) or the cues fit."""
        people = _people_slots(dialogue)
        out = []
        for index, utterance in enumerate(dialogue.utterances):
            if utterance.participant != USER or not utterance.text.strip():
                continue
            origin = f"{dialogue.conversation_id}:{utterance.utterance_id or index}"
            if utterance.dialogue_acts:
                message = annotated(utterance, origin)
            else:
                message = self.label(utterance, origin=origin, people=people)
            if message is not None:
                out.append(message)
        return out

    def label(
        self, utterance: Utterance, *, origin: str = "", people: dict[str, str] | None = None
    ) -> SeekerMessage | None:
        """The message with placeholders and its acts, or None when some part of it does not fit."""
        text = " ".join(utterance.text.split())
        marked = self.mark(text, utterance)
        if marked is None:
            return None
        template, person_slot = marked, "ACTORS"
        for name in _annotation_list(utterance, "people"):
            person_slot = (people or {}).get(name, person_slot)
        acts = self.acts(template, person_slot)
        if not acts:
            return None
        escaped = template.replace("{", "{{").replace("}", "}}")
        for slot in PLACEHOLDERS:
            escaped = escaped.replace("{{" + slot + "}}", "{" + (person_slot if slot == "PERSON" else slot) + "}")
        return SeekerMessage(template=escaped, acts=tuple(acts), origin=origin, words=len(text.split()))

    def mark(self, text: str, utterance: Utterance) -> str | None:
        """`text` with its titles, genres and people as placeholders (None when a mention overlaps another)."""
        spans: list[tuple[int, int, str]] = []
        for mention in _annotation_list(utterance, "items"):
            if (
                isinstance(mention, dict)
                and isinstance(mention.get("start"), int)
                and isinstance(mention.get("end"), int)
            ):
                # spans count characters of the text as stored; they stay valid if no whitespace was squeezed
                if utterance.text == text:
                    spans.append((mention["start"], mention["end"], "TITLE"))
                    continue
            title = mention.get("title") if isinstance(mention, dict) else None
            spans += _find(text, title, "TITLE")
        for title in _annotation_list(utterance, "movies"):
            spans += _find(text, title, "TITLE") or _find(text, re.sub(r"\s*\(\d{4}\)$", "", str(title)), "TITLE")
        for person in _annotation_list(utterance, "people"):
            spans += _find(text, person, "PERSON")
        for genre in _annotation_list(utterance, "genres"):
            spans += _find(text, genre, "GENRE")
        if self._genre is not None:
            spans += [(m.start(), m.end(), "GENRE") for m in self._genre.finditer(text)]
        chosen: list[tuple[int, int, str]] = []
        for start, end, slot in sorted(set(spans), key=lambda s: (s[0], -(s[1] - s[0]))):
            if chosen and start < chosen[-1][1]:
                if slot != chosen[-1][2] and end > chosen[-1][1]:
                    return None
                continue
            chosen.append((start, end, slot))
        for start, end, slot in reversed(chosen):
            text = text[:start] + "{" + slot + "}" + text[end:]
        return text

    def acts(self, template: str, person_slot: str = "ACTORS") -> list[DialogueAct]:
        """The acts of a message with placeholders, in reading order; [] when a part does not fit."""
        cues = self.cues
        acts: list[DialogueAct] = []
        greeting = cues.greeting.match(template)
        if greeting is not None and greeting.end() > 0:
            acts.append(DialogueAct(intent="DISCLOSE.NON-DISCLOSE"))
            template = template[greeting.end() :]
        used: set[str] = set()
        for sentence in (s.strip() for s in _SENTENCE.split(template)):
            if not sentence:
                continue
            if self._unmarked_name(sentence):
                return []
            matches = self._sentence_acts(sentence)
            slots = [m.group(1) for m in _SLOT_MARK.finditer(sentence)]
            if not matches:
                if not slots and cues.filler.match(sentence):
                    continue
                if not slots or sentence.rstrip().endswith("?") or _NEGATION.search(sentence):
                    return []
                matches = [(0, 0, "DISCLOSE")]
            if self._coverage(sentence, matches) < cues.min_coverage:
                return []  # most of the sentence says something no cue accounts for
            negative = [(start, end) for start, end, intent in matches if intent in cues.negative_intents]
            if any(not any(s <= m.start() < e for s, e in negative) for m in _NEGATION.finditer(sentence)):
                return []  # a negation outside a negative cue would turn the act around
            found = [(start, intent) for start, _, intent in matches]
            bound: dict[int, list[str]] = {}
            for slot in slots:
                if slot in used:
                    return []  # one value per slot: two genres or titles cannot be re-filled from one need
                used.add(slot)
                carriers = [i for i, (_, intent) in enumerate(found) if slot in cues.carries.get(intent, ())]
                if not carriers:
                    return []
                bound.setdefault(carriers[0], []).append(slot)
            for i, (_, intent) in enumerate(found):
                if intent == "DISCLOSE" and not bound.get(i):
                    return []  # a preference the simulated user cannot re-fill with its own
                values = [
                    SlotValue(slot=person_slot if s == "PERSON" else s, value=s.lower()) for s in bound.get(i, [])
                ]
                if intent == "INQUIRE.ITEMINFO":
                    slot = next((name for name, p in cues.item_info if p.search(sentence)), None)
                    values = [SlotValue(slot=slot)] if slot else []
                act = DialogueAct(intent=intent, slot_values=values)
                if not acts or str(acts[-1]) != str(act):
                    acts.append(act)
        return acts

    def _sentence_acts(self, sentence: str) -> list[tuple[int, int, str]]:
        """(start, end, intent) of each cue match in `sentence`, in reading order; earlier intents win overlaps.

        Neighbouring matches of one intent merge into one span."""
        found: list[tuple[int, int, str]] = []
        for intent, pattern in self.cues.intents:
            for match in pattern.finditer(sentence):
                start, end = match.span()
                if end == start or any(start < e and s < end for s, e, _ in found):
                    continue
                found.append((start, end, intent))
        found.sort()
        out: list[tuple[int, int, str]] = []
        for start, end, intent in found:
            if out and out[-1][2] == intent:
                out[-1] = (out[-1][0], end, intent)
            else:
                out.append((start, end, intent))
        return out

    def _unmarked_name(self, sentence: str) -> bool:
        """Whether a capitalised word after the first one (a title or name nobody marked) is in the sentence."""
        tokens = [t.group(0) for t in _TOKEN.finditer(sentence)]
        return any(t[0].isupper() and not t.startswith("{") and t not in self.cues.capitalised_ok for t in tokens[1:])

    def _coverage(self, sentence: str, matches: list[tuple[int, int, str]]) -> float:
        """The share of the sentence's words inside a cue match, a placeholder, or the function words."""
        tokens = list(_TOKEN.finditer(sentence))
        if not tokens:
            return 1.0
        covered = sum(
            1
            for t in tokens
            if t.group(0).startswith("{")
            or t.group(0).lower() in self.cues.function_words
            or any(start <= t.start() < end for start, end, _ in matches)
        )
        return covered / len(tokens)


def annotated(utterance: Utterance, origin: str) -> SeekerMessage | None:
    """A message whose corpus labels its acts: its slot values become placeholders (None unless each occurs once)."""
    text = " ".join(utterance.text.split())
    template = templatise(text, utterance.dialogue_acts)
    if template is None:
        return None
    acts = tuple(
        DialogueAct(
            intent=act.intent,
            slot_values=[SlotValue(slot=canonical_slot(sv.slot), value=sv.value) for sv in act.slot_values],
        )
        for act in utterance.dialogue_acts
    )
    return SeekerMessage(template=template, acts=acts, origin=origin, words=len(text.split()))


def _annotation_list(utterance: Utterance, key: str) -> list[Any]:
    value = utterance.annotation(key, [])
    return list(value) if isinstance(value, list) else []


def _find(text: str, value: object, slot: str) -> list[tuple[int, int, str]]:
    """Whole-word, case-insensitive occurrences of `value` in `text`."""
    if not isinstance(value, str) or len(value.strip()) < 2:
        return []
    pattern = re.compile(r"(?<!\w)" + re.escape(value.strip()) + r"(?!\w)", re.I)
    return [(m.start(), m.end(), slot) for m in pattern.finditer(text)]


def _people_slots(dialogue: Dialogue) -> dict[str, str]:
    """Person name -> ACTORS or DIRECTOR, from the corpus's per-dialogue dictionaries (INSPIRED has them)."""
    out: dict[str, str] = {}
    for key, slot in (("director_dict", "DIRECTOR"), ("actor_dict", "ACTORS")):
        names = dialogue.metadata.get(key)
        if isinstance(names, dict):
            out.update({str(name): slot for name in names})
    return out
