"""LLM users' style controls (words per turn, preferences per turn, patience): defaults from the bundled human
reference, set in the config, recorded in the manifest, and sent in the prompt to a real local LLM server."""

from __future__ import annotations

import json

import pytest

from tests.test_simulators_llm_engine import run_config, scripted, write_data
from usersimcrs.core.human_reference import load_reference
from usersimcrs.simulators.llm_base import UserStyle

llm_server = pytest.importorskip("usersimcrs.testing.llm_server")
runner = pytest.importorskip("usersimcrs.engine.runner")


def run_with(tmp_path, section: dict) -> tuple[list[list[dict]], dict]:  # type: ignore[type-arg]
    """Two conversations through the engine and the local OpenAI-protocol server: the messages of every
    chat request, and the run's manifest."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    items, ratings = write_data(tmp_path)
    with llm_server.LLMServer(scripted) as server:
        config = run_config("style", section, items, ratings, server, seed=3, conversations=2, max_turns=3)
        runner.run(config, tmp_path / "run")
        requests = [r.body["messages"] for r in server.chat_requests]
    return requests, json.loads((tmp_path / "run" / "manifest.json").read_text())


def system_texts(requests: list[list[dict]]) -> list[str]:  # type: ignore[type-arg]
    return [" ".join(m["content"].split()) for messages in requests for m in messages if m["role"] == "system"]


def test_defaults_come_from_the_human_reference():
    style = UserStyle()
    reference = load_reference().style
    assert (style.words_per_turn, style.max_words) == (reference.words_per_turn, reference.max_words) == (6, 14)
    assert (style.reveal_per_turn, style.patience) == (reference.reveal_per_turn, reference.patience) == (1, 3)


@pytest.mark.parametrize("kind", ["llm_single", "llm_dual", "target_free"])
def test_default_style_reaches_the_prompt_and_the_manifest(kind, tmp_path):
    requests, manifest = run_with(tmp_path, {"type": kind, "min_turns": 1})
    systems = system_texts(requests)
    speaking = [s for s in systems if "decide whether USER would leave" not in s]
    assert speaking and all("How you write" in s for s in speaking)
    assert all("about 6 words" in s and "more than 14" in s and "After about 3 suggestions" in s for s in speaking)
    assert manifest["simulator_options"]["style"] == {
        "enabled": True,
        "words_per_turn": 6,
        "max_words": 14,
        "reveal_per_turn": 1,
        "patience": 3,
    }
    if kind == "llm_dual":  # the stopping prompt hears about patience too
        stops = [s for s in systems if "decide whether USER would leave" in s]
        assert stops and all("after about 3 suggestions" in s for s in stops)


def test_configured_style_is_sent_and_can_be_switched_off(tmp_path):
    style = {"words_per_turn": 4, "max_words": 9, "reveal_per_turn": 2, "patience": 5}
    requests, manifest = run_with(tmp_path / "a", {"type": "llm_single", "style": style})
    text = system_texts(requests)[0]
    assert "about 4 words" in text and "more than 9" in text and "at most 2 of your wishes" in text
    assert "After about 5 suggestions" in text
    assert manifest["simulator_options"]["style"] == {"enabled": True, **style}
    requests, _ = run_with(tmp_path / "b", {"type": "llm_single", "style": {"enabled": False}})
    assert not any("How you write" in s for s in system_texts(requests))
