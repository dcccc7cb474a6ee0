"""Single-prompt LLM simulator: prompt rendering, history, stop handling, cleaning, determinism."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from tests.llm_sim_support import ScriptedLLM, context_with, converse, list_crs, movie_items, profile_for
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.profile import Persona
from usersimcrs.simulators.base import Stop, simulators
from usersimcrs.simulators.llm_single import SinglePromptSimulator


def make(reply, **options):
    llm = ScriptedLLM(reply)
    items = movie_items()
    cls = simulators.get("llm_single")
    config = cls.Config.model_validate({"type": "llm_single", **options})
    profile = profile_for(["1"], items, persona=Persona(fields={"age": "34", "mood": "curious"}))
    return cls(config, context_with(llm, items), profile, 7), llm


def history() -> Dialogue:
    d = Dialogue(conversation_id="h")
    d.add(Utterance(participant=USER, text="hi there, any crime films?"))
    d.add(Utterance(participant=AGENT, text="Sure. Do you like heists?", items=[ItemRef(id="5")]))
    d.add(Utterance(participant=USER, text="yes, tense ones"))
    d.add(Utterance(participant=AGENT, text="Then try Collateral."))
    return d


def test_registered_and_rejects_unknown_options():
    assert simulators.get("llm_single") is SinglePromptSimulator
    with pytest.raises(ValidationError):
        SinglePromptSimulator.Config.model_validate({"type": "llm_single", "temprature": 0.3})


def test_history_renders_each_turn_once_with_its_own_label():
    sim, llm = make(lambda m, s, i: {"utterance": "ok", "end": False}, history_mode="prompt")
    asyncio.run(sim.respond(history()))
    prompt = llm.calls[0]["messages"][-1].content
    lines = [line for line in prompt.splitlines() if line.startswith(("USER:", "RECOMMENDER:"))]
    assert lines == [
        "USER: hi there, any crime films?",
        "RECOMMENDER: Sure. Do you like heists?",
        "USER: yes, tense ones",
        "RECOMMENDER: Then try Collateral.",
    ]
    assert "USER: USER:" not in prompt and "RECOMMENDER: RECOMMENDER:" not in prompt
    # the history is rendered once per call, not repeated in the system message
    all_text = "\n".join(m.content for m in llm.calls[0]["messages"])
    assert all_text.count("yes, tense ones") == 1


def test_chat_mode_sends_the_whole_history_as_turns():
    sim, llm = make(lambda m, s, i: {"utterance": "ok", "end": False}, history_mode="chat")
    asyncio.run(sim.respond(history()))
    messages = llm.calls[0]["messages"]
    turns = [(m.role, m.content) for m in messages[1:]]
    cue = sim.prompt["chat_opening_cue"]
    assert turns == [
        ("user", cue),  # the greeting the opening turn answered stays first, so the prompt only grows
        ("assistant", "hi there, any crime films?"),
        ("user", "Sure. Do you like heists?"),
        ("assistant", "yes, tense ones"),
        ("user", "Then try Collateral."),
    ]  # the CRS's last turn comes last: the model answers it as the user
    assert messages[0].role == "system" and "- genres: Crime" in messages[0].content
    asyncio.run(sim.start())
    opening = llm.calls[1]["messages"]
    assert [m.role for m in opening] == ["system", "user"] and "movie" in opening[1].content.lower()


def test_default_mode_is_chat_and_prompt_mode_is_available():
    assert SinglePromptSimulator.Config(type="llm_single").history_mode == "chat"


def test_prompt_has_task_persona_need_and_no_target_title():
    sim, llm = make(lambda m, s, i: {"utterance": "hello", "end": False})
    asyncio.run(sim.start())
    text = "\n".join(m.content for m in llm.calls[0]["messages"])
    assert "- age: 34" in text and "- genres: Crime" in text
    assert "Heat" not in text  # the target is never named unless show_targets is set
    assert "Example conversations" not in text  # zero-shot by default


def test_structured_end_becomes_user_stop_after_min_turns():
    sim, _ = make(lambda m, s, i: {"utterance": "Thanks, bye!", "end": True}, min_turns=1)
    d = history()
    out = asyncio.run(sim.respond(d))
    assert isinstance(out, Stop) and out.reason == "user_stop"
    assert out.utterance is not None and out.utterance.text == "Thanks, bye!"


def test_stop_before_min_turns_is_not_honoured():
    sim, _ = make(lambda m, s, i: {"utterance": "bye", "end": True}, min_turns=5)
    out = asyncio.run(sim.respond(history()))
    assert isinstance(out, Utterance) and out.text == "bye" and out.metadata["end_ignored"] is True


def test_stop_token_in_text_mode_ends_the_conversation():
    sim, llm = make(lambda m, s, i: "USER: That is all I needed, thanks! <END>", structured=False, min_turns=0)
    out = asyncio.run(sim.respond(history()))
    assert isinstance(out, Stop) and out.reason == "user_stop"
    assert out.utterance.text == "That is all I needed, thanks!"
    assert llm.calls[0]["schema"] is None
    assert "<END>" in llm.calls[0]["messages"][0].content  # the prompt data defines the token


def test_generation_is_cleaned_and_falls_back_when_empty():
    replies = iter(["USER: USER: I want something dark\nRECOMMENDER: How about Se7en?", "   ", '"RECOMMENDER: hi"'])
    sim, _ = make(lambda m, s, i: next(replies), structured=False)
    first = asyncio.run(sim.respond(history()))
    assert first.text == "I want something dark"
    second = asyncio.run(sim.respond(history()))
    assert second.metadata["generation"] == "fallback:empty" and second.text.endswith("?")
    third = asyncio.run(sim.respond(history()))
    assert third.metadata["generation"] == "fallback:empty"


@pytest.mark.parametrize(
    "reply,problem",
    [
        ('{"utterance": "<USER message>", "end": false}', "placeholder"),
        ('{"utterance": "[your message here]", "end": false}', "placeholder"),
        ('{"utterance": "...", "end": false}', "empty"),
        ('{"utterance": "(what you are looking for)", "end": false}', "placeholder"),
        ('{"utterance": "Then try Collateral.", "end": false}', "copied"),
        ('{"utterance": "yes, tense ones", "end": false}', "repeated"),
    ],
)
def test_echoed_or_repeated_generations_are_replaced(reply, problem):
    sim, _ = make(lambda m, s, i: reply)
    out = asyncio.run(sim.respond(history()))
    assert out.metadata["generation"] == f"fallback:{problem}"
    assert out.text in sim.prompt["fallback_utterances"]


def test_opening_fallback_is_built_from_the_need():
    sim, _ = make(lambda m, s, i: '{"utterance": "", "end": false}')
    out = asyncio.run(sim.start())
    assert "genres: Crime" in out.text


def test_structured_reply_wrapped_in_prose_is_still_read():
    sim, _ = make(lambda m, s, i: 'Sure! {"utterance": "Something with Al Pacino?", "end": false} hope that helps')
    out = asyncio.run(sim.respond(history()))
    assert out.text == "Something with Al Pacino?" and out.metadata["generation"] == "structured"


def test_calls_use_configured_temperature_tokens_and_turn_seeds():
    sim, llm = make(lambda m, s, i: {"utterance": "more please", "end": False}, temperature=0.4, max_tokens=33)
    d = history()
    asyncio.run(sim.respond(d))
    asyncio.run(sim.respond(d))
    d.add(Utterance(participant=USER, text="again"))
    asyncio.run(sim.respond(d))
    calls = llm.calls
    assert {c["temperature"] for c in calls} == {0.4} and {c["max_tokens"] for c in calls} == {33}
    assert {c["component"] for c in calls} == {"simulator"}
    assert calls[0]["seed"] == calls[1]["seed"] != calls[2]["seed"]
    other, llm2 = make(lambda m, s, i: {"utterance": "x", "end": False})
    other.seed = 8
    asyncio.run(other.respond(history()))
    assert llm2.calls[0]["seed"] != calls[0]["seed"]


def test_few_shot_examples_come_from_a_dialoguekit_file(shared_data):
    path = shared_data / "dialoguekit" / "moviebot_annotated_dialogues.json"
    sim, llm = make(lambda m, s, i: {"utterance": "hi", "end": False}, few_shot_file=str(path), few_shot_dialogues=1)
    asyncio.run(sim.start())
    system = llm.calls[0]["messages"][0].content
    assert "Example conversations" in system and "RECOMMENDER:" in system


def _derived(messages, schema, index):
    """Talk for three user turns, then end; the reply depends on the history it is sent only."""
    user_turns = sum(1 for m in messages if m.role == "assistant")
    if user_turns >= 3:
        return {"utterance": "Great, I will watch that. Bye!", "end": True}
    return {"utterance": f"Something tense please (turn {user_turns})", "end": False}


@pytest.mark.parametrize("conversation", range(3))
def test_conversations_end_through_the_stop_rule(conversation):
    llm = ScriptedLLM(_derived)
    items = movie_items()
    sim = SinglePromptSimulator(
        SinglePromptSimulator.Config(type="llm_single"),
        context_with(llm, items),
        profile_for(["1"], items),
        seed=conversation,
    )
    d = asyncio.run(converse(sim, list_crs([["2", "3"], ["5", "1"]]), conversation_id=f"c{conversation}"))
    assert d.end_reason == "user_stop"
    assert [u.participant for u in d.utterances] == ["USER", "AGENT"] * 3 + ["USER"]
    assert d.utterances[-1].text == "Great, I will watch that. Bye!"
    # each call saw the full history so far
    for k, call in enumerate(llm.calls):
        roles = [m.role for m in call["messages"]]
        assert roles.count("assistant") == k and roles[-1] == "user"
        assert roles.count("user") == k + 1  # the opening cue, then the CRS turns
    json.dumps(d.model_dump(mode="json"))


def test_mostly_copied_prompt_lines_are_replaced_and_dangling_ends_trimmed():
    from usersimcrs.simulators.prompting import clean_utterance, unusable_reason

    prompt = ["Your reactions:\n- Toy Story (1995) (new to you): dislike - nothing known about it"]
    assert unusable_reason("I want: Toy Story (1995) (new to you): dislike - nothing known", prompt, []) == "copied"
    assert unusable_reason("I'd love a heist film with a great score", prompt, []) is None
    crs = ["How about In the Mood For Love (Fa yeung nin wa) (2000)? It is a drama."]
    quoting = "Is In the Mood For Love (Fa yeung nin wa) (2000) any good?"
    assert unusable_reason(quoting, [f"RECOMMENDER: {crs[0]}"], [], crs) is None
    assert unusable_reason("How about In the Mood For Love (Fa yeung nin wa) (2000)?", [], [], crs) == "copied"
    assert clean_utterance("I'm in the mood for:", own_labels=["USER"], other_labels=["RECOMMENDER"]) == (
        "I'm in the mood for",
        False,
    )


def test_a_repeat_with_an_ignored_end_request_falls_back():
    sim, _ = make(lambda m, s, i: {"utterance": "yes, tense ones", "end": True}, min_turns=5)
    out = asyncio.run(sim.respond(history()))
    assert isinstance(out, Utterance) and out.text in sim.prompt["fallback_utterances"]


def test_chat_mode_reminds_the_model_of_the_need_last():
    sim, llm = make(lambda m, s, i: {"utterance": "hi", "end": False})
    asyncio.run(sim.start())
    system = llm.calls[0]["messages"][0].content
    assert system.rstrip().endswith("- genres: Crime")


def test_a_run_reads_the_prompt_data_once_and_renders_a_shared_users_preferences_once(monkeypatch):
    """Issue #22: the prompt YAML is parsed and merged once per run (each conversation gets its own top-level
    copy), and a ratings user's read-only preferences are rendered once per run, whatever the conversation."""
    from usersimcrs.core.profile import Preferences
    from usersimcrs.simulators import llm_base
    from usersimcrs.user_model.population import read_only_preferences

    llm = ScriptedLLM(lambda m, s, i: {"utterance": "ok", "end": False})
    items = movie_items()
    context = context_with(llm, items)
    cls = simulators.get("llm_single")
    config = cls.Config.model_validate({"type": "llm_single"})
    profile = profile_for(["1"], items)
    profile.preferences = read_only_preferences(Preferences(slots={"GENRE": {"Crime": 1.0, "Drama": -0.5}}))
    rendered: list[object] = []
    original = llm_base.render_preferences
    monkeypatch.setattr(llm_base, "render_preferences", lambda prefs: rendered.append(prefs) or original(prefs))
    first, second = cls(config, context, profile, 1), cls(config, context, profile, 2)
    assert first.prompt == second.prompt and first.prompt is not second.prompt
    first.prompt["system"] = "changed"  # one conversation's copy: the other's and the run's stay as they were
    assert second.prompt["system"] != "changed" and cls(config, context, profile, 3).prompt["system"] != "changed"
    texts = [sim.variables()["preferences_section"] for sim in (first, second)]
    assert texts[0] == texts[1] and "Crime (GENRE)" in texts[0] and len(rendered) == 1
    plain = profile_for(["1"], items)  # a profile of its own (changeable containers): rendered each time
    plain.preferences = Preferences(slots={"GENRE": {"Crime": 1.0}})
    cls(config, context, plain, 4).variables()
    assert len(rendered) == 2
