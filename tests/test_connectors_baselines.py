"""Built-in baseline CRSs: retrieval (BM25), popularity and the grounded LLM CRS."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from crs_connectors.base import build_connector
from crs_connectors.baselines.bm25_index import BM25Index, item_tokens
from tests.connectors_support import scripted_conversation
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.core.profile import Ratings
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.errors import ConfigError, ConnectorError, LLMError
from usersimcrs.llm.base import LLM, LLMResult, Message
from usersimcrs.runtime.context import RunContext


def movie(item_id: str, title: str, genres: str, keywords: str = "") -> Item:
    attributes = {"genres": genres.split("|")}
    if keywords:
        attributes["keywords"] = keywords.split("|")
    return Item(id=item_id, title=title, year=int(title[-5:-1]), attributes=attributes)


ITEMS = [
    movie("1", "Heat (1995)", "Action|Crime|Thriller", "heist|los angeles|bank robbery"),
    movie("2", "Alien (1979)", "Horror|Sci-Fi", "space|monster|spaceship"),
    movie("3", "Aliens (1986)", "Action|Horror|Sci-Fi", "space|marines|monster"),
    movie("4", "Matrix, The (1999)", "Action|Sci-Fi|Thriller", "virtual reality|hacker|dystopia"),
    movie("5", "Blade Runner (1982)", "Action|Sci-Fi|Thriller", "dystopia|android|future"),
    movie("6", "Toy Story (1995)", "Adventure|Animation|Children|Comedy", "toys|pixar"),
    movie("7", "Gravity (2013)", "Drama|Sci-Fi|IMAX", "space|astronaut"),
    movie("8", "Interstellar (2014)", "Sci-Fi|IMAX", "space|time travel|wormhole"),
    movie("9", "Looper (2012)", "Action|Crime|Sci-Fi", "time travel|assassin|future"),
    movie("10", "Shining, The (1980)", "Horror", "hotel|isolation"),
    movie("11", "Groundhog Day (1993)", "Comedy|Fantasy|Romance", "time loop|small town"),
    movie("12", "Sunshine (2007)", "Adventure|Sci-Fi|Thriller", "space|sun|spaceship"),
]


def context(ratings: Ratings | None = None, llm: Any = None) -> RunContext:
    class Source:
        def get(self, component: str) -> Any:
            return llm

    return RunContext(items=ItemCollection(ITEMS), ratings=ratings, llms=Source() if llm else None)


def run(section: dict, ctx: RunContext, messages: list[str]):
    return asyncio.run(scripted_conversation(section, ctx, messages))


def test_bm25_index_matches_rank_bm25_scores():
    items = ItemCollection(ITEMS)
    index = BM25Index(items, ["genres", "keywords"])
    okapi = BM25Okapi([item_tokens(i, ["genres", "keywords"]) for i in ITEMS])
    query = ["space", "time", "travel", "sci", "fi", "space"]
    assert np.allclose(index.scores(query), okapi.get_scores(query))


def test_retrieval_elicits_then_recommends_in_the_stated_genre():
    _, replies = run({"type": "retrieval", "k": 3}, context(), ["Hi there!", "I want a sci-fi movie about space"])
    assert replies[0].items == [] and replies[0].text == "Which genre are you in the mood for?"
    top = replies[1].items
    assert len(top) == 3 and all("Sci-Fi" in ItemCollection(ITEMS).get(i.id).values("genres") for i in top)
    assert top[0].id in {"2", "3", "7", "8", "12"}  # space movies first
    assert replies[1].text.startswith("How about ") and "?" in replies[1].text


def test_retrieval_never_repeats_shown_or_rejected_items_and_keeps_earlier_preferences():
    messages = ["I want a sci-fi movie about space", "No, I have seen that one. Something else?", "Another one please"]
    dialogue, replies = run({"type": "retrieval", "k": 2}, context(), messages)
    shown = [i.id for r in replies for i in r.items]
    assert len(shown) == len(set(shown)) == 6
    rejected = replies[0].items[0].id
    assert rejected not in [i.id for r in replies[1:] for i in r.items]
    assert replies[1].text.startswith("Then how about")
    genres = ItemCollection(ITEMS)
    assert all("Sci-Fi" in genres.get(i).values("genres") for i in shown)  # turn-1 genre still applies


def test_retrieval_excludes_named_titles_and_disliked_genres():
    _, replies = run({"type": "retrieval", "k": 5}, context(), ['I loved "The Matrix" but no horror please'])
    ids = [i.id for i in replies[0].items]
    assert "4" not in ids  # already seen (named by the user)
    assert not {"2", "3", "10"} & set(ids)  # horror excluded
    assert ids[0] == "5"  # the closest to The Matrix: dystopia, action, sci-fi, thriller


def test_retrieval_is_deterministic():
    messages = ["hello", "something with time travel", "no, another"]
    first = run({"type": "retrieval"}, context(), messages)[1]
    second = run({"type": "retrieval"}, context(), messages)[1]
    assert [r.model_dump() for r in first] == [r.model_dump() for r in second]


def test_retrieval_answers_a_question_about_its_recommendation():
    _, replies = run({"type": "retrieval", "k": 1}, context(), ["I like horror", "What genres is it?"])
    assert replies[1].items == []
    assert replies[1].text.startswith("About ") and "Horror" in replies[1].text


def test_retrieval_index_is_built_once_per_command():
    """The BM25 index, genre sets and keyword vocabulary come from the item collection alone: every
    conversation of a run, and every run of one command (a matrix's cells: one SharedResources, one
    collection), use the same ones; a command of its own builds its own."""
    items = ItemCollection(ITEMS)
    shared = SharedResources()
    one_run = RunContext(items=items, resources=shared)
    first = build_connector({"type": "retrieval"}, one_run, source="test")
    again = build_connector({"type": "retrieval"}, one_run, source="test")
    other_cell = build_connector({"type": "retrieval"}, RunContext(items=items, resources=shared), source="test")
    other_command = build_connector({"type": "retrieval"}, RunContext(items=items), source="test")
    assert again.index is first.index and other_cell.index is first.index
    assert other_cell.item_genres is first.item_genres and other_cell.vocabulary is first.vocabulary
    assert other_command.index is not first.index
    assert other_command.index.ids == first.index.ids and other_command.vocabulary == first.vocabulary
    ctx = RunContext(items=items, resources=shared)
    run({"type": "retrieval"}, ctx, ["horror"])
    assert build_connector({"type": "retrieval"}, ctx, source="test").index is first.index


def test_baselines_need_items():
    with pytest.raises(ConfigError, match="needs an item collection"):
        run({"type": "retrieval"}, RunContext(), ["hi"])


FILLER_TRAPS = [
    movie("21", "Help, The (2011)", "Drama", "racism|1960s|friendship"),
    movie("22", "Find Me Guilty (2006)", "Comedy|Crime|Drama", "courtroom|mafia"),
    movie("23", "God Help the Girl (2014)", "Drama|Musical", "band|glasgow"),
    movie("24", "Shawshank Redemption, The (1994)", "Crime|Drama", "prison|friendship|hope"),
    movie("25", "Forrest Gump (1994)", "Comedy|Drama|Romance|War", "vietnam|running"),
    movie("26", "Good Will Hunting (1997)", "Drama|Romance", "genius|therapy|boston"),
]


def _rated(counts: dict[str, int]) -> Ratings:
    ratings = Ratings()
    for item_id, count in counts.items():
        for user in range(count):
            ratings.add(str(user), item_id, 4.0)
    return ratings


def test_retrieval_never_matches_request_words_against_titles():
    """Issue 19: "can you help me find ..." returned The Help, Find Me Guilty and God Help the Girl."""
    ctx = RunContext(items=ItemCollection(ITEMS + FILLER_TRAPS), ratings=_rated({"24": 9, "25": 8, "26": 3, "21": 1}))
    opening = "Hello, can you help me find a movie? Do you know any good drama movies?"
    _, replies = run({"type": "retrieval", "k": 5}, ctx, [opening])
    ids = [i.id for i in replies[0].items]
    # the request words are no query: every drama scores alike and popularity orders them
    assert ids[:3] == ["24", "25", "26"] and ids.index("21") > ids.index("26")
    assert not replies[0].text.startswith(("How about The Help", "How about Find Me", "How about God Help"))


def test_retrieval_uses_stated_keywords_and_drops_ruled_out_ones():
    ctx = RunContext(items=ItemCollection(ITEMS), ratings=_rated({"2": 9, "7": 8, "12": 7, "8": 1, "9": 1}))
    _, replies = run({"type": "retrieval", "k": 3}, ctx, ["A sci-fi movie with time travel, please"])
    assert {i.id for i in replies[0].items[:2]} == {"8", "9"}  # the keyword beats popularity
    _, replies = run({"type": "retrieval", "k": 3}, ctx, ["Sci-fi about space but no horror"])
    ids = [i.id for i in replies[0].items]
    assert "2" not in ids and "3" not in ids and ids[0] in {"7", "12", "8"}  # horror filtered out, space ranked
    # a keyword ruled out leaves the query; the genre filter still holds
    _, replies = run({"type": "retrieval", "k": 3}, ctx, ["Sci-fi please, but nothing with time travel"])
    assert not {"8", "9"} & {i.id for i in replies[0].items}


def test_keyword_phrases_prefer_the_longest_match():
    from crs_connectors.baselines.retrieval import keyword_vocabulary, stated_keywords

    vocabulary = keyword_vocabulary(["time travel", "time", "space", "the", "good sequel"])
    assert "the" not in vocabulary  # no content word
    assert stated_keywords("I love Time Travel stories, not space", vocabulary) == (["time travel"], ["space"])


def test_popularity_asks_for_genre_then_ranks_by_rating_count():
    ratings = Ratings()
    counts = {"2": 5, "3": 2, "7": 7, "8": 3, "12": 1, "10": 9}
    for item_id, count in counts.items():
        for user in range(count):
            ratings.add(str(user), item_id, 4.0)
    _, replies = run({"type": "popularity", "k": 4}, context(ratings), ["Hello", "Sci-fi please", "something else"])
    assert replies[0].text == "Which genre are you in the mood for?"
    assert [i.id for i in replies[1].items] == ["7", "2", "8", "3"]  # sci-fi by count; horror-only 10 not
    assert [i.id for i in replies[2].items][:1] == ["12"]


def test_popularity_without_ratings_keeps_collection_order():
    _, replies = run({"type": "popularity", "k": 3, "elicit_turns": 0}, context(), ["anything"])
    assert [i.id for i in replies[0].items] == ["1", "2", "3"]


# ------------------------------------------------------------------ llm_crs


class ScriptedLLM(LLM):
    """An in-test LLM: returns scripted completions and keeps the prompts it saw."""

    backend = "scripted"

    def __init__(self, completions: list[str]) -> None:
        self.completions = list(completions)
        self.prompts: list[list[Message]] = []

    async def complete(self, messages, *, temperature=0.0, max_tokens=256, seed=None, schema=None, component="default"):
        self.prompts.append(list(messages))
        if not self.completions:
            raise LLMError("no scripted reply left")
        text = self.completions.pop(0)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return LLMResult(text=text, parsed=parsed, model="scripted", backend="scripted")


def test_llm_crs_grounds_items_in_retrieved_candidates():
    llm = ScriptedLLM(
        [
            json.dumps({"reply": "What kind of movie do you feel like?", "recommend": []}),
            json.dumps({"reply": "Try Interstellar (2014), or maybe Titanic!", "recommend": [2, 99]}),
        ]
    )
    _, replies = run({"type": "llm_crs", "k": 3, "candidates": 4}, context(llm=llm), ["Hi", "A space sci-fi movie"])
    assert replies[0].items == []
    system = llm.prompts[1][0].content
    candidates = [line for line in system.splitlines() if line[:2].strip().rstrip(":").isdigit()]
    assert len(candidates) == 4
    items = replies[1].items
    assert items[0].id == replies[1].raw["candidates"][1]  # the LLM's pick (candidate 2) leads the list
    assert "Interstellar" in candidates[0] or "Interstellar" in " ".join(candidates)
    assert len(items) == 3 and "Titanic" not in " ".join(i.title for i in items)
    assert {i.id for i in items} <= set(replies[1].raw["candidates"])
    assert replies[1].text == "Try Interstellar (2014), or maybe Titanic!"


def test_llm_crs_reads_titles_from_unparsed_text_and_reports_llm_failure():
    llm = ScriptedLLM(["You could watch Looper (2012), a time travel film."])
    _, replies = run({"type": "llm_crs", "elicit_turns": 0}, context(llm=llm), ["time travel movies"])
    assert replies[0].items[0].id == "9"
    with pytest.raises(ConnectorError, match="LLM failed: no scripted reply left"):
        run({"type": "llm_crs"}, context(llm=ScriptedLLM([])), ["hi"])


def test_llm_crs_replaces_a_parroted_reply_but_keeps_grounded_items():
    llm = ScriptedLLM([json.dumps({"reply": "Time travel movies", "recommend": [1]})])
    _, replies = run({"type": "llm_crs", "elicit_turns": 0, "k": 2}, context(llm=llm), ["time travel movies"])
    reply = replies[0]
    assert reply.raw["fallback"] == "the LLM repeated the user"
    assert reply.items[0].id == reply.raw["candidates"][0]
    assert reply.text.startswith("How about ") and reply.text != "Time travel movies"


def test_llm_crs_falls_back_when_the_llm_says_nothing():
    llm = ScriptedLLM([json.dumps({"reply": "", "recommend": []})])
    _, replies = run({"type": "llm_crs", "elicit_turns": 0, "k": 2}, context(llm=llm), ["time travel movies"])
    reply = replies[0]
    assert reply.raw["fallback"] == "the LLM gave no text"
    assert reply.text.strip() and reply.items  # the retrieval policy's sentence and list stand in
