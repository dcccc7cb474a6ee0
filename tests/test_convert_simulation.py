"""A converted ReDial sample drives a simulation: profiles -> target-biased simulator -> built-in BM25 CRS."""

from __future__ import annotations

import pytest
import yaml

from tests.test_convert_helpers import reload, run_convert
from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.core.run_folder import load_run
from usersimcrs.testing.llm_server import LLMServer


def test_converted_redial_drives_a_simulation(shared_data, tmp_path):
    runner = pytest.importorskip("usersimcrs.engine.runner")
    pytest.importorskip("usersimcrs.simulators.target_biased")
    pytest.importorskip("crs_connectors.baselines.retrieval")
    from usersimcrs.config import RunConfig

    raw = shared_data / "raw" / "redial"
    movielens = shared_data / "items" / "movielens-25m-sample" / "movies_w_keywords.csv"
    out = tmp_path / "redial"
    # the MovieLens catalogue adds genres and keywords to ReDial's title-only movies (for the CRS)
    run_convert("redial", [raw / "test_data_first25.jsonl", raw / "movies_with_mentions.csv", movielens], out)
    converted = reload(out)
    mapping = yaml.safe_load((out / "items.yaml").read_text(encoding="utf-8"))
    with LLMServer() as server:
        config = RunConfig.model_validate(
            {
                "name": "redial-converted",
                "seed": 7,
                "conversations": 3,
                "concurrency": 2,
                "max_turns": 6,
                "progress": False,
                "items": {**mapping, "path": str(out / mapping["path"])},
                "profiles": {"source": "file", "path": str(out)},
                "llm": server.config().model_dump(),
                "simulator": {"type": "target_biased", "max_tokens": 48},
                "crs": {"type": "retrieval"},
            }
        )
        summary = runner.run(config, tmp_path / "run")
        assert server.chat_requests  # the simulator really talked to the LLM server
    dialogues = load_run(tmp_path / "run").dialogues
    assert summary.completed == 3 and len(dialogues) == 3
    for dialogue in dialogues:
        assert dialogue.status == "ok", dialogue.error
        assert any(u.participant == AGENT and u.items for u in dialogue.utterances)  # the CRS recommended
        for utt in dialogue.agent_turns:
            assert all(ref.id in converted["items"] for ref in utt.items)  # items from the converted catalogue
    # each conversation played one converted ReDial seeker, whose targets came from the question sets
    by_conversation = {p.metadata["conversation_id"]: p for p in converted["profiles"]}
    played = [Dialogue.model_validate(d.model_dump()).profile for d in dialogues]
    sources = sorted(p.metadata["conversation_id"] for p in played)
    assert sources == sorted(list(by_conversation)[:3])
    first = next(p for p in played if p.metadata["conversation_id"] == "20001")
    assert {t.id for t in first.need.targets} == {"151656", "94688"}
