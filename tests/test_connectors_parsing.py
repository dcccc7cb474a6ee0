"""Recommendation lists parsed out of CRS texts, and titles mapped to the item collection."""

from __future__ import annotations

from crs_connectors.item_parsing import (
    items_from_text,
    parse_moviebot_offers,
    parse_recommendation_list,
    resolve_titles,
)
from crs_connectors.turns import alternating_texts, prior_turns
from tests.connectors_support import catalog_items
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance


def test_ievalm_list_format_and_variants():
    exact = "I would recommend the following items:  \n1: Heat (1995)  \n2: Alien (1979)  \n3: Jaws (1975)  \n"
    assert parse_recommendation_list(exact) == ["Heat (1995)", "Alien (1979)", "Jaws (1975)"]
    dotted = 'Sure! I would recommend the following movies:\n1. "Heat (1995)"\n2) *Alien (1979)*\n\nEnjoy!'
    assert parse_recommendation_list(dotted) == ["Heat (1995)", "Alien (1979)"]
    bullets = "I'd recommend the following items:\n- Heat (1995)\n- Jaws (1975)."
    assert parse_recommendation_list(bullets) == ["Heat (1995)", "Jaws (1975)"]
    inline = "I would recommend the following items: Heat (1995), Jaws (1975)"
    assert parse_recommendation_list(inline) == ["Heat (1995)", "Jaws (1975)"]
    headerless = "Here you go:\n1: Heat (1995)\n2: Jaws (1975)"
    assert parse_recommendation_list(headerless) == ["Heat (1995)", "Jaws (1975)"]
    assert parse_recommendation_list("1: just one numbered line") == []
    assert parse_recommendation_list("Hello! What do you like?") == []


def test_moviebot_offers():
    text = "Do you like: The Matrix 8.7 136 min"
    assert parse_moviebot_offers(text) == ["The Matrix"]
    assert parse_moviebot_offers("Do you like: Star Wars: Episode IV - A New Hope 8.6 121 min") == [
        "Star Wars: Episode IV - A New Hope"
    ]


def test_titles_resolve_fuzzily_with_year():
    refs = resolve_titles(
        ["The Usual Suspects (1995)", "usual suspects, the", "Termintor 2: Judgment Day (1991)", "Unknown (2001)"],
        catalog_items(),
    )
    assert [r.id for r in refs] == ["50", "50", "589", None]
    assert refs[3].title == "Unknown (2001)" and refs[0].raw == "The Usual Suspects (1995)"
    assert resolve_titles(["Heat (1995)"], None)[0].id is None


def test_title_mentions_in_free_text_when_there_is_no_list():
    refs = items_from_text("You should watch Heat (1995) tonight, or Blade Runner (1982).", catalog_items())
    assert [r.id for r in refs] == ["6", "541"]
    assert items_from_text("You should watch Heat (1995).", catalog_items(), mentions=False) == []


def test_context_alternates_user_first_and_excludes_the_new_message():
    dialogue = Dialogue(conversation_id="c")
    for participant, text in [(AGENT, "Welcome!"), (USER, "hi"), (USER, "I like horror"), (AGENT, "Alien?")]:
        dialogue.add(Utterance(participant=participant, text=text))
    new = Utterance(participant=USER, text="more")
    assert alternating_texts(prior_turns(dialogue, new)) == ["", "Welcome!", "hi I like horror", "Alien?"]
    dialogue.add(new)
    assert prior_turns(dialogue, new)[-1].text == "Alien?"
