"""The agenda simulator end to end: scripted CRS conversations, configs, YAML schemas, the engine."""

from __future__ import annotations

import json

import pytest

from tests.agenda_support import ScriptedCRS, catalogue, comedy_fan, run_conversation, simulator
from usersimcrs.config import validate_section
from usersimcrs.errors import ConfigError
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.agenda.simulator import AgendaSimulator
from usersimcrs.simulators.base import simulators

STOP_REASONS = {"agenda_done", "target_accepted", "user_gave_up", "crs_ended"}


def test_registered_as_agenda():
    assert simulators.get("agenda") is AgendaSimulator


def test_conversation_reaches_the_target_and_records_acts_and_state():
    sim = simulator(comedy_fan(), seed=5)
    dialogue = run_conversation(sim)
    assert dialogue.end_reason == "target_accepted"
    users = dialogue.user_turns
    assert all(u.dialogue_acts for u in users)
    assert [a.intent for a in users[0].dialogue_acts] == ["DISCLOSE.NON-DISCLOSE", "DISCLOSE"]
    accept_turn = next(u for u in users if any(a.intent == "NOTE.ACCEPT" for a in u.dialogue_acts))
    assert [a.intent for a in accept_turn.dialogue_acts] == ["NOTE.ACCEPT", "INQUIRE.ITEMINFO"]
    assert accept_turn.metadata["cases"] == ["recommendation"]
    assert accept_turn.metadata["agent_acts"][0].startswith("REVEAL(")
    assert users[-1].metadata["requests"]["DIRECTOR"]["fulfilled"] is True
    assert users[-1].metadata["stop_reason"] == "target_accepted"
    assert users[-1].dialogue_acts[-1].intent == "COMPLETE"
    # the ScriptedCRS order is Toy Story, Saw, Airplane!, Superbad: neutral, neutral/dislike, seen, accept
    verdicts = [j["verdict"] for u in users for j in u.metadata.get("judgements", [])]
    assert verdicts[-1] == "target" and "seen" in verdicts


def test_two_seeds_accept_the_same_target():
    accepted = set()
    for seed in (1, 99):
        dialogue = run_conversation(simulator(comedy_fan(), seed=seed))
        assert dialogue.end_reason == "target_accepted"
        accepted.add(next(u.metadata["accepted"] for u in dialogue.user_turns if u.metadata.get("accepted")))
    assert accepted == {"Superbad (2007)"}


def test_same_seed_same_conversation_and_templates_vary_with_the_seed():
    texts = lambda seed: [u.text for u in run_conversation(simulator(comedy_fan(), seed=seed)).utterances]  # noqa: E731
    assert texts(4) == texts(4)
    assert len({tuple(texts(s)) for s in range(6)}) > 1


def test_gives_up_when_nothing_fits():
    profile = comedy_fan(targets=[])
    profile.preferences.slots["genres"] = {"Comedy": 0.1}
    sim = simulator(profile, seed=2, max_recommendation_rounds=3)
    crs = ScriptedCRS(ScriptedCRS.Config(type="scripted", order=["2", "5", "6", "1"]), sim.context)
    dialogue = run_conversation(sim, crs)
    assert dialogue.end_reason == "user_gave_up"
    goodbye = dialogue.utterances[-1]
    assert goodbye.participant == "USER" and goodbye.metadata["stop_reason"] == "user_gave_up"
    assert not any(word in goodbye.text.lower() for word in ("thank", "great")), goodbye.text


def test_runs_without_an_item_collection():
    sim = simulator(comedy_fan(), seed=3, context=RunContext(items=None))
    crs_context = RunContext(items=catalogue())
    dialogue = run_conversation(sim, ScriptedCRS(ScriptedCRS.Config(type="scripted"), crs_context))
    assert dialogue.end_reason in STOP_REASONS
    assert dialogue.end_reason == "target_accepted"  # matched by title alone


def test_config_rejects_unknown_keys_and_unknown_components():
    with pytest.raises(ConfigError, match="simulator.colour"):
        validate_section(AgendaSimulator.Config, {"type": "agenda", "colour": 1}, source="run.yaml", prefix="simulator")
    with pytest.raises(ConfigError, match="simulator.nlu"):
        validate_section(
            AgendaSimulator.Config, {"type": "agenda", "nlu": "magic"}, source="run.yaml", prefix="simulator"
        )


def test_anchor_interaction_model_and_domain_yaml_are_accepted(shared_data):
    refs = shared_data / "reference_configs"
    sim = simulator(
        comedy_fan(),
        seed=1,
        interaction_model_path=str(refs / "interaction_models_redial_v1.yaml"),
        domain_path=str(refs / "domains_moviebot.yaml"),
        intent_roles={"recommend": "REC-S", "elicit": "REQ", "end": "END", "greet": "OTH"},
    )
    assert sim.resources.domain.slot_names == ["TITLE", "GENRE", "KEYWORD"]
    dialogue = run_conversation(sim)
    assert dialogue.end_reason == "target_accepted"
    intents = [a.intent for u in dialogue.user_turns for a in u.dialogue_acts]
    assert "PRO" in intents and "ACC" in intents and "BYE" in intents  # the ReDial schema's own intents


def test_annotated_dialogues_give_transitions_and_mined_templates(shared_data):
    path = shared_data / "dialoguekit" / "moviebot_annotated_dialogues.json"
    sim = simulator(comedy_fan(), seed=1, annotated_dialogues_path=str(path))
    assert sim.resources.transitions.source == "annotated"
    assert "NOTE.YES" in sim.resources.transitions.distribution("REVEAL")
    assert sim.resources.mined and sim.resources.examples
    dialogue = run_conversation(sim)
    assert dialogue.end_reason in STOP_REASONS
    assert any(u.metadata["nlg_source"] == "mined" for u in dialogue.user_turns)


def test_resources_are_shared_within_a_run_but_state_is_not():
    context = RunContext(items=catalogue())
    a = simulator(comedy_fan("a"), context=context)
    b = simulator(comedy_fan("b"), context=context)
    assert a.resources is b.resources
    assert a.policy is not b.policy and a.nlu is not b.nlu


def test_fifty_conversations_through_the_engine_with_the_retrieval_baseline(shared_data, tmp_path):
    pytest.importorskip("crs_connectors.baselines.retrieval")
    from usersimcrs.config import RunConfig
    from usersimcrs.engine.runner import run

    items = shared_data / "items" / "movielens-25m-sample"
    config = RunConfig.model_validate(
        {
            "seed": 11,
            "conversations": 50,
            "concurrency": 4,
            "max_turns": 10,
            "items": {
                "path": str(items / "movies_w_keywords.csv"),
                "mapping": {"genres": "genres", "keywords": "keywords"},
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(items / "ratings.csv")},
            "profiles": {"source": "generate", "constraint_slots": ["genres"]},
            "simulator": {"type": "agenda"},
            "crs": {"type": "retrieval"},
            "progress": False,
        }
    )

    def records(folder):
        run(config, folder)
        rows = [json.loads(line) for line in (folder / "dialogues.jsonl").read_text().splitlines()]
        for row in rows:
            row.pop("timings", None)
            for utterance in row["utterances"]:
                utterance.pop("latency_s", None)
        return sorted(rows, key=lambda r: r["conversation_id"])

    first = records(tmp_path / "a")
    assert len(first) == 50
    assert all(r["status"] == "ok" for r in first)
    assert {r["end_reason"] for r in first} <= STOP_REASONS | {"max_turns"}
    assert any(r["end_reason"] in ("target_accepted", "agenda_done") for r in first)
    assert all(u["dialogue_acts"] for r in first for u in r["utterances"] if u["participant"] == "USER")
    assert first == records(tmp_path / "b")


def test_llm_nlu_and_nlg_through_the_run_context():
    llm_server = pytest.importorskip("usersimcrs.testing.llm_server")
    from usersimcrs.llm.provider import LLMProvider

    def reply(body):  # type: ignore[no-untyped-def]
        system = body["messages"][0]["content"]
        if "annotate" in system:
            return "INQUIRE.ELICIT(GENRE)" if "genre" in body["messages"][-1]["content"].lower() else "None"
        acts = body["messages"][-1]["content"].split("Acts to express:")[1].split("\n")[0].strip()
        return f"(llm) {acts}"

    with llm_server.LLMServer(reply) as server:
        provider = LLMProvider(server.config("openai", retries=0))
        context = RunContext(items=catalogue(), llms=provider)
        sim = simulator(comedy_fan(), seed=8, context=context, nlu="llm", nlg="llm")
        dialogue = run_conversation(sim)
        import asyncio

        asyncio.run(provider.aclose())
        bodies = [r.body for r in server.chat_requests]
    assert dialogue.end_reason == "target_accepted"
    assert all(u.text.startswith("(llm) ") for u in dialogue.user_turns)
    assert all(u.metadata["nlg_source"] == "llm" for u in dialogue.user_turns)
    assert dialogue.user_turns[1].metadata["agent_acts"] == ["INQUIRE.ELICIT(GENRE)"]
    assert all(b["temperature"] == 0 for b in bodies)
    seeds = [b["seed"] for b in bodies]
    assert len(set(seeds)) == len(seeds)  # one seed per call: simulator seed, turn and component
    usage = provider.usage_summary()
    assert set(usage["by_component"]) == {"nlu", "nlg"}
