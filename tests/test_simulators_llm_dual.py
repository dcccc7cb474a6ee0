"""Dual-prompt LLM simulator: the stop prompt sees both sides, structured decision, stop utterance."""

from __future__ import annotations

import asyncio

import pytest

from tests.llm_sim_support import ScriptedLLM, context_with, converse, list_crs, movie_items, profile_for
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.llm.base import LLMResult
from usersimcrs.simulators.base import Stop, simulators
from usersimcrs.simulators.llm_dual import DualPromptSimulator, read_decision


def make(reply, **options):
    llm = ScriptedLLM(reply)
    items = movie_items()
    config = DualPromptSimulator.Config.model_validate({"type": "llm_dual", **options})
    return DualPromptSimulator(config, context_with(llm, items), profile_for(["1"], items), 3), llm


def history(n: int = 2) -> Dialogue:
    d = Dialogue(conversation_id="h")
    for k in range(n):
        d.add(Utterance(participant=USER, text=f"user says {k}"))
        d.add(Utterance(participant=AGENT, text=f"crs says {k}"))
    return d


def by_schema(end: bool, text: str = "tell me more"):
    """Answer the stop prompt with `end` and the generation prompt with `text`."""

    def reply(messages, schema, index):
        if schema is not None and "utterance" not in schema["properties"]:
            return {"end": end}
        return {"utterance": text, "end": False}

    return reply


def test_registered():
    assert simulators.get("llm_dual") is DualPromptSimulator


def test_stop_prompt_sees_both_sides_of_the_history():
    sim, llm = make(by_schema(False))
    asyncio.run(sim.respond(history(2)))
    stop_call = llm.calls[0]
    assert stop_call["schema"]["required"] == ["end"] and stop_call["max_tokens"] == 16
    prompt = stop_call["messages"][-1].content
    for k in range(2):
        assert f"USER: user says {k}" in prompt and f"RECOMMENDER: crs says {k}" in prompt
    assert prompt.count("USER: user says 0") == 1


def test_continue_generates_like_single_prompt():
    sim, llm = make(by_schema(False, "any thrillers?"))
    out = asyncio.run(sim.respond(history(2)))
    assert isinstance(out, Utterance) and out.text == "any thrillers?"
    assert out.metadata["stop_decision"] == {"end": False, "read": "structured"}
    assert len(llm.calls) == 2 and llm.calls[0]["seed"] != llm.calls[1]["seed"]


def test_stop_sends_the_configured_stop_utterance():
    sim, llm = make(by_schema(True), stop_utterance="All done, cheers.")
    out = asyncio.run(sim.respond(history(2)))
    assert isinstance(out, Stop) and out.reason == "user_stop"
    assert out.utterance.text == "All done, cheers." and len(llm.calls) == 1


def test_no_stop_prompt_before_min_turns():
    sim, llm = make(by_schema(True), min_turns=3)
    out = asyncio.run(sim.respond(history(2)))
    assert isinstance(out, Utterance) and len(llm.calls) == 1
    assert "utterance" in llm.calls[0]["schema"]["properties"]


@pytest.mark.parametrize(
    "result,expected",
    [
        (LLMResult(text='{"end": true}', parsed={"end": True}), (True, "structured")),
        (LLMResult(text="Yes, I would leave."), (True, "text")),
        (LLMResult(text="no"), (False, "text")),
        (LLMResult(text="hmm"), (None, "unparsed")),
    ],
)
def test_decision_reading(result, expected):
    assert read_decision(result) == expected


def test_text_mode_uses_plain_yes_no():
    def reply(messages, schema, index):
        return "yes" if "Would USER end" in messages[-1].content else "never"

    sim, llm = make(reply, structured=False)
    out = asyncio.run(sim.respond(history(2)))
    assert isinstance(out, Stop) and llm.calls[0]["schema"] is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_conversations_stop_through_the_decision(seed):
    def reply(messages, schema, index):
        prompt = messages[-1].content
        if schema is not None and "utterance" not in schema["properties"]:
            return {"end": "Collateral" in prompt}
        return {"utterance": "something like Heat, but newer", "end": False}

    llm = ScriptedLLM(reply)
    items = movie_items()
    sim = DualPromptSimulator(
        DualPromptSimulator.Config(type="llm_dual"), context_with(llm, items), profile_for(["5"], items), seed
    )
    crs_texts = iter(["Try Toy Story.", "Try Up.", "Try Collateral.", "Try Alien."])

    def crs(d):
        u = list_crs([["2"], ["6"], ["5"], ["3"]])(d)
        u.text = next(crs_texts)
        return u

    d = asyncio.run(converse(sim, crs))
    assert d.end_reason == "user_stop" and d.utterances[-1].participant == USER
    assert d.utterances[-2].text == "Try Collateral."
