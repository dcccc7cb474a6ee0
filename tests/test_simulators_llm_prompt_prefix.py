"""LLM simulator prompts only grow at the end (prefix caching): the prompt of turn t, less the
part that belongs to turn t only, is a prefix of the prompt of turn t+1.

Calls are grouped by purpose (their system message and output schema: utterance, stop decision,
reflection); within a group they come one per turn, in order.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.llm_sim_support import ScriptedLLM, context_with, converse, list_crs, movie_items, profile_for
from usersimcrs.core.profile import Preferences, UserProfile
from usersimcrs.llm.usage import prompt_text
from usersimcrs.simulators.llm_dual import DualPromptSimulator
from usersimcrs.simulators.llm_single import SinglePromptSimulator
from usersimcrs.simulators.target_biased import TargetBiasedSimulator
from usersimcrs.simulators.target_free import TargetFreeSimulator

EMPTY_HISTORY = "(nothing has been said yet)"


def talk(messages, schema, index):
    """Answers every purpose in a schema-valid way; never ends on its own."""
    props = (schema or {}).get("properties", {})
    if "items" in props:
        return {"items": [{"number": 1, "verdict": "like", "reason": "looks tense"}]}
    if set(props) == {"end"}:
        return {"end": False}
    turn = sum(1 for m in messages if m.role == "assistant")
    return {"utterance": f"Tell me about something gripping, round {turn} of {index}", "end": False}


def pepper_profile() -> UserProfile:
    return UserProfile(user_id="p", preferences=Preferences(narrative="You enjoy tense crime stories."))


def simulate(kind: str, **options):
    llm = ScriptedLLM(talk)
    items = movie_items()
    cls = {
        "llm_single": SinglePromptSimulator,
        "llm_dual": DualPromptSimulator,
        "target_biased": TargetBiasedSimulator,
        "target_free": TargetFreeSimulator,
    }[kind]
    config = cls.Config.model_validate({"type": kind, **options})
    profile = pepper_profile() if kind == "target_free" else profile_for(["1"], items)
    sim = cls(config, context_with(llm, items), profile, 7)
    asyncio.run(converse(sim, list_crs([["2", "3"], ["5", "4"], ["6", "7"]], "Here are some picks."), max_turns=4))
    return llm.calls


def by_purpose(calls):
    groups: dict[tuple[str, str], list] = {}
    for call in calls:
        key = (call["messages"][0].content, json.dumps(call["schema"], sort_keys=True))
        groups.setdefault(key, []).append(call["messages"])
    return [g for g in groups.values() if len(g) > 1]


def common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def turn_part(earlier, later) -> str:
    """What the earlier prompt has beyond the later one's prefix: must be only its last message's
    appended tail (chat mode) or the request after the history (one-message prompts)."""
    head = earlier[:-1]
    assert later[: len(head)] == head, "every message but the last is repeated as is"
    last, same = earlier[-1], later[len(head)]
    assert same.role == last.role
    if last.content.startswith(same.content):  # chat mode: the CRS turn, then this turn's note
        return last.content[len(same.content) :]
    # one message holding the history: shared up to the end of the earlier history block
    history_end = last.content.index("\n\n")
    assert common_prefix(last.content, same.content) >= history_end
    return last.content[history_end:]


@pytest.mark.parametrize(
    "kind, options",
    [
        ("llm_single", {}),
        ("llm_single", {"history_mode": "prompt"}),
        ("llm_dual", {"min_turns": 0}),
        ("target_biased", {}),
        ("target_free", {}),
    ],
    ids=["single-chat", "single-prompt", "dual", "target_biased", "target_free"],
)
def test_each_turns_prompt_extends_the_previous_one(kind, options):
    groups = by_purpose(simulate(kind, **options))
    # calls that carry the conversation (a reflection on the items on screen does not: it shares
    # only its system message, which the grouping already makes identical)
    groups = [g for g in groups if any("Here are some picks." in m.content for m in g[-1])]
    assert groups, "several calls of one purpose"
    for prompts in groups:
        for earlier, later in zip(prompts, prompts[1:]):
            if EMPTY_HISTORY in earlier[-1].content:
                continue  # the opening turn of a one-message prompt: no history yet to share
            tail = turn_part(earlier, later)
            shared = len(prompt_text(earlier)) - len(tail)
            assert prompt_text(later)[:shared] == prompt_text(earlier)[:shared]
            # nothing of the conversation sits in the per-turn part
            assert "Here are some picks." not in tail and "gripping" not in tail


def test_the_single_prompt_chat_simulator_sends_nothing_per_turn():
    """No per-turn text at all: each prompt is exactly a prefix of the next one."""
    (prompts,) = by_purpose(simulate("llm_single"))
    for earlier, later in zip(prompts, prompts[1:]):
        assert later[: len(earlier)] == earlier


def test_the_system_message_is_the_same_every_turn():
    for kind in ("llm_single", "target_biased", "target_free"):
        calls = simulate(kind)
        utterance_calls = [c for c in calls if "utterance" in (c["schema"] or {}).get("properties", {})]
        assert len({c["messages"][0].content for c in utterance_calls}) == 1, kind
