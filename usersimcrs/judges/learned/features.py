"""What the learned evaluator reads from a conversation: numeric features per assistant turn, the
turn's words, and per-dialogue aggregates. Pure functions of the stored text (and of the user's
dialogue acts where a simulator annotated them); no LLM, no network.

Per assistant turn, with P the user turn before it and N the user turn after it (the user's
reaction): how long the reply is, how many titles it names and whether it is a list, whether it
asks a question or for preferences, talks about itself, apologises, closes politely or announces an
offer without naming a title, how much it repeats earlier replies and titles and itself, how much
of P it picks up; what P asks for (recommendations, reasons) and whether P already complained;
whether N accepts, rejects, thanks, has seen it, complains, asks why, gives up, repeats P's request or
picks up the reply's titles, and whether N is the user's last word; the turn's position. A few products
pair a request with the kind of reply (a "why?" answered with a list). Whether the recommendations
answer what was asked: the titles the reply names are looked up in an item catalogue (when the model
has one) and their genres and keywords compared with the genres and words the user asked for; how many
catalogue items a reply recommends and how many of them are new in the conversation, and per conversation
how many distinct catalogue items were recommended (in all and per reply): real recommendations are the
task, whichever CRS makes them. A numbered list line without a year names a title as a dated title does.
The reply's length is relative to the conversation's other replies (a CRS's verbosity is a fact about
the CRS, not about the conversation); a reply that left a title out ("Have you seen ?") or greets
mid-conversation is flagged. The cue words are data (`cues.yaml`); the model records their hash.
Any change to what these functions compute must raise `FEATURES_VERSION`, which makes models
trained before refuse to load.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.core.dialogue_text import DialogueText, dialogue_text
from usersimcrs.core.items import ItemCollection, normalize_title
from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import parse_yaml_mapping

FEATURES_VERSION = 4
CUES_FILE = "cues.yaml"
TEXT_BLOCKS = ("assistant", "previous_user", "next_user")
"""The words a turn model weighs: the reply, the user turn before it and the user's reaction."""

_TOKEN = re.compile(r"[\w']+")
_YEAR = re.compile(r"\(\s*((?:19|20)\d\d)\s*\)")
_LIST_LINE = re.compile(r"(?m)^\s*\d{1,2}\s*[:.)]?\s+\S")
_LIST_TITLE = re.compile(r"(?m)^\s*\d{1,2}\s*[:.)]?\s+([^\n(]+?)\s*(?:\s-\s.*)?$")
"""A numbered list line without a year: its text (up to " - ") is a title."""
_LIST_NUMBER = re.compile(r"^\s*\d{1,2}\s*[:.)]?\s+")
"""The number of a list line before its title ("1  Heat (1995)")."""
_QUOTES = str.maketrans({"’": "'", "‘": "'", "`": "'"})


class CueLists(BaseModel):
    """`cues.yaml`: phrase lists per cue and the intents that count as each cue."""

    model_config = ConfigDict(extra="forbid")

    kind: str = "evaluator_cues"
    reject: list[str]
    accept: list[str]
    why: list[str]
    request: list[str]
    thanks: list[str]
    seen: list[str]
    complaint: list[str]
    self_talk: list[str]
    apology: list[str]
    closing: list[str]
    offer: list[str]
    greeting: list[str]
    give_up: list[str]
    slot_words: str
    genres: dict[str, list[str]]
    stopwords: str
    intents: dict[str, list[str]] = Field(default_factory=dict)


@dataclass(frozen=True)
class CueSet:
    """Several cues compiled together, found in one pass over an utterance: single words through a
    word -> cues table, phrases through one pattern tried at every position (longest phrase first;
    a phrase that matches also counts for the phrases that are its first words)."""

    names: tuple[str, ...]
    words: dict[str, frozenset[str]]
    word_set: frozenset[str]
    phrases: re.Pattern[str] | None
    phrase_cues: dict[str, frozenset[str]]

    @classmethod
    def of(cls, lists: Mapping[str, Iterable[str]]) -> CueSet:
        words: dict[str, set[str]] = {}
        phrases: dict[str, set[str]] = {}
        for name, items in lists.items():
            for item in items:
                parts = tokens(item)
                if len(parts) == 1:
                    words.setdefault(parts[0], set()).add(name)
                elif parts:
                    phrases.setdefault(" " + " ".join(parts) + " ", set()).add(name)
        covered = {
            phrase: frozenset(name for other, names in phrases.items() if phrase.startswith(other) for name in names)
            for phrase in phrases
        }
        ordered = sorted(phrases, key=len, reverse=True)
        pattern = re.compile("(?=(" + "|".join(map(re.escape, ordered)) + "))") if phrases else None
        return cls(tuple(lists), {w: frozenset(n) for w, n in words.items()}, frozenset(words), pattern, covered)

    def find(self, token_set: frozenset[str], padded: str) -> set[str]:
        """The names of the cues the utterance (its word set and padded words) shows."""
        hit: set[str] = set()
        for word in self.word_set.intersection(token_set):
            hit |= self.words[word]
        if self.phrases is not None:
            for phrase in self.phrases.findall(padded):
                hit |= self.phrase_cues[phrase]
        return hit


@dataclass(frozen=True)
class Cues:
    """The compiled cue lists (user cues and assistant cues) and the hash of the file they came from."""

    user: CueSet
    assistant: CueSet
    stopwords: frozenset[str]
    intents: dict[str, frozenset[str]]
    sha256: str
    genres: CueSet
    empty_slot: re.Pattern[str]


USER_CUES = ("reject", "accept", "why", "request", "thanks", "seen", "complaint", "give_up")
ASSISTANT_CUES = ("self_talk", "apology", "closing", "offer", "greeting")


@functools.cache
def load_cues() -> Cues:
    """The shipped cue lists (parsed once per process)."""
    raw = resources.files(__package__).joinpath(CUES_FILE).read_bytes()
    source = f"usersimcrs/judges/learned/{CUES_FILE}"
    lists = validate(CueLists, parse_yaml_mapping(raw.decode("utf-8"), source=source), source=source)
    return Cues(
        user=CueSet.of({name: getattr(lists, name) for name in USER_CUES}),
        assistant=CueSet.of({name: getattr(lists, name) for name in ASSISTANT_CUES}),
        stopwords=frozenset(lists.stopwords.split()),
        intents={k: frozenset(v) for k, v in lists.intents.items()},
        sha256=hashlib.sha256(raw).hexdigest(),
        genres=CueSet.of(lists.genres),
        empty_slot=re.compile(r"\b(?:" + "|".join(map(re.escape, lists.slot_words.split())) + r")(?:\s*\?|\s*$|  +)"),
    )


@dataclass(frozen=True)
class CatalogueItem:
    """What the features read of a catalogue item: its key (normalised title and year), its genres and the
    words of its keywords."""

    key: str
    genres: frozenset[str]
    keywords: frozenset[str]


class Catalogue:
    """Items by normalised title and year, to tell what a reply recommends (genres, keywords).

    A title in a reply is the text before a "(year)"; as that text may start with the reply's own words
    ("Have you seen Heat (1995)"), its last 1 to 12 words are tried, longest first, against the titles of
    that year and the years beside it (catalogues and CRSs disagree by one year now and then)."""

    def __init__(self, items: Iterable[Any], sha256: str = "", path: str = "") -> None:
        self.sha256 = sha256
        self.path = path
        self.by_year: dict[int | None, dict[str, CatalogueItem]] = {}
        self.by_title: dict[str, CatalogueItem] = {}
        self.longest: dict[int | None, int] = {}  # the most words of a title, per year
        self.size = 0
        for item in items:
            key = normalize_title(item.title)
            entry = CatalogueItem(
                key=f"{key} ({item.year})",
                genres=frozenset(item.values("genres")),
                keywords=frozenset(tokens(" ".join(item.values("keywords")))),
            )
            self.by_year.setdefault(item.year, {}).setdefault(key, entry)
            self.by_title.setdefault(key, entry)
            self.longest[item.year] = max(self.longest.get(item.year, 0), key.count(" ") + 1)
            self.size += 1

    @classmethod
    def load(cls, path: str | Path) -> Catalogue:
        """A MovieLens-style item CSV (`movieId,title,genres,keywords`, values separated by "|")."""
        path = Path(path)
        items = ItemCollection.from_csv(path, delimiters={"genres": "|", "keywords": "|"})
        return cls(items, hashlib.sha256(path.read_bytes()).hexdigest(), str(path))

    def resolve(self, words: Sequence[str], year: int | None) -> CatalogueItem | None:
        """The item whose title ends `words` (the longest match), of `year` or a year beside it; without a
        year (a list line), the item whose title is all of `words`, of any year."""
        if year is None:
            return self.by_title.get(" ".join(words))
        years = (year, year - 1, year + 1)
        tables = [t for t in (self.by_year.get(y) for y in years) if t]
        longest = max((self.longest[y] for y in years if y in self.longest), default=0)
        for k in range(min(len(words), longest, 12), 0, -1):
            key = " ".join(words[-k:])
            for table in tables:
                hit = table.get(key)
                if hit is not None:
                    return hit
        return None


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words: "don't")."""
    return _TOKEN.findall(text.translate(_QUOTES).lower())


def ngrams(words: list[str]) -> list[str]:
    """Unigrams and bigrams of a token list: the terms of the text blocks."""
    return words + list(map(" ".join, zip(words, words[1:])))


@dataclass(slots=True)
class Reading:
    """What the features need from one utterance, computed once (a user turn serves two assistant turns)."""

    words: list[str]
    terms: list[str]
    token_set: frozenset[str]
    padded: str
    content: frozenset[str]
    titles: frozenset[str]
    n_titles: int
    is_list: bool
    question: bool
    exclaim: bool
    flags: dict[str, bool]
    genres: frozenset[str]
    broken: bool
    dated: tuple[tuple[tuple[str, ...], int | None], ...]
    """The words before each "(year)" with the year, and numbered list lines without a year (year None):
    titles to look up in a catalogue."""

    @property
    def length(self) -> int:
        return len(self.words)


class TurnText(NamedTuple):
    """What the features read of one utterance: plain values, cheap to build and to send to a worker."""

    assistant: bool
    text: str
    turn_ind: int
    items: tuple[str, ...] = ()
    intents: frozenset[str] = frozenset()


ConversationText = tuple[str, list[TurnText]]
"""A conversation as the features read it: its ID and its utterances."""


def conversation_text(dialogue: Dialogue | DialogueText) -> ConversationText:
    """The plain values of a conversation the features read (item titles, user act intents, turn
    indices: the recorded `turn_ind`, else the utterance's position). A stored line read with
    `RunFolder.dialogue_texts` and the same dialogue as a full `Dialogue` give the same values."""
    if isinstance(dialogue, Dialogue):
        dialogue = dialogue_text(dialogue)
    turns = []
    for i, u in enumerate(dialogue.utterances):
        turn = u.metadata.turn_ind if u.metadata is not None else None
        turns.append(
            TurnText(
                u.participant == AGENT,
                u.text,
                turn if type(turn) is int else i,
                tuple(t for t in ((x.title or x.id or "").strip().lower() for x in u.items) if t) if u.items else (),
                frozenset(a.intent.upper() for a in u.dialogue_acts) if u.dialogue_acts else frozenset(),
            )
        )
    return dialogue.conversation_id, turns


def read(turn: TurnText, cues: Cues) -> Reading:
    """One utterance's tokens, titles and cue flags (acts, where annotated, count as cues too)."""
    text = turn.text
    words = tokens(text)
    token_set = frozenset(words)
    padded = " " + " ".join(words) + " "
    dated: tuple[tuple[tuple[str, ...], int | None], ...] = ()
    undated = (
        tuple((tuple(tokens(m)), None) for m in _LIST_TITLE.findall(text)) if turn.assistant and "\n" in text else ()
    )
    if "(" in text:
        years = list(_YEAR.finditer(text))
        before = [(_title_before(text, m.start()), m) for m in years]
        titles = {title for title, _ in before if title}
        n_years = len(years)
        if turn.assistant:
            dated = tuple((tuple(tokens(title)), int(m.group(1))) for title, m in before if title)
    else:
        titles, n_years = set(), 0
    dated += tuple(entry for entry in undated if entry[0])
    titles.update(" ".join(words_) for words_, _ in undated if words_)
    titles.update(turn.items)
    cue_set = cues.assistant if turn.assistant else cues.user
    hit = cue_set.find(token_set, padded)
    if turn.intents:
        hit.update(name for name in cue_set.names if not turn.intents.isdisjoint(cues.intents.get(name, ())))
    flags = {name: name in hit for name in cue_set.names}
    return Reading(
        words=words,
        terms=ngrams(words),
        token_set=token_set,
        padded=padded,
        content=frozenset(w for w in token_set - cues.stopwords if len(w) > 2),
        titles=frozenset(titles),
        n_titles=max(n_years, len(turn.items), len(undated)),
        is_list="following items" in padded or ("\n" in text and len(_LIST_LINE.findall(text)) >= 2),
        question="?" in text,
        exclaim="!" in text,
        flags=flags,
        genres=frozenset() if turn.assistant else frozenset(cues.genres.find(token_set, padded)),
        broken=turn.assistant
        and (not any(c.isalnum() for c in text) or cues.empty_slot.search(text.strip()) is not None),
        dated=dated,
    )


def _title_before(text: str, end: int) -> str:
    """The words before a "(year)" back to the previous line break, colon or bracket (at most 80 characters)."""
    start = max(0, end - 80)
    cut = max(text.rfind(mark, start, end) for mark in "\n:()")
    return _LIST_NUMBER.sub("", text[(cut + 1 if cut >= 0 else start) : end]).strip().lower()


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _share(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(whole) if whole else 0.0


TURN_FEATURES = (
    "a_words_rel",
    "a_titles",
    "a_has_title",
    "a_list",
    "a_question",
    "a_self_talk",
    "a_apology",
    "a_closing",
    "a_offer_without_title",
    "a_asks_preference",
    "a_distinct",
    "a_repeats_reply",
    "a_same_as_earlier",
    "a_repeats_titles",
    "a_new_titles",
    "a_picks_up_p",
    "a_names_p_title",
    "a_broken",
    "a_late_greeting",
    "a_resolved_share",
    "a_genre_match",
    "a_genre_miss",
    "a_keyword_match",
    "a_items_found",
    "a_new_items_found",
    "p_present",
    "p_words",
    "p_question",
    "p_why",
    "p_request",
    "p_reject",
    "p_accept",
    "p_complaint",
    "p_genre",
    "n_present",
    "n_words",
    "n_question",
    "n_short_question",
    "n_reject",
    "n_accept",
    "n_why",
    "n_thanks",
    "n_seen",
    "n_complaint",
    "n_give_up",
    "n_exclaim",
    "n_repeats_p",
    "n_picks_up_a",
    "n_names_a_title",
    "n_final",
    "x_why_list",
    "x_why_titles",
    "x_request_titles",
    "x_question_question",
    "x_request_repeat",
    "x_reject_titles",
    "pos_log",
    "pos_rel",
    "pos_first",
    "pos_last",
    "turns_log",
)


@dataclass
class ConversationFeatures:
    """One conversation as the model sees it: per assistant turn its index, features and words."""

    turn_inds: list[int]
    hand: np.ndarray
    docs: dict[str, list[list[str]]]
    extra: np.ndarray
    words: list[int]
    """Words of every utterance (for the drift check against the training ranges)."""


LAST_REACTION_CUES = ("reject", "accept", "thanks", "seen", "complaint", "why", "request", "give_up")
"""Cues of the user's last turn after the first reply (the user's last word on the conversation)."""
EXTRA_FEATURES = (
    "turns_log",
    "user_words_log",
    "distinct_titles_log",
    "items_found_log",
    "items_found_per_turn",
    "final_user_reject",
    "final_user_accept",
    "ends_with_user",
    *(f"last_reaction_{name}" for name in LAST_REACTION_CUES),
)
"""Whole-conversation features beside the aggregates of the turn features."""


def conversation_features(
    conversation: Dialogue | DialogueText | ConversationText,
    cues: Cues | None = None,
    catalogue: Catalogue | None = None,
) -> ConversationFeatures:
    """The features of every assistant turn of a conversation (in order) and its whole-conversation
    extras. Without a catalogue the features that compare recommended items with the request are 0."""
    cues = cues or load_cues()
    _, utterances = conversation if isinstance(conversation, tuple) else conversation_text(conversation)
    readings = [read(u, cues) for u in utterances]
    assistant = [i for i, u in enumerate(utterances) if u.assistant]
    count = len(assistant)
    rows: list[list[float]] = []
    docs: dict[str, list[list[str]]] = {block: [] for block in TEXT_BLOCKS}
    seen_content: list[frozenset[str]] = []
    seen_titles: set[str] = set()
    seen_items: set[str] = set()  # catalogue keys of the items the replies recommended so far
    seen_replies: set[str] = set()
    before: list[Reading | None] = []  # the latest user turn before each position
    asked: list[frozenset[str]] = []  # the genres of the latest user turn that named any, before each position
    asked_words: list[frozenset[str]] = []  # the user's content words so far, before each position
    latest: Reading | None = None
    genres: frozenset[str] = frozenset()
    said: frozenset[str] = frozenset()
    for u, r in zip(utterances, readings):
        before.append(latest)
        asked.append(genres)
        asked_words.append(said)
        if not u.assistant:
            latest = r
            genres = r.genres or genres
            said = said | r.content
    last_user = latest  # the conversation's final user turn
    after: list[Reading | None] = [None] * len(utterances)  # the first user turn after each position
    latest = None
    for i in range(len(utterances) - 1, -1, -1):
        after[i] = latest
        if not utterances[i].assistant:
            latest = readings[i]
    for k, i in enumerate(assistant):
        a, p, n = readings[i], before[i], after[i]
        counts = Counter(a.words)
        titles = min(a.n_titles, 10)
        p_flags = p.flags if p is not None else {}
        n_flags = n.flags if n is not None else {}
        p_why = float(p_flags.get("why", False))
        p_request = float(p_flags.get("request", False))
        n_reject = float(n_flags.get("reject", False))
        repeats_titles = len(a.titles & seen_titles) / len(a.titles) if a.titles else 0.0
        offers_nothing = a.flags["offer"] and not titles and not a.is_list
        resolved, in_genre, genre_miss, on_topic, found = _item_match(a, asked[i], asked_words[i], catalogue)
        new_items = found - seen_items
        row = [
            math.log1p(a.length),  # made relative to the conversation's replies below
            float(titles),
            float(titles > 0),
            float(a.is_list),
            float(a.question),
            float(a.flags["self_talk"]),
            float(a.flags["apology"]),
            float(a.flags["closing"]),
            float(offers_nothing),
            float(a.question and not titles and not a.flags["offer"]),
            len(counts) / a.length if a.length else 0.0,
            max((_jaccard(a.content, c) for c in seen_content), default=0.0),
            float(a.padded in seen_replies),
            repeats_titles,
            math.log1p(len(a.titles - seen_titles)),
            _share(a.content, p.content) if p is not None else 0.0,
            float(p is not None and any(t and t in a.padded for t in (_words_of(x) for x in p.titles))),
            float(a.broken),
            float(k > 0 and a.flags["greeting"]),
            resolved,
            in_genre,
            genre_miss,
            on_topic,
            math.log1p(len(found)),
            math.log1p(len(new_items)),
            float(p is not None),
            math.log1p(p.length) if p is not None else 0.0,
            float(p is not None and p.question),
            p_why,
            p_request,
            float(p_flags.get("reject", False)),
            float(p_flags.get("accept", False)),
            float(p_flags.get("complaint", False)),
            float(bool(asked[i])),
            float(n is not None),
            math.log1p(n.length) if n is not None else 0.0,
            float(n is not None and n.question),
            float(n is not None and n.question and n.length <= 3),
            n_reject,
            float(n_flags.get("accept", False)),
            float(n_flags.get("why", False)),
            float(n_flags.get("thanks", False)),
            float(n_flags.get("seen", False)),
            float(n_flags.get("complaint", False)),
            float(n_flags.get("give_up", False)),
            float(n is not None and n.exclaim),
            _jaccard(n.content, p.content) if n is not None and p is not None else 0.0,
            _share(n.content, a.content) if n is not None else 0.0,
            float(n is not None and any(t and t in n.padded for t in (_words_of(x) for x in a.titles))),
            float(n is not None and n is last_user),
            p_why * float(a.is_list),
            p_why * min(titles, 3),
            p_request * min(titles, 3),
            float(p is not None and p.question) * float(a.question),
            p_request * repeats_titles,
            n_reject * min(titles, 3),
            math.log1p(k),
            k / (count - 1) if count > 1 else 0.0,
            float(k == 0),
            float(k == count - 1),
            math.log1p(count),
        ]
        rows.append(row)
        docs["assistant"].append(a.terms)  # the same list object wherever an utterance is used
        docs["previous_user"].append(p.terms if p is not None else [])
        docs["next_user"].append(n.terms if n is not None else [])
        seen_content.append(a.content)
        seen_titles |= a.titles
        seen_items |= found
        seen_replies.add(a.padded)
    if rows:  # a reply's length against the conversation's other replies, not the CRS's habit
        mean_length = sum(row[0] for row in rows) / len(rows)
        for row in rows:
            row[0] -= mean_length
    users = [r for u, r in zip(utterances, readings) if not u.assistant]
    final_user = readings[-1] if utterances and not utterances[-1].assistant and count else None
    reacted = last_user if count and last_user is not None and after[assistant[0]] is not None else None
    extra = [
        math.log1p(count),
        math.log1p(sum(r.length for r in users)),
        math.log1p(len(seen_titles)),
        math.log1p(len(seen_items)),
        len(seen_items) / count if count else 0.0,
        float(final_user is not None and final_user.flags["reject"]),
        float(final_user is not None and final_user.flags["accept"]),
        float(final_user is not None),
        *(float(reacted is not None and reacted.flags[name]) for name in LAST_REACTION_CUES),
    ]
    return ConversationFeatures(
        turn_inds=[utterances[i].turn_ind for i in assistant],
        hand=np.asarray(rows, dtype=float).reshape(count, len(TURN_FEATURES)),
        docs=docs,
        extra=np.asarray(extra, dtype=float),
        words=[r.length for r in readings],
    )


def _item_match(
    reply: Reading, genres: frozenset[str], words: frozenset[str], catalogue: Catalogue | None
) -> tuple[float, float, float, float, frozenset[str]]:
    """How the reply's recommended items answer the request: the share of its dated titles found in the
    catalogue; of those, the share in a genre the user asked for; whether none is (when the user asked
    for a genre); the share whose keywords share a word with what the user said; the keys of the items found.
    Zeros (and no items) without a catalogue or without titles."""
    if catalogue is None or not reply.dated:
        return 0.0, 0.0, 0.0, 0.0, frozenset()
    found = [hit for words_, year in reply.dated if (hit := catalogue.resolve(words_, year)) is not None]
    if not found:
        return 0.0, 0.0, 0.0, 0.0, frozenset()
    share = len(found) / len(reply.dated)
    in_genre = sum(1 for item in found if not item.genres.isdisjoint(genres)) / len(found) if genres else 0.0
    missed = float(bool(genres) and in_genre == 0.0)
    on_topic = sum(1 for item in found if not item.keywords.isdisjoint(words)) / len(found) if words else 0.0
    return share, in_genre, missed, on_topic, frozenset(item.key for item in found)


def _words_of(title: str) -> str:
    """A title as padded words, to look for it in another utterance's padded text."""
    parts = tokens(title)
    return " " + " ".join(parts) + " " if parts else ""


AGGREGATES = ("mean", "min", "max", "first", "last")
PREDICTION_AGGREGATES = ("mean", "min", "max", "first", "last", "std")


def dialogue_feature_names(turn_aspects: Sequence[str]) -> list[str]:
    """Names of the dialogue model's inputs: turn-feature aggregates, turn-prediction aggregates, extras."""
    names = [f"{agg}_{f}" for f in TURN_FEATURES for agg in AGGREGATES]
    names += [f"{agg}_pred_{a}" for a in turn_aspects for agg in PREDICTION_AGGREGATES]
    return names + list(EXTRA_FEATURES)


def dialogue_matrix(features: Sequence[ConversationFeatures], turn_predictions: np.ndarray) -> np.ndarray:
    """`dialogue_vector` for many conversations at once (rows of `turn_predictions` follow their turns)."""
    sizes = np.asarray([f.hand.shape[0] for f in features], dtype=np.int64)
    n_pred = turn_predictions.shape[1]
    width = len(TURN_FEATURES) * len(AGGREGATES) + n_pred * len(PREDICTION_AGGREGATES) + len(EXTRA_FEATURES)
    out = np.zeros((len(features), width))
    if not len(features):
        return out
    extra = np.vstack([f.extra for f in features])
    out[:, -len(EXTRA_FEATURES) :] = extra
    has = sizes > 0
    if not has.any():
        return out
    hand = np.vstack([f.hand for f in features])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])[has]
    lasts = starts + sizes[has] - 1
    counts = sizes[has][:, None].astype(float)

    def block(values: np.ndarray, with_std: bool) -> np.ndarray:
        mean = np.add.reduceat(values, starts, axis=0) / counts
        parts = [mean, np.minimum.reduceat(values, starts, axis=0), np.maximum.reduceat(values, starts, axis=0)]
        parts += [values[starts], values[lasts]]
        if with_std:
            square = np.add.reduceat(values * values, starts, axis=0) / counts
            parts.append(np.sqrt(np.maximum(square - mean * mean, 0.0)))
        return np.stack(parts, axis=2).reshape(len(starts), -1)

    left = len(TURN_FEATURES) * len(AGGREGATES)
    out[has, :left] = block(hand, False)
    if n_pred:
        out[has, left : left + n_pred * len(PREDICTION_AGGREGATES)] = block(turn_predictions, True)
    return out


def dialogue_vector(features: ConversationFeatures, turn_predictions: np.ndarray) -> np.ndarray:
    """One conversation's dialogue-model input: aggregates of its turn features and of the turn
    models' predictions (columns = turn aspects), then the extras. A conversation without
    assistant turns gets zeros for the aggregates."""
    hand = features.hand
    if hand.shape[0] == 0:
        width = len(TURN_FEATURES) * len(AGGREGATES) + turn_predictions.shape[1] * len(PREDICTION_AGGREGATES)
        return np.concatenate([np.zeros(width), features.extra])
    parts = np.stack([hand.mean(0), hand.min(0), hand.max(0), hand[0], hand[-1]], axis=1).ravel()
    preds = turn_predictions
    pred_parts = np.stack(
        [preds.mean(0), preds.min(0), preds.max(0), preds[0], preds[-1], preds.std(0)], axis=1
    ).ravel()
    return np.concatenate([parts, pred_parts, features.extra])
