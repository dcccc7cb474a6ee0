"""A BM25 index over item titles and attributes, built once per run and scored via an inverted index.

rank-bm25 supplies the Okapi statistics (IDF, document lengths); scoring walks only the postings
of the query terms, which gives the same scores as ``BM25Okapi.get_scores`` much faster.
"""

from __future__ import annotations

import re

import numpy as np
from rank_bm25 import BM25Okapi

from usersimcrs.core.items import Item, ItemCollection, split_year

STOPWORDS = frozenset(
    """a about after again all also am an and any anything are as at be because been before being but by can
    could did do does doing don't for from get give good great had has have having he her him his how i i'd
    i'll i'm i've if in into is it it's its just know let like liked looking love me might more most movie
    movies film films my no not now of on one or other please recommend recommendation really see seen
    should show so some something something's suggest than thank thanks that the their them then there these
    they thing things think this those to tonight too up us very want wanted was watch watched watching we
    well were what when where which who why will with would yes you your hi hello hey there bye goodbye
    ok okay sure maybe tell name""".split()
)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stopwords."""
    return [t for t in _WORD.findall(text.lower()) if t not in STOPWORDS and len(t) > 1]


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
