"""The rule NLU reads list markers ("1:", "2.", "-", "•") as list syntax, never as part of a title:
the iEvaLM / CRS Arena list format (METHODS.md §10), MovieBot's real replies, and a whole run
against the iEvaLM-protocol test server."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.test_agenda_nlu import settings
from tests.test_connectors_engine import write_data
from usersimcrs.config import RunConfig
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.engine.runner import run_async
from usersimcrs.simulators.agenda.nlu.rules import RuleNLU, strip_list_marker
from usersimcrs.testing.crs_servers import serve

MARKER = re.compile(r"^\s*(?:\d{1,3}\s*[:.)]|[-\u2022*])\s")
IEVALM_REPLY = "I would recommend the following items:  \n1: Pari (1995)  \n2: Rosie (2013)  \n3: Heat (1995)  \n"


def nlu(collection: ItemCollection | None = None) -> RuleNLU:
    return RuleNLU(settings(collection if collection is not None else ItemCollection([])))


def test_the_reported_case_gives_each_title_once_without_its_number():
    found = nlu().find_titles("I would recommend the following items:\n1: Pari (1995)\n2: Rosie (2013)\n", [])
    assert found == ["Pari (1995)", "Rosie (2013)"]


def test_ievalm_list_with_its_parsed_items_gives_no_marker_titles_and_no_duplicates():
    from crs_connectors.item_parsing import parse_recommendation_list, resolve_titles

    refs = resolve_titles(parse_recommendation_list(IEVALM_REPLY), None)  # the connector's own reading
    assert [r.title for r in refs] == ["Pari (1995)", "Rosie (2013)", "Heat (1995)"]
    acts = nlu().parse(IEVALM_REPLY, refs).acts
    titles = [sv.value for act in acts for sv in act.slot_values if sv.slot == "TITLE"]
    assert titles == ["Pari (1995)", "Rosie (2013)", "Heat (1995)"]


@pytest.mark.parametrize(
    "text",
    [
        "Top picks:\n1. Pari (1995)\n2. Rosie (2013)\n",
        "Top picks:\n1) Pari (1995)\n2) Rosie (2013)\n",
        "You could watch:\n- Pari (1995)\n- Rosie (2013)\n",
        "You could watch:\n\u2022 Pari (1995)\n\u2022 Rosie (2013)\n",
        "You could watch:\n* Pari (1995)\n* Rosie (2013)\n",
    ],
)
def test_numbered_and_bulleted_lists(text):
    assert nlu().find_titles(text, []) == ["Pari (1995)", "Rosie (2013)"]


def test_titles_that_begin_with_a_number_keep_it():
    collection = ItemCollection([Item(id="1", title="300: Rise of an Empire (2014)", year=2014)])
    text = "I would recommend the following items:  \n1: 2001: A Space Odyssey (1968)  \n2: 300: Rise of an Empire (2014)  \n"
    assert nlu(collection).find_titles(text, []) == ["2001: A Space Odyssey (1968)", "300: Rise of an Empire (2014)"]
    assert nlu().find_titles("I recommend 2001: A Space Odyssey (1968).", []) == ["2001: A Space Odyssey (1968)"]
    # the collection knows a title with a marker-like start: it is a title, not a list line
    assert strip_list_marker("300: Rise of an Empire (2014)", collection) == "300: Rise of an Empire (2014)"
    assert strip_list_marker("3: Heat (1995)", collection) == "Heat (1995)"


@pytest.mark.shared_data
def test_moviebot_replies_give_no_list_marker_titles(shared_data):
    dialogues = read_dialoguekit(shared_data / "dialoguekit" / "moviebot_annotated_dialogues.json")
    reader = nlu()
    titles, annotated = [], []
    for dialogue in dialogues:
        for utterance in dialogue.agent_turns:
            acts = reader.parse(utterance.text, []).acts
            titles += [sv.value for act in acts for sv in act.slot_values if sv.slot == "TITLE" and sv.value]
            annotated += [
                sv.value
                for act in utterance.dialogue_acts
                if act.intent == "REVEAL"
                for sv in act.slot_values
                if sv.value
            ]
    assert titles, "MovieBot recommends in these dialogues"
    assert not [t for t in titles if MARKER.match(t)]
    # a title with a number inside stays whole ("Ghost in the Shell 2: Innocence")
    assert {t for t in annotated if ":" in t} <= set(titles)


def test_no_recommendation_act_carries_a_list_marker_against_the_ievalm_server(tmp_path):
    server = serve("ievalm")
    try:
        data = write_data(tmp_path)
        config = RunConfig.model_validate(
            {
                "name": "agenda-ievalm",
                "conversations": 4,
                "concurrency": 2,
                "max_turns": 5,
                "progress": False,
                "simulator": {"type": "agenda", "nlu": "rules", "nlg": "template"},
                "crs": {"type": "crs_arena", "url": server.url},
                **data,
            }
        )
        asyncio.run(run_async(config, tmp_path / "run"))
    finally:
        server.stop()
    lists = [e.items for e in server.exchanges() if e.items]
    assert lists, "the server recommended in numbered lists"
    records = list(iter_jsonl(tmp_path / "run" / "dialogues.jsonl"))
    acts = [act for r in records for u in r["utterances"] for act in (u.get("metadata") or {}).get("agent_acts", [])]
    recommendations = [a for a in acts if a.startswith("REVEAL(")]
    assert recommendations
    titles = [t for a in recommendations for t in re.findall(r'TITLE="([^"]*)"', a)]
    assert titles and not [t for t in titles if MARKER.match(t)]
    assert set(titles) <= {t for shown in lists for t in shown}  # exactly the listed titles, each once per act
    assert all(len(set(re.findall(r'TITLE="([^"]*)"', a))) == len(re.findall(r'TITLE="', a)) for a in recommendations)
