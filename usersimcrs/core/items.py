"""Items and item collections loaded from CSV, with lookup by ID and by (fuzzy) title.

Title lookup is an index: exact and normalised keys are dict hits; a miss is scored with rapidfuzz
only against the titles that can reach the score cutoff (`FuzzyTitleIndex`, built after the first
FUZZY_INDEX_AFTER misses, or in steps by a run while it awaits its first replies: a length window and
a bigram count filter that provably keep every title the full scan would accept); and every answer,
hits and misses alike, is remembered for the collection's lifetime (one run), so a CRS naming the
same unknown title again costs a dict lookup (issue #22: unremembered misses, a full fuzzy scan of
13.8k titles each, were a fifth of the engine's CPU against the iEvaLM server).
"""

from __future__ import annotations

import csv
import math
import re
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from operator import add
from pathlib import Path
from typing import Any, Callable, Generator, Iterable, Iterator, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.item_ref import ItemRef, Resolution
from usersimcrs.errors import DataError

T = TypeVar("T")

_TRAILING_ARTICLE = re.compile(r"^(?P<rest>.*?),\s*(?P<article>The|A|An|Les|La|Le|L'|Il|Das|Der|Die|El)$", re.I)
_SPACES = re.compile(r"\s+")
_NON_WORD = re.compile(r"[^\w\s']")


def split_year(title: str) -> tuple[str, int | None]:
    """Split ``"Heat (1995)"`` into ``("Heat", 1995)``; titles without a year give None.

    The split of the pattern ``\\s*\\((\\d{4})\\)\\s*$`` (its ``\\s`` is `str.isspace`, its ``\\d``
    `str.isdecimal`) without a regex search: it runs twice per title when a collection is loaded and
    indexed (27.6k times for the 13.8k MovieLens items)."""
    end = title.rstrip()
    if len(end) >= 6 and end[-1] == ")" and end[-6] == "(" and end[-5:-1].isdecimal():
        return end[:-6].strip(), int(end[-5:-1])
    return title.strip(), None


def split_values(value: str, sep: str | None) -> list[str]:
    """The values of one multi-valued cell, each stripped, empty ones dropped (the whole cell when `sep` is
    None). Strips only when a value can have space around it: a printable cell's only whitespace is " "
    (loading the 13.8k MovieLens items splits 69k keywords, almost none with spaces around them)."""
    if not sep:
        return [value.strip()] if value.strip() else []
    values = value.split(sep)
    if not value.isprintable() or value[:1] == " " or value[-1:] == " " or f" {sep}" in value or f"{sep} " in value:
        values = [v.strip() for v in values]
    return values if "" not in values else [v for v in values if v]


def normalize_title(title: str) -> str:
    """A matching key: year removed, trailing article moved to the front, case and spaces folded.

    ``"American President, The (1995)"`` and ``"The American President"`` give the same key.
    """
    name, _ = split_year(_SPACES.sub(" ", title or ""))
    match = _TRAILING_ARTICLE.match(name)
    if match:
        name = f"{match.group('article')} {match.group('rest')}"
    name = _NON_WORD.sub(" ", name.lower())
    return _SPACES.sub(" ", name).strip()


def display_title(title: str) -> str:
    """A human title: ``"American President, The (1995)"`` -> ``"The American President (1995)"``."""
    name, year = split_year(_SPACES.sub(" ", title or ""))
    match = _TRAILING_ARTICLE.match(name)
    if match:
        name = f"{match.group('article')} {match.group('rest')}"
    return f"{name} ({year})" if year else name


class Item(BaseModel):
    """An item with a title and multi-valued attributes (slot -> list of values)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    title: str
    year: int | None = None
    attributes: dict[str, list[str]] = Field(default_factory=dict)

    def values(self, slot: str) -> list[str]:
        """The item's values for `slot` (empty when it has none)."""
        return self.attributes.get(slot, [])

    def ref(self) -> ItemRef:
        return ItemRef(id=self.id, title=self.title)

    def describe(self, slots: Iterable[str] | None = None) -> str:
        """One line of metadata for prompts: title (year) and the chosen attributes."""
        parts = [display_title(self.title)]
        for slot in slots if slots is not None else self.attributes:
            values = self.attributes.get(slot)
            if values:
                parts.append(f"{slot}: {', '.join(values[:6])}")
        return "; ".join(parts)


MEMO_LIMIT = 100_000  # remembered title lookups per collection (oldest forgotten first)
# fuzzy searches that scan every title before the bigram index is built: building it costs about
# as much as 100-200 scans of 13.8k titles, which a short run (or a run's first record) need not pay
FUZZY_INDEX_AFTER = 32


@dataclass
class TitleLookupStats:
    """What the title lookups of one collection did (for benchmarks and the done-when test of issue #22)."""

    lookups: int = 0
    remembered: int = 0  # answered from the memo
    fuzzy_searches: int = 0  # misses of the exact and normalised indexes that went to fuzzy scoring
    titles_scored: int = 0  # titles rapidfuzz scored over all fuzzy searches


class FuzzyTitleIndex:
    """The normalised titles that can reach a `fuzz.ratio` cutoff against a query, without scoring all.

    `fuzz.ratio` is 100 * (1 - d / (l1 + l2)) with d the insert/delete distance, so a cutoff bounds
    the length of a candidate (window) and d. Strings within edit distance k share at least
    max(l1, l2) - 1 - 2k bigrams (the q-gram lemma, q = 2), so a candidate must hold one of the
    query's rarest bigrams whose occurrences exceed what it may lose. Both filters are exact bounds:
    rapidfuzz then scores a superset of the titles the full scan accepts, in catalogue order, and the
    matches are the same (checked against the full scan in tests/test_core_items.py).
    """

    def __init__(self, choices: list[str]) -> None:
        for _ in self._build(choices, max(1, len(choices))):
            pass

    @classmethod
    def in_steps(cls, choices: list[str], step: int) -> Generator[None, None, FuzzyTitleIndex]:
        """Build the index `step` titles at a time, yielding between steps; returns it."""
        index = cls.__new__(cls)
        yield from index._build(choices, step)
        return index

    def _build(self, choices: list[str], step: int) -> Iterator[None]:
        self.choices = choices
        lengths = [len(choice) for choice in choices]
        self.lengths = lengths
        # bigram -> indexes of the titles holding it, ordered by (title length, index): the titles of a
        # length window are one slice of each list (found by bisection), and building it costs one
        # dict lookup per bigram of a title (a (bigram, length) key per lookup cost twice as much)
        postings: defaultdict[str, list[int]] = defaultdict(list)
        order = sorted(range(len(choices)), key=lengths.__getitem__)  # stable: ties in catalogue order
        for start in range(0, len(order), step):
            if start:
                yield
            for index in order[start : start + step]:
                choice = choices[index]
                for gram in set(map(add, choice, choice[1:])):
                    postings[gram].append(index)
        self.postings: dict[str, list[int]] = dict(postings)
        self.by_length: dict[int, list[int]] = {}
        for index, size in enumerate(lengths):
            self.by_length.setdefault(size, []).append(index)

    def candidates(self, query: str, min_score: float) -> list[int] | None:
        """Indexes (ascending) of the choices that may score >= `min_score`; None: no bound applies (scan all)."""
        cut = min_score / 100.0 - 1e-9  # a hair looser than the cutoff: float rounding never drops a match
        size = len(query)
        if size < 2 or cut <= 0.5:
            return None
        low = math.ceil(size * cut / (2 - cut))  # 2 * min(l1, l2) / (l1 + l2) >= cut
        high = math.floor(size * (2 - cut) / cut)
        window = range(low, high + 1)
        grams: dict[str, int] = {}
        for i in range(size - 1):
            gram = query[i : i + 2]
            grams[gram] = grams.get(gram, 0) + 1
        need = min(  # bigrams every admissible candidate shares with the query, at least
            max(size, other) - 1 - 2 * math.floor((1 - cut) * (size + other)) for other in window
        )
        if need <= 0:
            return sorted(i for length in window for i in self.by_length.get(length, ()))
        chosen: list[list[int]] = []
        cover = 0
        postings = self.postings
        length_of = self.lengths.__getitem__
        empty: list[int] = []
        for gram in sorted(grams, key=lambda g: len(postings.get(g, empty))):
            # enough of the rarest bigrams that a title holding none of them falls short of `need`
            found = postings.get(gram)
            if found is not None:
                first = bisect_left(found, low, key=length_of)
                last = bisect_right(found, high, lo=first, key=length_of)
                if first < last:
                    chosen.append(found[first:last])
            cover += grams[gram]
            if cover >= size - 1 - need + 1:
                break
        return sorted(set().union(*chosen))


class ItemCollection:
    """Items by ID, with a title index for exact, normalised and fuzzy lookup (answers remembered)."""

    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: dict[str, Item] = {item.id: item for item in items}  # as `add` one by one, nothing to index
        # title indexes, built on the first title lookup or by `index_in_steps` (a run's engine, while it
        # waits for its first replies): loading 13.8k items then costs half as much, and start-up to a
        # run's first LLM call does not pay for them
        self._titles: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None
        self._fuzzy: FuzzyTitleIndex | None = None  # built after FUZZY_INDEX_AFTER fuzzy searches
        self._choices: list[str] | None = None  # the normalised titles, scanned until then
        self._scans = 0
        self._memo: dict[tuple[str, bool, float], TitleMatch] = {}
        self._version = 0  # counts changes: an index built in steps is kept only if none came in between
        self.title_stats = TitleLookupStats()

    def add(self, item: Item) -> None:
        self._items[item.id] = item
        if self._titles is not None:
            _index_title(item, *self._titles)
        self._fuzzy = None
        self._choices = None
        self._memo.clear()
        self._version += 1

    def index_in_steps(self, step: int = 500) -> Iterator[None]:
        """Build the title indexes (exact and normalised, then the fuzzy one) `step` titles at a time,
        yielding between steps, so that an event loop builds them while it waits for replies: the first
        CRS reply naming titles then finds them built instead of stalling every conversation in flight
        while they are (about 0.2 s for the 13.8k MovieLens titles). The same indexes as a lookup builds,
        so the same matches; a lookup in between builds what it needs itself (and the step build of that
        index stops: it is never built twice), and a change stops it."""
        version = self._version
        if self._titles is None:
            yield from self._titles_in_steps(step)
            if self._version != version:
                return
        if self._fuzzy is None and self._items:
            steps = FuzzyTitleIndex.in_steps(list(self._by_title), step)
            index = yield from _steps_until(steps, lambda: self._version != version or self._fuzzy is not None)
            if index is not None:
                self._fuzzy = index

    @property
    def _by_title(self) -> dict[str, list[str]]:
        """Normalised title -> IDs."""
        return self._title_indexes()[0]

    @property
    def _by_exact(self) -> dict[str, list[str]]:
        """Case-folded title as written (and its display form) -> IDs."""
        return self._title_indexes()[1]

    def _title_indexes(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        if self._titles is None:
            for _ in self._titles_in_steps(max(1, len(self._items))):
                pass
        assert self._titles is not None  # nothing can change the collection between those steps
        return self._titles

    def _titles_in_steps(self, step: int) -> Iterator[None]:
        """Build the exact and normalised title indexes `step` titles at a time, yielding after each step;
        it stops when the collection changes or a lookup builds them meanwhile."""
        version = self._version
        by_title: dict[str, list[str]] = {}
        by_exact: dict[str, list[str]] = {}
        items = list(self._items.values())
        for start in range(0, len(items), step):
            for item in items[start : start + step]:
                _index_title(item, by_title, by_exact)
            yield
            if self._version != version or self._titles is not None:
                return
        if self._titles is None:
            self._titles = (by_title, by_exact)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self._items.values())

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def get(self, item_id: str) -> Item | None:
        return self._items.get(str(item_id))

    def require(self, item_id: str) -> Item:
        """The item with this ID; a KeyError when the collection has none (for IDs taken from it)."""
        return self._items[str(item_id)]

    def ids(self) -> list[str]:
        return list(self._items)

    def slots(self) -> list[str]:
        """Every attribute name used by some item."""
        seen: dict[str, None] = {}
        for item in self._items.values():
            for slot in item.attributes:
                seen.setdefault(slot, None)
        return list(seen)

    def slot_values(self, slot: str) -> list[str]:
        """The distinct values of `slot`, in first-seen order."""
        seen: dict[str, None] = {}
        for item in self._items.values():
            for value in item.values(slot):
                seen.setdefault(value, None)
        return list(seen)

    def match_title(self, title: str, *, fuzzy: bool = True, min_score: float = 90.0) -> TitleMatch:
        """How `title` maps to the collection: one item (exact, normalised or fuzzy), several
        equally good items (ambiguous: a bare title shared by remakes), or none.

        Exact and normalised lookups are dict hits on indexes built as items are added; fuzzy
        scoring runs only on a miss, over the titles that can reach `min_score`. A year in the
        query must agree with the item's year. Answers are remembered (the returned match is shared:
        read it, do not change it).
        """
        self.title_stats.lookups += 1
        memo_key = (title, fuzzy, min_score)
        known = self._memo.get(memo_key)
        if known is not None:
            self.title_stats.remembered += 1
            return known
        match = self._match_title(title, fuzzy, min_score)
        if len(self._memo) >= MEMO_LIMIT:
            del self._memo[next(iter(self._memo))]
        self._memo[memo_key] = match
        return match

    def _match_title(self, title: str, fuzzy: bool, min_score: float) -> TitleMatch:
        if not title or not title.strip():
            return TitleMatch(resolution="unresolved")
        _, year = split_year(title)
        exact = self._by_exact.get(_exact_key(title), [])
        if exact:
            return _match_by_year([self._items[i] for i in exact], year, "exact")
        key = normalize_title(title)
        normalised = self._by_title.get(key, [])
        if normalised:
            return _match_by_year([self._items[i] for i in normalised], year, "normalized")
        if not fuzzy or not self._items:
            return TitleMatch(resolution="unresolved")
        matches = self._fuzzy_matches(key, min_score)
        if not matches:
            return TitleMatch(resolution="unresolved")
        best = matches[0][1]
        pool = [self._items[i] for match, score, _ in matches if score == best for i in self._by_title[match]]
        if year is not None:  # a year that agrees with one of the near-misses settles it
            dated = [
                item
                for item in (self._items[i] for match, _, _ in matches for i in self._by_title[match])
                if item.year == year
            ]
            pool = dated or pool
        return _match_by_year(pool, year, "fuzzy", score=best)

    def _fuzzy_matches(self, key: str, min_score: float) -> list[tuple[str, float, int]]:
        """The best five normalised titles scoring >= `min_score` against `key` (rapidfuzz's
        `fuzz.ratio`), best first, ties in catalogue order: what a scan of every title gives."""
        from rapidfuzz import fuzz, process

        self.title_stats.fuzzy_searches += 1
        if self._fuzzy is None:
            if self._scans < FUZZY_INDEX_AFTER:
                self._scans += 1
                choices = self._choices = self._choices or list(self._by_title)
                self.title_stats.titles_scored += len(choices)
                return process.extract(key, choices, scorer=fuzz.ratio, limit=5, score_cutoff=min_score)
            self._fuzzy = FuzzyTitleIndex(list(self._by_title))
        index = self._fuzzy
        pool = index.candidates(key, min_score)
        if pool is None:
            self.title_stats.titles_scored += len(index.choices)
            return process.extract(key, index.choices, scorer=fuzz.ratio, limit=5, score_cutoff=min_score)
        self.title_stats.titles_scored += len(pool)
        subset = list(map(index.choices.__getitem__, pool))
        found = process.extract(key, subset, scorer=fuzz.ratio, limit=5, score_cutoff=min_score)
        return [(choice, score, pool[j]) for choice, score, j in found]

    def find_by_title(self, title: str, *, fuzzy: bool = True, min_score: float = 90.0) -> Item | None:
        """The one item `title` names, or None when none or several match (see `match_title`)."""
        match = self.match_title(title, fuzzy=fuzzy, min_score=min_score)
        return self._items[match.item_id] if match.item_id is not None else None

    def resolve(self, ref: ItemRef) -> ItemRef:
        """Fill in the collection ID of a title-only reference when the title names one item.

        A bare title shared by several items stays unresolved (``id`` None) with
        ``resolution="ambiguous"`` and the candidate IDs, instead of silently picking one.
        """
        if ref.id is not None and ref.id in self._items:
            return ref
        match = self.match_title(ref.title or ref.raw or "")
        return apply_match(ref, match, self)

    def resolve_title(self, title: str) -> ItemRef:
        """`resolve(ItemRef(title=title, raw=title))`, the reference built once instead of built and copied
        (a CRS's parsed titles: about 15 per conversation)."""
        match = self.match_title(title)
        if match.item_id is not None:
            item = self._items.get(match.item_id)
            return ItemRef(
                id=match.item_id,
                title=item.title if item else title,
                raw=title,
                resolution=match.resolution,
                candidates=[],
            )
        return ItemRef(title=title, raw=title, resolution=match.resolution, candidates=list(match.candidates))

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        *,
        id_column: str = "movieId",
        title_column: str = "title",
        mapping: dict[str, str] | None = None,
        delimiters: dict[str, str] | None = None,
        default_delimiter: str | None = None,
    ) -> ItemCollection:
        """Load items from a CSV file.

        Args:
            mapping: CSV column -> slot name; columns not listed are ignored (all others kept
                under their own names when mapping is None).
            delimiters: CSV column -> multi-value separator (MovieLens uses ``|``).
        """
        path = Path(path)
        delimiters = delimiters or {}
        items = []
        try:
            handle = path.open(newline="", encoding="utf-8")
        except OSError as exc:
            raise DataError(f"{path}: cannot read item file ({exc.strerror})") from exc
        with handle:
            reader = csv.reader(handle)  # plain rows and column positions: a third cheaper than DictReader
            header = next(reader, [])
            for column in (id_column, title_column):
                if column not in header:
                    raise DataError(f"{path}: missing column {column!r} (header: {', '.join(header)})")
            columns = mapping or {c: c for c in header if c not in (id_column, title_column)}
            for column in columns:
                if column not in header:
                    raise DataError(f"{path}: missing column {column!r} named in the column mapping")
            id_at, title_at = header.index(id_column), header.index(title_column)
            slots = [
                (header.index(column), slot, delimiters.get(column, default_delimiter))
                for column, slot in columns.items()
            ]
            for line_no, row in enumerate(reader, start=2):
                if not row:
                    continue  # a blank line, as DictReader skips it
                if len(row) <= max(id_at, title_at) or row[id_at] == "":
                    raise DataError(f"{path}:{line_no}: row without {id_column!r} or {title_column!r}")
                raw_title = row[title_at]
                _, year = split_year(raw_title)
                attributes: dict[str, list[str]] = {}
                for at, slot, sep in slots:
                    value = row[at] if at < len(row) else None
                    if value is None or value == "" or value == "(no genres listed)":
                        continue
                    attributes[slot] = split_values(value, sep)
                items.append(Item(id=row[id_at], title=raw_title, year=year, attributes=attributes))
        return cls(items)

    def to_csv(self, path: str | Path, delimiter: str = "|") -> dict[str, Any]:
        """Write items as CSV (`id,title,<slot>...`) and return the mapping to load them back."""
        slots = self.slots()
        with Path(path).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["id", "title", *slots])
            for item in self._items.values():
                writer.writerow([item.id, item.title, *(delimiter.join(item.values(s)) for s in slots)])
        return {
            "id_column": "id",
            "title_column": "title",
            "mapping": {s: s for s in slots},
            "delimiters": {s: delimiter for s in slots},
        }


class TitleMatch(BaseModel):
    """The outcome of matching one title: the item (when exactly one fits) or the candidates.
    Frozen: a collection remembers its matches and hands the same object out again."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resolution: Resolution
    item_id: str | None = None
    candidates: list[str] = Field(default_factory=list)
    score: float | None = None


def apply_match(ref: ItemRef, match: TitleMatch, items: ItemCollection) -> ItemRef:
    """`ref` updated with a match: the item's ID and title, or the ambiguity and its candidates."""
    if match.item_id is not None:
        item = items.get(match.item_id)
        return ref.model_copy(
            update={
                "id": match.item_id,
                "title": item.title if item else ref.title,
                "resolution": match.resolution,
                "candidates": [],
            }
        )
    return ref.model_copy(update={"resolution": match.resolution, "candidates": list(match.candidates)})


def _steps_until(steps: Generator[None, None, T], stop: Callable[[], bool]) -> Generator[None, None, T | None]:
    """Run the stepwise build `steps`, yielding after each step: its result, or None once `stop()` holds."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        yield
        if stop():
            steps.close()
            return None


def _index_title(item: Item, by_title: dict[str, list[str]], by_exact: dict[str, list[str]]) -> None:
    normalised, exact, display = _title_keys(item.title)
    by_title.setdefault(normalised, []).append(item.id)
    for key in {exact, display}:
        by_exact.setdefault(key, []).append(item.id)


def _title_keys(title: str) -> tuple[str, str, str]:
    """`normalize_title(title)`, `_exact_key(title)` and `_exact_key(display_title(title))` in one pass.

    The same keys with fewer regex passes (built for every title of a run's collection): a printable
    ASCII title without double spaces has no whitespace to fold, only a name with a comma can end in
    an article, and ``" ".join(text.split())`` is ``_SPACES.sub(" ", text).strip()`` (both fold what
    `str.isspace` calls whitespace)."""
    title = title or ""
    single = title.isascii() and title.isprintable() and "  " not in title
    spaced = title if single else _SPACES.sub(" ", title)
    name, year = split_year(spaced)
    if "," in name:
        match = _TRAILING_ARTICLE.match(name)
        if match:
            name = f"{match.group('article')} {match.group('rest')}"
    normalised = " ".join(_NON_WORD.sub(" ", name.lower()).split())
    display = f"{name} ({year})" if year else name
    return normalised, spaced.strip().casefold(), " ".join(display.split()).casefold()


def _exact_key(title: str) -> str:
    return _SPACES.sub(" ", title or "").strip().casefold()


def _match_by_year(candidates: list[Item], year: int | None, how: Resolution, score: float | None = None) -> TitleMatch:
    """One item when the year (or a single candidate) singles it out; else ambiguous or unresolved.

    A query year must agree with the item's year (undated items are accepted); several items left
    over (remakes sharing a title, duplicates) make the title ambiguous.
    """
    unique = list({item.id: item for item in candidates}.values())
    if year is not None:
        dated = [item for item in unique if item.year == year]
        unique = dated or [item for item in unique if item.year is None]
    if not unique:
        return TitleMatch(resolution="unresolved")
    if len(unique) == 1:
        return TitleMatch(resolution=how, item_id=unique[0].id, score=score)
    return TitleMatch(resolution="ambiguous", candidates=[item.id for item in unique], score=score)
