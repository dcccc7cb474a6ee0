"""A rule-based NLU: phrase patterns, slot keywords, slot values and item titles, no LLM needed.

It reads what a CRS typically says ("Which genre are you in the mood for?", "I would recommend:
Heat (1995). Have you seen it?") and also takes the CRS's separate item list as evidence of a
recommendation.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from usersimcrs.config import read_yaml
from usersimcrs.core.dialogue import Dialogue, DialogueAct, SlotValue, Utterance
from usersimcrs.core.items import ItemCollection, display_title, normalize_title, split_year
from usersimcrs.simulators.agenda.nlu.act_parser import ParseResult
from usersimcrs.simulators.agenda.nlu.base import NLU, NLUSettings
from usersimcrs.simulators.agenda.policy.domain import canonical_slot

RULES_PATH = Path(__file__).resolve().parents[1] / "prompts" / "rules_nlu.yaml"
_YEAR_MARK = re.compile(r"\((\d{4})\)")
_SENTENCE_END = re.compile(r"[\n?!]|\.{2,}|\.(?:\s|$)")
_MAX_PREFIX = 160
_ALT_TITLE = re.compile(r"\s*(\([^()]*\))\s*$")
_SMALL_WORDS = {
    "of",
    "the",
    "a",
    "an",
    "and",
    "in",
    "on",
    "to",
    "for",
    "at",
    "with",
    "from",
    "&",
    "-",
    "vs",
    "or",
    "de",
    "la",
}
_QUESTION_START = re.compile(
    r"^\s*(?:what|which|who|whom|any|do|does|did|are|is|would|could|can|have|how|tell me)\b", re.I
)
_MAX_LEXICON_VALUES = 500
_LIST_MARKER = re.compile(r"^\s*(?:\d{1,3}\s*[:.)]|[-\u2022\u2023\u2043\u25e6*\u2013\u2014\u00b7])\s+")
"""A list marker before a title: "1:" (iEvaLM / CRS Arena), "2." or "3)", and bullets ("-", "•", "*")."""
_LIST_LINE = re.compile(
    r"^[ \t]*(?:\d{1,3}\s*[:.)]|[-\u2022\u2023\u2043\u25e6*\u2013\u2014\u00b7])[ \t]+\S[^\n]*$", re.M
)
_DECORATION = " .,;:\"'*_`"


class RulePatterns:
    """The compiled pattern file (roles -> regexes, slot -> keyword regexes, title cues)."""

    def __init__(self, data: dict[str, Any]) -> None:
        flags = re.I | re.M
        self.roles = {
            role: [re.compile(p, flags) for p in patterns]
            for role, patterns in data.items()
            if role not in ("slot_keywords", "title_cues")
        }
        self.title_cues = [re.compile(p, flags) for p in data.get("title_cues", [])]
        self.slot_keywords = {
            canonical_slot(slot): [re.compile(p, re.I) for p in patterns]
            for slot, patterns in (data.get("slot_keywords") or {}).items()
        }

    def matches(self, role: str, text: str) -> bool:
        return any(p.search(text) for p in self.roles.get(role, []))


@lru_cache(maxsize=8)
def load_patterns(path: str = str(RULES_PATH)) -> RulePatterns:
    """Compile a rule file once per process (it is read-only data)."""
    return RulePatterns(read_yaml(path))


def build_lexicon(items: ItemCollection | None, slots: list[str]) -> dict[str, tuple[str, str]]:
    """Lower-cased slot value -> (slot, value) for the domain slots with a manageable vocabulary."""
    lexicon: dict[str, tuple[str, str]] = {}
    if items is None:
        return lexicon
    wanted = set(slots)
    for attribute in items.slots():
        slot = canonical_slot(attribute)
        if slot not in wanted or slot == "TITLE":
            continue
        values = items.slot_values(attribute)
        if len(values) > _MAX_LEXICON_VALUES:
            continue
        for value in values:
            key = value.lower().strip()
            if len(key) >= 3:
                lexicon.setdefault(key, (slot, value))
    return lexicon


class SlotValueMatcher:
    """Finds known slot values in text (read-only once built, so one instance can serve a whole run)."""

    def __init__(self, lexicon: dict[str, tuple[str, str]]) -> None:
        self.lexicon = lexicon
        keys = sorted(lexicon, key=len, reverse=True)
        self.pattern = re.compile(r"\b(" + "|".join(re.escape(k) for k in keys) + r")s?\b", re.I) if keys else None

    def find(self, text: str) -> list[SlotValue]:
        if self.pattern is None:
            return []
        found: dict[tuple[str, str], None] = {}
        for match in self.pattern.finditer(text):
            found.setdefault(self.lexicon[match.group(1).lower()], None)
        return [SlotValue(slot=slot, value=value) for slot, value in found]

    def is_value(self, text: str) -> bool:
        return self.pattern is not None and self.pattern.fullmatch(text.strip()) is not None


def strip_list_marker(title: str, collection: ItemCollection | None = None) -> str:
    """`title` without a leading list marker ("1: Pari (1995)" -> "Pari (1995)").

    A title the collection knows with its marker-like start ("300: Rise of an Empire") is kept.
    """
    marker = _LIST_MARKER.match(title)
    if marker is None:
        return title
    if collection is not None and len(collection) and collection.find_by_title(title, fuzzy=False) is not None:
        return title
    return title[marker.end() :].strip()


def _starts_line(text: str, position: int) -> bool:
    """Whether only spaces stand between the start of the line and `position`."""
    return not text[text.rfind("\n", 0, position) + 1 : position].strip()


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.?!])\s+|\n+|\.\.\.+", text) if s.strip()]


class RuleNLU(NLU):
    """Patterns + keyword/slot-value matching + title lookup in the item collection."""

    def __init__(self, settings: NLUSettings, patterns: RulePatterns | None = None) -> None:
        super().__init__(settings)
        self.patterns = patterns or load_patterns()
        self.values = settings.shared(
            f"agenda.nlu.values:{id(settings.items)}:{','.join(settings.domain.slot_names)}",
            lambda: SlotValueMatcher(build_lexicon(settings.items, settings.domain.slot_names)),
        )

    def intent(self, role: str) -> str:
        return self.settings.roles.get(role, role)

    async def understand(self, utterance: Utterance, dialogue: Dialogue, *, seed: int) -> ParseResult:
        return self.parse(utterance.text, utterance.items)

    def parse(self, text: str, items: list | None = None) -> ParseResult:
        """The agent acts in `text`, in the order a reader meets them."""
        acts: list[DialogueAct] = []
        has_slot = self.settings.domain.has
        titles = self.find_titles(text, items or [])
        if self.patterns.matches("greet", text) and not titles:
            acts.append(DialogueAct(intent=self.intent("greet")))
        if self.patterns.matches("no_results", text):
            acts.append(DialogueAct(intent=self.intent("no_results")))
        elif titles:
            slot = "TITLE" if has_slot("TITLE") else None
            values = [SlotValue(slot=slot, value=t) for t in titles] if slot else []
            acts.append(DialogueAct(intent=self.intent("recommend"), slot_values=values))
        questions = [_without_titles(s, titles) for s in _sentences(text) if "?" in s or _QUESTION_START.match(s)]
        for sentence in questions:
            if titles and re.search(r"\b(?:seen|watched|see|watch)\b", sentence, re.I) and "?" in sentence:
                if not self.patterns.matches("elicit", sentence) or re.search(
                    r"\bhave you (?:seen|watched)\b", sentence, re.I
                ):
                    continue  # "Have you seen it?" belongs to the recommendation
            if self.patterns.matches("elicit_strong", sentence):
                slots = [s for s in self.elicited_slots(sentence) if has_slot(s)]
                acts.append(DialogueAct(intent=self.intent("elicit"), slot_values=[SlotValue(slot=s) for s in slots]))
            elif self.patterns.matches("more", sentence):
                acts.append(DialogueAct(intent=self.intent("more")))
            elif self.patterns.matches("next", sentence):
                acts.append(DialogueAct(intent=self.intent("next")))
            elif self.patterns.matches("elicit", sentence) or self.elicited_slots(sentence):
                slots = [s for s in self.elicited_slots(sentence) if has_slot(s)]
                acts.append(DialogueAct(intent=self.intent("elicit"), slot_values=[SlotValue(slot=s) for s in slots]))
        informed = self.informed_values(text)
        if self.patterns.matches("inform", text) and not any(a.intent == self.intent("inform") for a in acts):
            acts.append(DialogueAct(intent=self.intent("inform"), slot_values=informed))
        if self.patterns.matches("end", text):
            acts.append(DialogueAct(intent=self.intent("end")))
        if not acts and self.patterns.matches("ack", text):
            acts.append(DialogueAct(intent=self.intent("greet")))
        return ParseResult(acts=_dedupe(acts), raw=text)

    def elicited_slots(self, sentence: str) -> list[str]:
        """Slots a question asks about, from slot keywords."""
        return [
            slot for slot, patterns in self.patterns.slot_keywords.items() if any(p.search(sentence) for p in patterns)
        ]

    def informed_values(self, text: str) -> list[SlotValue]:
        """Known slot values mentioned in `text` (genres, ...), from the item collection's lexicon."""
        return self.values.find(text)

    def find_titles(self, text: str, items: list) -> list[str]:
        """Recommended titles: the CRS's item list first, then list lines, then titles found in the text.

        A list line ("1: Twelve Monkeys (a.k.a. 12 Monkeys) (1995)", "- Heat (1995)") is read whole,
        without its marker, so neither the marker nor a fragment of the line becomes a title.
        """
        titles: dict[str, str] = {}
        collection = self.settings.items
        for ref in items:
            title = getattr(ref, "title", None) or getattr(ref, "raw", None)
            if title:
                title = strip_list_marker(title, collection)
                titles.setdefault(normalize_title(title), display_title(title))
        recommending = self.patterns.matches("recommend", text)
        listed: list[tuple[int, int]] = []
        for match in _LIST_LINE.finditer(text):
            title = self._list_title(match.group(0), collection, recommending)
            if title:
                listed.append(match.span())
                titles.setdefault(normalize_title(title), title)

        def in_list(position: int) -> bool:
            return any(start <= position < end for start, end in listed)

        for match in _YEAR_MARK.finditer(text):
            if in_list(match.start()):
                continue
            name = _title_before_year(_prefix_before(text, match.start()))
            if name:
                candidate = self._known_title(strip_list_marker(f"{name} ({match.group(1)})", collection), collection)
                titles.setdefault(normalize_title(candidate), candidate)
        if recommending:
            for cue in self.patterns.title_cues:
                for match in cue.finditer(text):
                    if in_list(match.start(1)):
                        continue
                    candidate = _strip_lead(match.group(1).strip(" .,:;\"'"))
                    resolved = self._resolve(candidate, collection)
                    if resolved:
                        titles.setdefault(normalize_title(resolved), resolved)
        return list(titles.values())

    def _list_title(self, line: str, collection: ItemCollection | None, recommending: bool) -> str | None:
        """The title of one list line: the marker dropped, cut after its "(year)"; None when it is no title
        (a line without a year counts only in a recommending text)."""
        content = strip_list_marker(line.strip(), collection)
        year = _YEAR_MARK.search(content)
        candidate = (content[: year.end()] if year else content).strip(_DECORATION)
        if year is not None:
            return self._known_title(candidate, collection)
        return self._resolve(candidate, collection) if recommending else None

    @staticmethod
    def _known_title(candidate: str, collection: ItemCollection | None) -> str:
        """`candidate` as the collection spells it when it names one item, else as given."""
        item = collection.find_by_title(candidate) if collection is not None and len(collection) else None
        return display_title(item.title) if item else candidate

    def _resolve(self, candidate: str, collection: ItemCollection | None) -> str | None:
        """A candidate title as it should be reported, or None when it is not a title."""
        if not candidate or len(candidate) > 80:
            return None
        words = candidate.lower().split()
        if not words or words[0] in {
            "it",
            "this",
            "that",
            "them",
            "these",
            "those",
            "a",
            "an",
            "some",
            "something",
            "any",
            "anything",
            "one",
            "you",
            "me",
            "more",
        }:
            return None
        if self.values.is_value(candidate):
            return None  # "how about comedy?" suggests a slot value, not an item
        if collection is not None and len(collection):
            item = collection.find_by_title(candidate)
            if item is not None:
                return display_title(item.title)
        return candidate if candidate[:1].isupper() and len(candidate.split()) <= 8 else None


def _prefix_before(text: str, end: int) -> str:
    """The text before a "(year)" back to the previous sentence end or earlier year (bounded, linear)."""
    start = max(0, end - _MAX_PREFIX)
    window = text[start:end]
    cut = 0
    for boundary in _SENTENCE_END.finditer(window):
        cut = boundary.end()
    for year in _YEAR_MARK.finditer(window):
        cut = max(cut, year.end())
    return window[cut:]


def _title_before_year(prefix: str) -> str:
    """The title in front of a "(year)": the trailing run of capitalised words (small words allowed)."""
    alt = _ALT_TITLE.search(prefix)
    if alt:  # "In the Mood For Love (Fa yeung nin wa)": the alternative title belongs to the name
        name = _title_before_year(prefix[: alt.start()])
        return f"{name} {alt.group(1)}" if name else ""
    words = prefix.strip().split()
    run: list[str] = []
    for word in reversed(words):
        bare = word.strip("\"'“”:,")
        if bare[:1].isupper() or bare[:1].isdigit() or (bare.lower() in _SMALL_WORDS and run):
            run.insert(0, word)
        else:
            break
    while run and run[0].strip("\"'") in _SMALL_WORDS - {"the", "a", "an"}:  # lower-case lead-ins only
        run.pop(0)
    return " ".join(run).strip(" ,;\"'")


def _without_titles(sentence: str, titles: list[str]) -> str:
    """The sentence with recognised titles blanked, so "In the Mood for Love" is not read as a question cue."""
    for title in titles:
        name, _ = split_year(title)
        for variant in (title, name):
            if len(variant) >= 3:
                sentence = re.sub(re.escape(variant), " ", sentence, flags=re.I)
    return sentence


def _strip_lead(candidate: str) -> str:
    """Drop lead-in words captured before a title ("how about", "I would recommend:")."""
    candidate = re.sub(
        r"^(?:.*?\b(?:recommend(?:ed)?|suggest|how about|what about|have you seen|have you watched|did you see|try|check out|named)\b\s*:?\s*)",
        "",
        candidate,
        flags=re.I,
    )
    candidate = re.sub(r"^(?:the following items|the movie|the film)\s*:?\s*", "", candidate, flags=re.I)
    return candidate.strip(" .,:;\"'")


def _dedupe(acts: list[DialogueAct]) -> list[DialogueAct]:
    seen: set[str] = set()
    out = []
    for act in acts:
        key = str(act)
        if key not in seen:
            seen.add(key)
            out.append(act)
    return out
