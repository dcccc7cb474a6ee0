"""Target-biased simulator: CoRE's round rules (one test per branch), title filter, persuasiveness, split."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests.llm_sim_support import ScriptedLLM, context_with, converse, list_crs, movie_items, profile_for
from usersimcrs.simulators.base import simulators
from usersimcrs.simulators.target_biased import TargetBiasedSimulator, read_rating, title_patterns

TARGET = "1"  # Heat (1995)


def blurting(messages, schema, index):
    """A model that keeps trying to say the target's title; rates persuasiveness 2."""
    if schema is not None and "rating" in schema["properties"]:
        return {"rating": 2}
    return {"utterance": "I think it was HEAT, you know, Heat (1995) with Pacino.", "end": False}


def make(reply=blurting, targets=(TARGET,), seed=4, **options):
    llm = ScriptedLLM(reply)
    items = movie_items()
    config = TargetBiasedSimulator.Config.model_validate({"type": "target_biased", **options})
    return TargetBiasedSimulator(config, context_with(llm, items), profile_for(list(targets), items), seed), llm


def run(sim, pages, max_turns=20):
    return asyncio.run(converse(sim, list_crs(pages), max_turns=max_turns))


def said(dialogue):
    return [u for u in dialogue.user_turns]


def test_registered():
    assert simulators.get("target_biased") is TargetBiasedSimulator


def test_branch_hit_after_three_rounds_ends_with_target_hit():
    sim, _ = make()
    d = run(sim, [["2"], ["3"], ["4", "1"]])
    assert d.end_reason == "target_hit"
    assert len(d.agent_turns) == 3 and d.utterances[-1].participant == "USER"
    assert d.utterances[-1].metadata["round"] == 3 and d.utterances[-1].metadata["hit"] is True
    assert d.metadata["targets"]["hit_rounds"] == [3]


def test_branch_early_hit_asks_the_crs_to_introduce_the_target():
    sim, llm = make()
    d = run(sim, [["1", "2"], ["3"], ["4"]])
    first_reply = said(d)[1]
    assert first_reply.metadata["ask_introduce"] is True and first_reply.metadata["hit_rank"] == 1
    # this turn's instruction closes the prompt (after the history), not the system message
    assert "suggestion number 1" in llm.calls[1]["messages"][-1].content
    assert "suggestion number 1" not in llm.calls[1]["messages"][0].content
    # a hit happened in round 1; once three rounds have passed the dialogue ends as a hit
    assert d.end_reason == "target_hit" and len(d.agent_turns) == 3
    assert "earlier" in d.utterances[-1].text


def test_branch_no_hit_after_five_rounds_ends():
    sim, _ = make()
    d = run(sim, [["2"], ["3"], ["4"], ["5"], ["6"], ["1"]])
    assert d.end_reason == "max_rounds_no_hit"
    assert len(d.agent_turns) == 5 and not d.metadata["targets"]["hit_rounds"]


def test_branch_no_hit_before_round_five_keeps_describing():
    sim, _ = make()
    d = run(sim, [["2"]], max_turns=4)
    assert d.end_reason == "max_turns"  # the simulator itself did not stop within rounds 1-3
    assert all(not u.metadata.get("ask_introduce") for u in said(d))
    assert [u.metadata.get("round") for u in said(d)] == [0, 1, 2, 3]


def test_no_utterance_contains_a_target_title_even_when_the_llm_says_it():
    sim, _ = make(targets=("1", "7"))
    d = run(sim, [["2"], ["3"], ["4"], ["6"], ["8"]])
    pattern = re.compile(r"\bheat\b|\bse7en\b", re.I)
    for u in said(d):
        assert not pattern.search(u.text), u.text
    assert d.metadata["targets"]["titles_masked"] >= 2 * 5
    assert any(u.metadata.get("titles_masked") for u in said(d))


def test_prompts_describe_attributes_without_the_title():
    sim, llm = make(describe_slots=["genres", "director", "stars", "plot"])
    asyncio.run(sim.start())
    system = llm.calls[0]["messages"][0].content
    assert "Michael Mann" in system and "Al Pacino" in system and "Crime" in system
    assert "Heat" not in system


def test_persuasiveness_is_rated_when_the_simulator_stops():
    sim, llm = make()
    d = run(sim, [["2"], ["3"], ["1"]])
    assert d.metadata["persuasiveness"] == 2
    assert d.metadata["persuasiveness_detail"]["status"] == "ok"
    assert d.metadata["persuasiveness_detail"]["scale"] == [0, 2]
    rating_call = llm.calls[-1]
    assert rating_call["schema"]["properties"]["rating"]["maximum"] == 2
    assert "USER:" in rating_call["messages"][-1].content and "RECOMMENDER:" in rating_call["messages"][-1].content


def test_unparseable_persuasiveness_is_none_with_status_never_zero():
    def reply(messages, schema, index):
        if schema is not None and "rating" in schema["properties"]:
            return "quite good I guess, maybe 7 or 9"
        return {"utterance": "something tense", "end": False}

    sim, _ = make(reply)
    d = run(sim, [["2"], ["3"], ["4"], ["5"], ["6"]])
    assert d.metadata["persuasiveness"] is None
    assert d.metadata["persuasiveness_detail"]["status"] == "unparsed"


def test_persuasiveness_not_rated_when_the_engine_ends_first():
    sim, _ = make()
    d = run(sim, [["2"]], max_turns=2)
    assert d.metadata["persuasiveness"] is None
    assert d.metadata["persuasiveness_detail"]["status"] == "not_rated"


@pytest.mark.parametrize(
    "text,expected",
    [
        ('{"rating": 1}', 1),
        ("2", 2),
        ("rating: 0", 0),
        ("5", None),
        ("1 or 2", None),
        ("", None),
        ('{"rating": true}', None),
    ],
)
def test_rating_reader(text, expected):
    assert read_rating(None, text, 0, 2) == expected


def test_selected_residual_split_describes_only_selected_targets():
    targets = ("1", "3", "4", "8")
    sim, llm = make(targets=targets, selected_count=2, seed=9)
    d = run(sim, [["2"], ["6"], ["7"], ["5"], ["2"]])
    split = d.metadata["targets"]
    assert len(split["selected"]) == 2 and len(split["residual"]) == 2
    assert sorted(split["selected"] + split["residual"]) == sorted(targets)
    items = movie_items()
    system = llm.calls[0]["messages"][0].content
    for target in split["selected"]:
        assert items.get(target).values("director")[0] in system
    for target in split["residual"]:
        assert items.get(target).values("director")[0] not in system
    again, _ = make(targets=targets, selected_count=2, seed=9)
    assert again.selected == sim.selected  # drawn from the conversation seed


def test_residual_hit_is_recorded_but_does_not_end_by_default():
    sim, _ = make(targets=("1", "3", "4", "8"), selected_count=1, seed=2)
    residual = sim.residual[0].id
    d = run(sim, [[residual], ["2"], ["2"], ["2"], ["2"]])
    first = said(d)[1]
    assert first.metadata["hits_residual"] == [residual] and first.metadata["hit"] is False
    assert d.end_reason == "max_rounds_no_hit"


def test_title_patterns_ignore_case_and_punctuation_but_respect_word_boundaries():
    heat = title_patterns("Heat (1995)")
    assert not any(p.search("it heats up") for p in heat) and any(p.search("HEAT, I think") for p in heat)
    up = title_patterns("Up (2009)")
    assert not any(p.search("an upbeat one") for p in up) and any(p.search("I loved Up!") for p in up)
    spider = title_patterns("Spider-Man: Into the Spider-Verse (2018)")
    assert any(p.search("spider man into the spider verse") for p in spider)


def test_rejects_inconsistent_rounds():
    with pytest.raises(ValueError):
        TargetBiasedSimulator.Config.model_validate({"type": "target_biased", "min_rounds": 6, "max_rounds": 5})
