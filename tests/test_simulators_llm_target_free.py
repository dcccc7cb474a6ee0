"""PEPPER-style target-free simulator: no target in any prompt, seen/unseen reflection, turn limit."""

from __future__ import annotations

import asyncio

import pytest

from tests.llm_sim_support import ScriptedLLM, context_with, converse, list_crs, movie_items
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.profile import InformationNeed, Preferences, SeenItem, UserProfile
from usersimcrs.simulators.base import simulators
from usersimcrs.simulators.target_free import TargetFreeSimulator

TARGETS = ["5", "7"]  # Collateral, Se7en


def pepper_profile(leak: bool = False) -> UserProfile:
    items = movie_items()
    seen = [
        SeenItem(item=items.get("1").ref(), rating=9, review="[Like]\ntense heist\n[Dislike]\nNone"),
        SeenItem(item=items.get("4").ref(), rating=3, review="[Like]\nNone\n[Dislike]\ntoo whimsical"),
        SeenItem(item=items.get("3").ref(), rating=8, review="[Like]\nscary creature"),
    ]
    if leak:  # a data error: a target listed among the seen items must still not reach any prompt
        seen.append(SeenItem(item=items.get("5").ref(), rating=10, review="[Like]\nthe cab"))
    return UserProfile(
        user_id="imdb-1",
        need=InformationNeed(targets=[items.get(t).ref() for t in TARGETS]),
        seen_items=seen,
        metadata={"rating_scale": [1, 10]},
    )


def reflect_or_answer(messages, schema, index):
    """Like every new movie with an even number, dislike the others; answer with a fixed line."""
    if schema is not None and "items" in schema["properties"]:
        numbers = [int(line.split(".")[0]) for line in messages[-1].content.splitlines() if line[:1].isdigit()]
        return {
            "items": [{"number": n, "verdict": "like" if n % 2 == 0 else "dislike", "reason": "plot"} for n in numbers]
        }
    return {"utterance": "I love tense crime stories. What else do you have?", "end": False}


def make(reply=reflect_or_answer, profile=None, **options):
    llm = ScriptedLLM(reply)
    items = movie_items()
    config = TargetFreeSimulator.Config.model_validate({"type": "target_free", **options})
    return TargetFreeSimulator(config, context_with(llm, items), profile or pepper_profile(), 5), llm


def test_registered_with_paper_defaults():
    assert simulators.get("target_free") is TargetFreeSimulator
    config = TargetFreeSimulator.Config(type="target_free")
    assert (config.top_k, config.max_turns, config.temperature) == (4, 20, 0.0)


@pytest.mark.parametrize("leak", [False, True])
def test_no_prompt_ever_contains_a_target_title(leak):
    sim, llm = make(profile=pepper_profile(leak))
    d = asyncio.run(converse(sim, list_crs([["2", "1"], ["3", "6", "8"], ["4"]]), max_turns=5))
    assert d.end_reason == "max_turns" and len(llm.calls) > 5
    for text in llm.prompts():
        for title in ("Collateral", "Se7en"):
            assert title not in text
    assert "Heat (1995)" in sim.narrative  # the narrative is built from seen items


def test_seen_and_unseen_items_are_reflected_and_recorded():
    sim, llm = make()
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant=USER, text="hi"))
    d.add(
        Utterance(
            participant=AGENT,
            text="How about these?",
            items=[ItemRef(id="1"), ItemRef(id="2"), ItemRef(title="Up"), ItemRef(id="4")],
        )
    )
    out = asyncio.run(sim.respond(d))
    meta = out.metadata
    assert meta["shown"] == ["1", "2", "6", "4"]
    assert meta["seen"] == ["1", "4"] and meta["unseen"] == ["2", "6"]
    by_item = {r["item"]: r for r in meta["reflected_preferences"]}
    assert by_item["1"]["verdict"] == "like" and by_item["1"]["rating"] == 9 and "tense heist" in by_item["1"]["reason"]
    assert by_item["4"]["verdict"] == "dislike" and "too whimsical" in by_item["4"]["reason"]
    assert by_item["2"]["verdict"] == "dislike" and by_item["6"]["verdict"] == "like"  # numbers 1 and 2 of the new ones
    assert {by_item[i]["source"] for i in ("2", "6")} == {"llm"}
    reflect_prompt = llm.calls[0]["messages"][-1].content
    assert "Toys come alive" in reflect_prompt and "Heat" not in reflect_prompt  # metadata of unseen items only
    answer = llm.calls[1]["messages"]
    assert "Heat (1995) (watched, you rated it 9/10): like" in answer[-1].content  # after the history
    cue = sim.prompt["chat_opening_cue"]
    assert [(m.role, m.content.split("\n\n")[0]) for m in answer[1:]] == [
        ("user", cue),
        ("assistant", "hi"),
        ("user", "How about these?"),
    ]  # the history after the opening cue; this turn's reactions close the CRS's last message


def test_prompt_mode_renders_reflections_and_history_in_one_prompt():
    sim, llm = make(history_mode="prompt")
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant=USER, text="hi"))
    d.add(Utterance(participant=AGENT, text="How about these?", items=[ItemRef(id="1")]))
    asyncio.run(sim.respond(d))
    answer_prompt = llm.calls[-1]["messages"][-1].content
    assert "Heat (1995) (watched, you rated it 9/10): like" in answer_prompt
    assert "USER: hi\nRECOMMENDER: How about these?" in answer_prompt


def test_only_the_top_k_items_are_read():
    sim, _ = make(top_k=2)
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant=AGENT, text="Here", items=[ItemRef(id=i) for i in ("2", "3", "6", "8")]))
    out = asyncio.run(sim.respond(d))
    assert out.metadata["shown"] == ["2", "3"]


def test_rules_fallback_when_the_reflection_is_unusable():
    def reply(messages, schema, index):
        if schema is not None and "items" in schema["properties"]:
            return "I cannot decide"
        return {"utterance": "ok", "end": False}

    profile = pepper_profile()
    profile.preferences = Preferences(slots={"genres": {"Crime": 1.0, "Romance": -1.0}})
    sim, _ = make(reply, profile=profile)
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant=AGENT, text="Here", items=[ItemRef(id="8"), ItemRef(id="7"), ItemRef(id="2")]))
    records = {r["item"]: r for r in asyncio.run(sim.respond(d)).metadata["reflected_preferences"]}
    assert records["8"]["verdict"] == "dislike" and records["7"]["verdict"] == "like"
    assert records["2"]["verdict"] == "unsure" and records["8"]["source"] == "rules"


def test_stops_after_max_turns():
    sim, _ = make(max_turns=3)
    d = asyncio.run(converse(sim, list_crs([["2"]]), max_turns=50))
    assert d.end_reason == "max_turns_simulator"
    assert len(d.user_turns) == 3 and d.utterances[-1].participant == AGENT


def test_default_limit_is_twenty_turns():
    sim, _ = make(reflection="rules")
    d = asyncio.run(converse(sim, list_crs([["2", "3"]]), max_turns=100))
    assert d.end_reason == "max_turns_simulator" and len(d.user_turns) == 20


def test_model_end_is_a_user_stop_with_reflections():
    def reply(messages, schema, index):
        if schema is not None and "items" in schema["properties"]:
            return {"items": [{"number": 1, "verdict": "like", "reason": "yes"}]}
        return {"utterance": "Perfect, thanks!", "end": True}

    sim, _ = make(reply, min_turns=1)
    d = asyncio.run(converse(sim, list_crs([["2"]])))
    assert d.end_reason == "user_stop" and d.utterances[-1].text == "Perfect, thanks!"
    assert d.utterances[-1].metadata["unseen"] == ["2"]


def test_raw_reviews_are_recalled_as_text_not_split_into_likes():
    profile = pepper_profile()
    profile.seen_items[0].review = "Saw it twice.\nThe shootout is the best ever filmed."
    sim, _ = make(profile=profile)
    assert "Saw it twice." not in sim.preferences.likes
    d = Dialogue(conversation_id="c")
    d.add(Utterance(participant=AGENT, text="Here", items=[ItemRef(id="1")]))
    record = asyncio.run(sim.respond(d)).metadata["reflected_preferences"][0]
    assert record["seen"] and record["reason"].startswith("your review: Saw it twice.")


def test_llm_narrative_is_written_from_seen_items_only_and_used_afterwards():
    def reply(messages, schema, index):
        if schema is not None and "narrative" in schema["properties"]:
            return {"narrative": "You enjoy tense, stylish crime stories and a good creature scare."}
        return reflect_or_answer(messages, schema, index)

    sim, llm = make(reply, narrative="llm", profile=pepper_profile(leak=True))
    d = asyncio.run(converse(sim, list_crs([["2", "1"]]), max_turns=2))
    narrative_prompt = llm.calls[0]["messages"][-1].content
    assert "Heat (1995)" in narrative_prompt and "you rated it 9/10" in narrative_prompt
    assert "Collateral" not in narrative_prompt and "Se7en" not in narrative_prompt
    assert sum("narrative" in (c["schema"] or {}).get("properties", {}) for c in llm.calls) == 1
    assert "tense, stylish crime stories" in llm.calls[1]["messages"][0].content
    assert d.user_turns[0].metadata["narrative_source"] == "llm"


def test_unusable_llm_narrative_falls_back_to_the_template():
    def reply(messages, schema, index):
        if schema is not None and "narrative" in schema["properties"]:
            return {"narrative": "ok"}
        return reflect_or_answer(messages, schema, index)

    sim, _ = make(reply, narrative="llm")
    asyncio.run(sim.start())
    assert sim.narrative_source == "template" and "Heat (1995)" in sim.narrative
