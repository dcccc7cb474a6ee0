"""Each of the five simulator types runs 5 conversations offline through the engine against the
built-in retrieval CRS; the LLM types use the embedded model (Gemma 3 270M) and must still
produce valid records (the model is weak: this checks the path, not the quality)."""

from __future__ import annotations

from pathlib import Path

import pytest

from usersimcrs.config import RunConfig
from usersimcrs.core.run_folder import load_run
from usersimcrs.engine.runner import run

ROOT = Path(__file__).resolve().parents[1]

TYPES = {
    "agenda": {},
    "llm_single": {"max_tokens": 16},
    "llm_dual": {"max_tokens": 16},
    "target_free": {"max_tokens": 16, "reflection_max_tokens": 24, "top_k": 1},
    "target_biased": {"max_tokens": 16, "max_rounds": 2, "min_rounds": 1},
}
STOP_RULES = {
    "max_turns",
    "agenda_done",
    "target_accepted",
    "user_gave_up",
    "user_stop",
    "target_hit",
    "max_rounds_no_hit",
    "max_turns_simulator",
}


@pytest.mark.embedded
@pytest.mark.slow
@pytest.mark.parametrize("kind", list(TYPES))
def test_five_conversations_per_simulator_type(kind, tmp_path, embedded_model_path):
    config = RunConfig.model_validate(
        {
            "name": f"types-{kind}",
            "seed": 5,
            "conversations": 5,
            # one conversation at a time: the in-process model serves one call at a time anyway, and each
            # call then extends the previous prompt, whose KV cache llama.cpp reuses (two conversations in
            # turn lose it: 37-62% more prompt tokens evaluated)
            "concurrency": 1,
            "max_turns": 2,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            # one llama.cpp thread: the suite runs one test per core, and a second thread per test only spins
            "llm": {"backend": "llamacpp", "model_path": embedded_model_path, "n_ctx": 2048, "n_threads": 1},
            "simulator": {"type": kind, **TYPES[kind]},
            "crs": {"type": "retrieval"},
            "progress": False,
        }
    )
    summary = run(config, tmp_path / kind)
    dialogues = load_run(tmp_path / kind).dialogues  # profiles attached from profiles.jsonl
    assert len(dialogues) == 5 and summary.failed == 0, [d.error for d in dialogues]
    assert len({d.conversation_id for d in dialogues}) == 5
    for d in dialogues:
        assert d.status == "ok" and d.end_reason in STOP_RULES
        assert d.user_turns and all(u.text.strip() for u in d.user_turns)
        assert d.agent_turns and d.profile is not None
    if kind != "agenda":
        assert summary.llm["calls"] + summary.llm["cache_hits"] > 0
    else:
        assert summary.llm.get("calls", 0) == 0  # the agenda user runs with no LLM by default
