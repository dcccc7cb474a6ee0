"""Each judge against the real local OpenAI-protocol server with scripted replies."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.profile import UserProfile
from usersimcrs.judges.base import JudgeOptions
from usersimcrs.judges.components import expand_models_map
from usersimcrs.judges.core12 import Core12Judge
from usersimcrs.judges.debate import DebateJudge, DebateOptions
from usersimcrs.judges.pepper import PepperJudge
from usersimcrs.judges.persuasiveness import PersuasivenessJudge
from usersimcrs.judges.quality import QualityJudge
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.llm_server import LLMServer

ROLES = ["common_user", "domain_expert", "linguist", "hci_expert"]
ROLE_TITLES = {
    "Common user": "common_user",
    "Domain expert": "domain_expert",
    "Linguist": "linguist",
    "HCI expert": "hci_expert",
}


def dialogue(conversation_id: str = "c1") -> Dialogue:
    d = Dialogue(conversation_id=conversation_id)
    d.profile = UserProfile.model_validate(
        {
            "user_id": "u",
            "need": {"targets": [{"title": "Finding Nemo (2003)"}]},
            "preferences": {"narrative": "Likes animated family films about the sea."},
        }
    )
    d.add(Utterance(participant="USER", text="Any family movies?"))
    d.add(Utterance(participant="AGENT", text="Have you seen Moana?", items=[ItemRef(title="Moana (2016)")]))
    d.add(Utterance(participant="USER", text="Something with a fish looking for his son?"))
    d.add(Utterance(participant="AGENT", text="Finding Nemo!", items=[ItemRef(title="Finding Nemo (2003)")]))
    d.add(Utterance(participant="USER", text="Perfect, thanks."))
    return d


def judged_title(body: dict) -> str:
    """The criterion title (from our request after the data) or the role title (from the system message)."""
    request = body["messages"][1]["content"]
    match = re.search(r'^Rate "(.+?)" \(', request, re.M)
    match = match or re.search(r"^Your role: ([^.]+)\.", body["messages"][0]["content"], re.M)
    return match.group(1)


def is_role_call(body: dict) -> bool:
    return "\nYour role: " in body["messages"][0]["content"]


def round_of(body: dict) -> int:
    return int(re.search(r"Round (\d+) of", body["messages"][1]["content"]).group(1))


def run(judge, d, provider, existing=None):
    async def go():
        try:
            return await judge.score(d, RunContext(llms=provider), existing)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def provider_for(server: LLMServer, components: dict | None = None) -> LLMProvider:
    return LLMProvider(server.config("openai", cache=False, retries=0), components or {})


def test_quality_clean_structured_parse():
    reply = lambda body: json.dumps({"rationale": f"about {judged_title(body)}", "rating": 4})  # noqa: E731
    with LLMServer(replies=reply) as server:
        judgments = run(QualityJudge(), dialogue(), provider_for(server))
        requests = server.chat_requests
    assert len(judgments) == 5 and len(requests) == 5
    assert {j.status for j in judgments} == {"ok"} and {j.value for j in judgments} == {4.0}
    fluency = next(j for j in judgments if j.name == "fluency")
    assert fluency.rationale == "about Fluency" and fluency.scale == (1.0, 5.0)
    assert fluency.usage.calls == 1 and fluency.usage.prompt_tokens > 0 and fluency.model == "openai:test-model"
    # structured output was requested with the rubric's bounds
    schema = requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["rating"]["minimum"] == 1 and schema["properties"]["rating"]["maximum"] == 5


def test_tolerant_parse_of_a_rating_tag():
    with LLMServer(replies=lambda body: "The system is fine overall.\n<rating>3</rating>") as server:
        judgments = run(QualityJudge(JudgeOptions(criteria=["fluency"])), dialogue(), provider_for(server))
    assert judgments[0].value == 3.0 and judgments[0].status == "ok" and judgments[0].attempts == 1


def test_malformed_reply_is_retried_then_recorded_as_none_with_status():
    with LLMServer(replies=lambda body: "I would rather not say.") as server:
        judgments = run(
            QualityJudge(JudgeOptions(criteria=["fluency"], max_attempts=3)), dialogue(), provider_for(server)
        )
        requests = server.chat_requests
    (judgment,) = judgments
    assert judgment.value is None and judgment.status == "parse_error"
    assert judgment.attempts == 3 and len(requests) == 3 and judgment.usage.calls == 3
    # each retry tells the model what was wrong (so it is a new prompt, not a cache hit)
    assert "could not be used" in requests[1].body["messages"][-1]["content"]
    assert judgment.raw["replies"] == ["I would rather not say."] * 3


def test_malformed_then_valid_reply_recovers():
    with LLMServer(replies=["not json at all", json.dumps({"rationale": "ok", "rating": 2})]) as server:
        (judgment,) = run(QualityJudge(JudgeOptions(criteria=["fluency"])), dialogue(), provider_for(server))
    assert judgment.value == 2.0 and judgment.status == "ok" and judgment.attempts == 2


def test_out_of_range_score_is_rejected_not_clipped():
    reply = json.dumps({"rationale": "great", "rating": 9})
    with LLMServer(replies=lambda body: reply) as server:
        (judgment,) = run(
            Core12Judge(JudgeOptions(criteria=["coherence"], max_attempts=2)), dialogue(), provider_for(server)
        )
    assert judgment.value is None and judgment.status == "out_of_range" and "outside 0-4" in judgment.error


def test_appropriateness_only_accepts_0_or_4():
    with LLMServer(replies=lambda body: json.dumps({"rationale": "meh", "rating": 2})) as server:
        (judgment,) = run(
            Core12Judge(JudgeOptions(criteria=["appropriateness"], max_attempts=1)), dialogue(), provider_for(server)
        )
    assert judgment.value is None and judgment.status == "out_of_range"


def test_llm_failure_is_recorded_as_llm_error():
    with LLMServer(faults=["500"] * 5) as server:
        (judgment,) = run(QualityJudge(JudgeOptions(criteria=["fluency"])), dialogue(), provider_for(server))
    assert judgment.value is None and judgment.status == "llm_error" and judgment.error


def test_core12_mixture_of_evaluators_sends_each_factor_to_its_model():
    reply = lambda body: json.dumps({"rationale": body["model"], "rating": 4})  # noqa: E731
    models = {
        "judge": {"model": "base-judge"},
        "judge.coherence": {"model": "m-coherence"},
        "judge.core12.novelty": {"model": "m-novelty"},
    }
    judge = Core12Judge()
    with LLMServer(replies=reply) as server:
        judgments = run(judge, dialogue(), provider_for(server, expand_models_map(models, judge.component_chains())))
        by_model = server.counters["by_model"]
    by_name = {j.name: j for j in judgments}
    assert len(judgments) == 12
    assert by_name["coherence"].model == "openai:m-coherence" and by_name["novelty"].model == "openai:m-novelty"
    assert by_name["naturalness"].model == "openai:base-judge"
    assert by_model == {"m-coherence": 1, "m-novelty": 1, "base-judge": 10}


def test_effectiveness_without_ground_truth_is_missing_input_without_a_call():
    d = dialogue()
    d.profile = None
    with LLMServer(replies=lambda body: json.dumps({"rationale": "r", "rating": 4})) as server:
        (judgment,) = run(Core12Judge(JudgeOptions(criteria=["effectiveness"])), d, provider_for(server))
        assert server.chat_requests == []
    assert judgment.value is None and judgment.status == "missing_input"


def test_pepper_personalization_sees_the_general_preferences():
    with LLMServer(replies=lambda body: json.dumps({"rationale": "r", "rating": 5})) as server:
        judgments = run(PepperJudge(), dialogue(), provider_for(server))
        bodies = [r.body for r in server.chat_requests]
    assert {j.name: j.value for j in judgments} == {"proactiveness": 5.0, "coherence": 5.0, "personalization": 5.0}
    personalization = next(b for b in bodies if judged_title(b) == "Personalization")
    assert "animated family films about the sea" in personalization["messages"][1]["content"]
    proactiveness = next(b for b in bodies if judged_title(b) == "Proactiveness")
    assert "animated family films" not in proactiveness["messages"][1]["content"]


def test_persuasiveness_asks_the_llm_or_takes_the_simulators_rating():
    with LLMServer(replies=lambda body: json.dumps({"rationale": "convinced", "rating": 2})) as server:
        (asked,) = run(PersuasivenessJudge(), dialogue(), provider_for(server))
        d = dialogue()
        d.metadata["persuasiveness"] = 1
        (recorded,) = run(PersuasivenessJudge(), d, provider_for(server))
        assert len(server.chat_requests) == 1
    assert asked.value == 2.0 and asked.scale == (0.0, 2.0)
    assert recorded.value == 1.0 and recorded.model == "simulator"


# ---------------------------------------------------------------------------- debate

FACTOR_REPLY = json.dumps({"rationale": "factor reason", "rating": 4})


def debate_reply(score_of):
    """Factor calls get a fixed reply; role calls get score_of(role, round)."""

    def reply(body):
        if is_role_call(body):
            role = ROLE_TITLES[judged_title(body)]
            return json.dumps(
                {"statement": f"{role} in round {round_of(body)}", "score": score_of(role, round_of(body))}
            )
        return FACTOR_REPLY

    return reply


def role_requests(server):
    return [r for r in server.chat_requests if is_role_call(r.body)]


def test_debate_stops_early_on_unanimity():
    with LLMServer(replies=debate_reply(lambda role, rnd: 70)) as server:
        judgments = run(DebateJudge(), dialogue(), provider_for(server))
        roles = role_requests(server)
    overall = judgments[-1]
    assert overall.judge == "debate" and overall.name == "overall"
    assert len(judgments) == 13  # the 12 factors it needed, then the debate
    assert overall.value == 70.0 and overall.status == "ok"
    assert overall.raw["stop_reason"] == "unanimous" and len(overall.raw["rounds"]) == 1
    assert len(roles) == 4


def test_debate_runs_to_the_round_limit_and_averages_and_shares_the_buffer():
    scores = {"common_user": 20, "domain_expert": 40, "linguist": 80, "hci_expert": 10}
    with LLMServer(replies=debate_reply(lambda role, rnd: scores[role] + rnd)) as server:
        judgments = run(DebateJudge(), dialogue(), provider_for(server))
        roles = role_requests(server)
    overall = judgments[-1]
    assert overall.raw["stop_reason"] == "round_limit"
    assert len(overall.raw["rounds"]) == 4 and len(roles) == 16
    assert overall.raw["rounds"][0] == {k: v + 1.0 for k, v in scores.items()}
    assert overall.value == pytest.approx(sum(v + 4 for v in scores.values()) / 4)
    assert len(overall.raw["transcript"]) == 16
    # round 3 prompts carry the statements of rounds 1 and 2 from every role, and no factor of other roles
    linguist_r3 = next(
        r for r in roles if round_of(r.body) == 3 and "Your role: Linguist" in r.body["messages"][0]["content"]
    )
    data = linguist_r3.body["messages"][1]["content"]
    assert "hci_expert in round 2" in data and "common_user in round 1" in data and "in round 3" not in data
    assert '"factor": "Naturalness"' in data and '"factor": "Novelty"' not in data


def test_debate_later_round_unanimity_stops_there():
    with LLMServer(
        replies=debate_reply(lambda role, rnd: 50 if rnd >= 2 else {"linguist": 90}.get(role, 30))
    ) as server:
        judgments = run(DebateJudge(), dialogue(), provider_for(server))
    overall = judgments[-1]
    assert overall.raw["stop_reason"] == "unanimous" and len(overall.raw["rounds"]) == 2 and overall.value == 50.0


def test_debate_per_role_model_map():
    models = {f"debate.{role}": {"model": f"model-{role}"} for role in ROLES}
    models["judge"] = {"model": "factor-model"}
    judge = DebateJudge(DebateOptions(max_rounds=2))
    with LLMServer(replies=debate_reply(lambda role, rnd: {"linguist": 90}.get(role, 30))) as server:
        judgments = run(judge, dialogue(), provider_for(server, expand_models_map(models, judge.component_chains())))
        by_model = server.counters["by_model"]
    assert by_model == {"factor-model": 12, **{f"model-{role}": 2 for role in ROLES}}
    assert judgments[-1].raw["models"] == {role: f"openai:model-{role}" for role in ROLES}


def test_debate_reuses_stored_factor_results():
    stored = {j.name: j for j in run(Core12Judge(), dialogue(), _fixed_provider())}
    with LLMServer(replies=debate_reply(lambda role, rnd: 60)) as server:
        judgments = run(DebateJudge(), dialogue(), provider_for(server), existing=stored)
        assert len(server.chat_requests) == 4
    assert [j.name for j in judgments] == ["overall"]


def test_a_role_that_never_answers_usably_makes_the_debate_none_not_zero():
    def score_of(role, rnd):
        return "lots" if role == "hci_expert" else 50

    with LLMServer(replies=debate_reply(score_of)) as server:
        overall = run(DebateJudge(DebateOptions(max_rounds=2, max_attempts=1)), dialogue(), provider_for(server))[-1]
    assert overall.value is None and overall.status == "parse_error" and "hci_expert" in overall.error
    assert overall.raw["stop_reason"] == "round_limit"


_SERVERS: list[LLMServer] = []


def _fixed_provider() -> LLMProvider:
    server = LLMServer(replies=lambda body: FACTOR_REPLY).start()
    _SERVERS.append(server)
    return provider_for(server)


@pytest.fixture(autouse=True, scope="module")
def _stop_servers():
    yield
    for server in _SERVERS:
        server.stop()
