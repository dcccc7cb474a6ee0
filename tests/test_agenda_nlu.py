"""The rule NLU on common CRS phrasings, and the LLM NLU against a real local OpenAI-protocol server."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.agenda_support import catalogue
from usersimcrs.core.dialogue import AGENT, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.simulators.agenda.nlu.base import NLUSettings
from usersimcrs.simulators.agenda.nlu.llm import LLMNLU
from usersimcrs.simulators.agenda.nlu.rules import RuleNLU
from usersimcrs.simulators.agenda.policy.domain import domain_from_items
from usersimcrs.simulators.agenda.policy.interaction_model import load_interaction_model


def settings(items: ItemCollection | None = None, **kw) -> NLUSettings:  # type: ignore[no-untyped-def]
    items = items if items is not None else catalogue()
    return NLUSettings(interaction_model=load_interaction_model(), domain=domain_from_items(items), items=items, **kw)


def parse(text: str, items: list[ItemRef] | None = None, collection: ItemCollection | None = None) -> list[str]:
    return [str(a) for a in RuleNLU(settings(collection)).parse(text, items).acts]


def test_greeting_and_genre_question():
    assert parse("Hi! I can help you find a movie. Which genre are you in the mood for?") == [
        "DISCLOSE.NON-DISCLOSE()",
        "INQUIRE.ELICIT(GENRE)",
    ]


def test_recommendation_with_have_you_seen_is_one_reveal():
    assert parse("I would recommend: Heat (1995). Have you seen it?") == ['REVEAL(TITLE="Heat (1995)")']


def test_baseline_style_recommendation_with_item_list():
    items = [ItemRef(id="1", title="Heat (1995)"), ItemRef(id="7", title="Collateral (2004)")]
    acts = parse("How about Heat (1995)? It is an action and crime movie.", items)
    assert acts[0] == 'REVEAL(TITLE="Heat (1995)",TITLE="Collateral (2004)")'


def test_titles_that_look_like_question_cues_are_not_questions():
    assert parse("How about In the Mood For Love (Fa yeung nin wa) (2000)? It is a drama and romance movie.") == [
        'REVEAL(TITLE="In the Mood For Love (Fa yeung nin wa) (2000)")'
    ]


def test_item_list_alone_is_evidence_of_a_recommendation():
    assert parse("Here are some picks for you.", [ItemRef(id="4", title="Superbad (2007)")]) == [
        'REVEAL(TITLE="Superbad (2007)")'
    ]


def test_title_without_year_is_resolved_through_the_collection():
    collection = ItemCollection([Item(id="9", title="American President, The (1995)", year=1995)])
    assert parse("Have you seen the american president?", collection=collection) == [
        'REVEAL(TITLE="The American President (1995)")'
    ]


def test_genre_suggestion_is_not_mistaken_for_a_title():
    assert not any(a.startswith("REVEAL") for a in parse("How about a comedy?"))


def test_next_more_no_results_and_goodbye():
    assert parse("Would you like another recommendation?") == ["INQUIRE.NEXT()"]
    assert parse("Do you want to know more about it?") == ["INQUIRE.MORE()"]
    assert parse("Sorry, I have no more suggestions that fit. Could you tell me something else you like?") == [
        "REVEAL.NONE()",
        "INQUIRE.ELICIT()",
    ]
    assert parse("Thanks for chatting. Enjoy your movie, goodbye!") == ["END()"]


def test_item_information_carries_known_slot_values():
    assert parse("It was directed by Greg Mottola and it is a comedy.") == [
        'DISCLOSE.MORE(DIRECTOR="Greg Mottola",GENRE="Comedy")'
    ]


def test_slot_keywords_pick_the_elicited_slot():
    assert parse("Who is your favourite director?") == ["INQUIRE.ELICIT(DIRECTOR)"]
    assert parse("Do you prefer older or more recent movies?") == ["INQUIRE.ELICIT(YEAR)"]


def test_roles_map_to_another_intent_vocabulary():
    nlu = RuleNLU(settings(roles={"recommend": "REC-S", "elicit": "REQ", "greet": "OTH"}))
    assert [a.intent for a in nlu.parse("Hello, what kind of movies do you like?").acts] == ["OTH", "REQ"]


# ---- LLM NLU against the local server ---------------------------------------------------

llm_server = pytest.importorskip("usersimcrs.testing.llm_server")


def _nlu(server, *, structured=False, **overrides):  # type: ignore[no-untyped-def]
    from usersimcrs.llm.provider import LLMProvider

    provider = LLMProvider(server.config("openai", retries=0, **overrides))
    return provider, LLMNLU(settings(llm=lambda: provider.get("nlu"), structured=structured))


def _understand(provider, nlu, utterance):  # type: ignore[no-untyped-def]
    async def go():
        try:
            history = Dialogue(conversation_id="c")
            history.add(Utterance(participant="USER", text="I want a comedy"))
            return await nlu.understand(utterance, history, seed=1234)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_llm_nlu_parses_prose_and_drops_unknown_intents():
    with llm_server.LLMServer(["Sure. INQUIRE.ELICIT(GENRE)|WAVE()|REVEAL(TITLE='Heat, Again (1995)')"]) as server:
        provider, nlu = _nlu(server)
        result = _understand(provider, nlu, Utterance(participant=AGENT, text="Which genre? Maybe Heat?"))
        body = server.chat_requests[0].body
    assert [str(a) for a in result.acts] == ["INQUIRE.ELICIT(GENRE)", 'REVEAL(TITLE="Heat, Again (1995)")']
    assert result.dropped == ["intent:WAVE"]
    assert body["temperature"] == 0 and body["seed"] == 1234
    system = body["messages"][0]["content"]
    assert "INQUIRE.ELICIT" in system and "GENRE" in system
    assert "Which genre? Maybe Heat?" in body["messages"][-1]["content"]


def test_llm_nlu_structured_mode_sends_a_schema_and_reads_json():
    reply = json.dumps({"acts": [{"intent": "INQUIRE.NEXT", "slots": []}]})
    with llm_server.LLMServer([reply]) as server:
        provider, nlu = _nlu(server, structured=True)
        result = _understand(provider, nlu, Utterance(participant=AGENT, text="Another one?"))
        body = server.chat_requests[0].body
    assert [str(a) for a in result.acts] == ["INQUIRE.NEXT()"]
    assert body["response_format"]["type"] == "json_schema"


def test_llm_nlu_adds_the_crs_item_list_the_model_missed():
    with llm_server.LLMServer(["None"]) as server:
        provider, nlu = _nlu(server)
        result = _understand(
            provider,
            nlu,
            Utterance(participant=AGENT, text="Try this.", items=[ItemRef(id="4", title="Superbad (2007)")]),
        )
    assert [str(a) for a in result.acts] == ['REVEAL(TITLE="Superbad (2007)")']


def test_llm_nlu_falls_back_to_rules_when_the_server_fails():
    with llm_server.LLMServer(faults=["500", "500", "500", "500"]) as server:
        provider, nlu = _nlu(server)
        result = _understand(provider, nlu, Utterance(participant=AGENT, text="Which genre do you like?"))
    assert [str(a) for a in result.acts] == ["INQUIRE.ELICIT(GENRE)"]
    assert result.note and "rules used" in result.note


def test_several_dated_titles_in_one_message():
    assert parse("I think Avatar (2009) is good for a family movie....The Goonies (1985) was good.") == [
        'REVEAL(TITLE="Avatar (2009)",TITLE="The Goonies (1985)")'
    ]


def test_long_hostile_messages_are_read_in_linear_time():
    import time

    nlu = RuleNLU(settings())
    for text in (
        "word " * 4000,
        "How about (" * 1000,
        "I recommend " + "Big Title " * 1000 + "?",
        "(" * 6000 + "(1999)",
    ):
        started = time.perf_counter()
        nlu.parse(text)
        assert time.perf_counter() - started < 2.0
