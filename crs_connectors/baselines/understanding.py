"""What a baseline CRS reads from user text: genres (liked or not), feedback, titles, requests."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType

from usersimcrs.core.items import ItemCollection, normalize_title

# extra ways people name MovieLens genres (lower-case phrase -> genre value)
GENRE_ALIASES = MappingProxyType(
    {
        "science fiction": "Sci-Fi",
        "sci fi": "Sci-Fi",
        "scifi": "Sci-Fi",
        "romantic": "Romance",
        "romcom": "Romance",
        "animated": "Animation",
        "cartoon": "Animation",
        "cartoons": "Animation",
        "kids": "Children",
        "family": "Children",
        "scary": "Horror",
        "funny": "Comedy",
        "documentaries": "Documentary",
        "noir": "Film-Noir",
        "thrillers": "Thriller",
        "war movies": "War",
        "westerns": "Western",
        "musicals": "Musical",
        "mysteries": "Mystery",
        "comedies": "Comedy",
        "dramas": "Drama",
    }
)
_NEGATORS = re.compile(r"\b(?:not|no|don'?t|do not|never|hate|dislike|without|except|avoid|nothing)\b[^.,;!?]{0,20}$")
_REJECT = re.compile(
    r"\b(?:no|nope|not (?:really|for me|interested)|seen (?:it|that)|already (?:seen|watched)|watched (?:it|that)|"
    r"something else|anything else|another|different|don'?t (?:like|want)|didn'?t like|not into|boring|hate|"
    r"i know (?:it|this|that))\b",
    re.I,
)
_ACCEPT = re.compile(
    r"\b(?:sounds? (?:good|great|perfect|interesting)|i'?ll (?:watch|take|check)|i will (?:watch|take|check)|"
    r"love it|like (?:it|that|this)|perfect|great choice|that works|yes|yeah|sure|ok(?:ay)?|thanks?|thank you)\b",
    re.I,
)
_HAVENT_SEEN = re.compile(r"\b(?:haven'?t|have not|never) (?:seen|watched)\b", re.I)
_BYE = re.compile(r"\b(?:bye|goodbye|see you|that'?s all|i'?m done|quit|exit)\b", re.I)
_QUOTED = re.compile(r"[\"\u201c](?P<title>[^\"\u201d]{2,80})[\"\u201d]")
_TITLE_YEAR = re.compile(r"(?P<title>[A-Z0-9][^()\n.,!?]{0,80}?)\s*\((?P<year>(?:19|20)\d{2})\)")
_ATTRIBUTE_QUESTION = re.compile(r"\b(?:what|which|who|tell me|more about|is it|about it)\b", re.I)


@dataclass
class Reading:
    """What one user utterance says, as far as a rule-based CRS can tell."""

    genres: list[str] = field(default_factory=list)
    disliked_genres: list[str] = field(default_factory=list)
    feedback: str | None = None  # "accept" | "reject" | None
    titles: list[str] = field(default_factory=list)  # collection IDs of mentioned titles
    goodbye: bool = False
    asks: list[str] = field(default_factory=list)  # slots the user asks about


def genre_lexicon(genres: list[str]) -> dict[str, str]:
    """Lower-case phrase -> genre value, for the genres of one collection."""
    lexicon: dict[str, str] = {}
    known = {g.lower(): g for g in genres}
    for lower, genre in known.items():
        lexicon[lower] = genre
        lexicon[lower.replace("-", " ")] = genre
        if not lower.endswith("s"):
            lexicon[lower + "s"] = genre
    for phrase, genre in GENRE_ALIASES.items():
        if genre.lower() in known:
            lexicon.setdefault(phrase, known[genre.lower()])
    return lexicon


def find_genres(text: str, lexicon: dict[str, str]) -> tuple[list[str], list[str]]:
    """Genres the text asks for and genres it rules out ("not horror"), in order of mention."""
    lowered = text.lower()
    liked: list[str] = []
    disliked: list[str] = []
    spans: list[tuple[int, int, str]] = []
    for phrase in sorted(lexicon, key=len, reverse=True):
        if phrase not in lowered:  # cheap pre-check: most genres are absent from a turn
            continue
        for match in re.finditer(rf"(?<![\w-]){re.escape(phrase)}(?![\w-])", lowered):
            if any(start <= match.start() < end for start, end, _ in spans):
                continue
            spans.append((match.start(), match.end(), lexicon[phrase]))
    for start, _, genre in sorted(spans):
        target = disliked if _NEGATORS.search(lowered[:start]) else liked
        if genre not in target:
            target.append(genre)
    return [g for g in liked if g not in disliked], disliked


def find_feedback(text: str) -> str | None:
    """'reject' for "no / seen it / something else", 'accept' for "sounds good / I'll watch it"."""
    if _HAVENT_SEEN.search(text):
        return "accept" if _ACCEPT.search(_HAVENT_SEEN.sub("", text)) else None
    if _REJECT.search(text):
        return "reject"
    if _ACCEPT.search(text):
        return "accept"
    return None


def find_titles(text: str, items: ItemCollection) -> list[str]:
    """IDs of collection items named in the text: quoted, as ``Title (Year)``, or as a capitalised phrase."""
    found: list[str] = []
    candidates = [m.group("title") for m in _QUOTED.finditer(text)]
    for match in _TITLE_YEAR.finditer(text):
        words = match.group("title").split()
        for size in range(min(len(words), 8), 0, -1):
            candidates.append(f"{' '.join(words[-size:])} ({match.group('year')})")
    candidates.extend(capitalised_phrases(text, items))
    for candidate in candidates:
        item = items.find_by_title(candidate, fuzzy=False)
        if item is not None and item.id not in found:
            found.append(item.id)
    return found


def capitalised_phrases(text: str, items: ItemCollection, longest: int = 6) -> list[str]:
    """Longest phrases starting with a capital letter that are exact titles of the collection."""
    # lazy: numpy (the BM25 index's module) only for the CRSs that rank with BM25
    from crs_connectors.baselines.bm25_index import STOPWORDS

    words = re.findall(r"[\w'&:.-]+", text)
    phrases: list[str] = []
    position = 0
    while position < len(words):
        first = words[position]
        matched = 0
        if first[:1].isupper():
            for size in range(min(longest, len(words) - position), 0, -1):
                phrase = " ".join(words[position : position + size]).rstrip(".:")
                if size == 1 and (phrase.lower() in STOPWORDS or len(phrase) < 3):
                    continue
                if items.find_by_title(phrase, fuzzy=False) is not None:
                    phrases.append(phrase)
                    matched = size
                    break
        position += matched or 1
    return phrases


def find_requests(text: str, slots: list[str]) -> list[str]:
    """Slots the user asks about ("what genre is it?"), when the text is a question."""
    if "?" not in text and not _ATTRIBUTE_QUESTION.search(text):
        return []
    lowered = text.lower()
    asked = []
    for slot in slots:
        stem = slot.lower().rstrip("s")
        if re.search(rf"\b{re.escape(stem)}s?\b", lowered):
            asked.append(slot)
    if re.search(r"\b(?:year|when|how old|released)\b", lowered):
        asked.append("year")
    if re.search(r"\b(?:about|plot|story)\b", lowered) and "keywords" in slots and "keywords" not in asked:
        asked.append("keywords")
    return asked


def read_utterance(text: str, items: ItemCollection, lexicon: dict[str, str], slots: list[str]) -> Reading:
    """Everything a rule-based CRS extracts from one user utterance."""
    liked, disliked = find_genres(text, lexicon)
    return Reading(
        genres=liked,
        disliked_genres=disliked,
        feedback=find_feedback(text),
        titles=find_titles(text, items),
        goodbye=bool(_BYE.search(text)),
        asks=find_requests(text, slots),
    )


def title_key(title: str) -> str:
    """A comparison key for a title (article and year folded)."""
    return normalize_title(title)
