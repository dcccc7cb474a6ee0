"""A BM25 index over item titles and attributes, built once per run and scored via an inverted index.

rank-bm25 supplies the Okapi statistics (IDF, document lengths); scoring walks only the postings
of the query terms, which gives the same scores as ``BM25Okapi.get_scores`` much faster.
"""

from __future__ import annotations

import re

import numpy as np
from rank_bm25 import BM25Okapi

from usersimcrs.core.items import Item, ItemCollection, split_year

# Function words, and the words people use to *ask* for a movie rather than to describe one ("can you
# help me find ...", "any suggestions?", "sounds great"): matched against titles they return The Help
# or Find Me Guilty for every request. Our own list: generic English lists drop domain words
# (scikit-learn's holds "fire", "serious", "cry").
STOPWORDS = frozenset(
    """a about above after again against ago all almost already also although always am an and another any
    anybody anyone anything anyway anywhere are aren't around as at away be because been before being below
    besides best better between both but by can can't cannot could couldn't did didn't do does doesn't doing
    don't done down during each either else enough etc even ever every everybody everyone everything
    few for from further get gets getting give given go goes going gone got gotta had hadn't has hasn't have
    haven't having he he'd he's her here here's hers herself him himself his how how's however i i'd i'll i'm
    i've if in into is isn't it it'd it'll it's its itself just least less let let's lets like liked likes
    may maybe me might mine more most much must my myself neither never next no nobody none nor not nothing
    now of off often oh ok okay on once one only or other others otherwise our ours ourselves out over own
    perhaps please quite rather really same she she'd she's should shouldn't so some somebody someone something
    something's sometimes somewhat somewhere soon still such sure than that that's the their theirs them
    themselves then there there's these they they'd they'll they're they've thing things this those though
    through thus to too toward towards um uh under until up upon us very was wasn't we we'd we'll we're we've
    well were weren't what what's whatever when where where's whether which while who who's whoever whom whose
    why will with within without won't would wouldn't yeah yep yes yet you you'd you'll you're you've your
    yours yourself ah hmm hm wow hi hello hey bye goodbye cheers thank thanks
    movie movies film films flick flicks watch watched watching see seen saw show shows
    recommend recommends recommended recommendation recommendations suggest suggests suggested suggestion
    suggestions help helps find finding looking look looks search searching need needs needed want wants
    wanted wish hope prefer preferably enjoy enjoyed enjoying love loved loving kind kinds sort sorts type
    types genre genres mood feel feeling fancy good great nice awesome cool interesting perfect fine choice
    choices idea ideas option options tonight today lately recently actually probably definitely totally
    pretty bit lot lots little tell name know think say said sounds sound try tried trying mean guess
    different similar else another other""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-case content-word tokens: stop words and request words removed, curly apostrophes folded."""
    folded = text.lower().replace("\u2019", "'")
    return [t for t in _WORD.findall(folded) if t not in STOPWORDS and len(t) > 1]


def item_tokens(item: Item, fields: list[str]) -> list[str]:
    """The words an item is found by: its title (without year) and the chosen attributes."""
    name, _ = split_year(item.title)
    words = tokenize(name)
    for slot in fields:
        for value in item.values(slot):
            words.extend(tokenize(value))
    return words


class BM25Index:
    """Okapi BM25 over a fixed item collection; read-only after construction (safe to share)."""

    def __init__(self, items: ItemCollection, fields: list[str], *, k1: float = 1.5, b: float = 0.75) -> None:
        self.ids = items.ids()
        self.position = {item_id: i for i, item_id in enumerate(self.ids)}
        corpus = [item_tokens(items.require(i), fields) or ["_"] for i in self.ids]
        okapi = BM25Okapi(corpus, k1=k1, b=b)
        self.idf: dict[str, float] = dict(okapi.idf)
        lengths = np.asarray(okapi.doc_len, dtype=float)
        norm = k1 * (1 - b + b * lengths / okapi.avgdl)
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for doc, counts in enumerate(okapi.doc_freqs):
            for term, tf in counts.items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(doc)
                weights.append(tf * (k1 + 1) / (tf + norm[doc]))
        self._postings = {t: (np.asarray(d), np.asarray(w)) for t, (d, w) in postings.items()}
        self.size = len(self.ids)

    def knows(self, term: str) -> bool:
        return term in self._postings

    def scores(self, query: list[str]) -> np.ndarray:
        """BM25 score of every item for the query tokens (repeated tokens count again)."""
        total = np.zeros(self.size)
        for term in query:
            posting = self._postings.get(term)
            if posting is not None:
                docs, weights = posting
                total[docs] += self.idf.get(term, 0.0) * weights
        return total
