"""Running the same config twice: the second run is served from the LLM cache and reproduces the first."""

from __future__ import annotations

import json
from pathlib import Path

from usersimcrs.config import RunConfig
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.runner import run
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]


def _content(run_dir: Path) -> list[dict]:
    """Records by conversation ID, without wall-clock timings."""
    out = []
    for line in (run_dir / "dialogues.jsonl").read_text().splitlines():
        rec = json.loads(line)
        rec.pop("timings")
        for utt in rec["utterances"]:
            utt.pop("latency_s")
        out.append(rec)
    return sorted(out, key=lambda r: r["conversation_id"])


def test_second_run_makes_no_llm_call_and_gives_the_same_conversations(tmp_path):
    with LLMServer() as server:  # default replies: deterministic text derived from each prompt
        data = {
            "name": "rerun",
            "seed": 3,
            "conversations": 6,
            "concurrency": 3,
            "max_turns": 3,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "llm": server.config("openai", cache_dir=str(tmp_path / "cache")).model_dump(),
            "simulator": {"type": "llm_single", "min_turns": 3},
            "crs": {"type": "retrieval"},
            "progress": False,
        }
        first = run(RunConfig.model_validate(data), tmp_path / "first")
        served = len(server.chat_requests)
        second = run(RunConfig.model_validate(data), tmp_path / "second")
        assert len(server.chat_requests) == served  # nothing reached the server the second time
    m1, m2 = RunFolder(tmp_path / "first").read_manifest(), RunFolder(tmp_path / "second").read_manifest()
    assert first.completed == second.completed == 6
    assert m1["llm"]["calls"] > 0 and m1["llm"]["cache_hits"] == 0
    assert m2["llm"]["calls"] == 0 and m2["llm"]["cache_hits"] == m1["llm"]["calls"]
    assert _content(tmp_path / "first") == _content(tmp_path / "second")
