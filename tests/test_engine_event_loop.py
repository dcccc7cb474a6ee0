"""Event loop choice (`event_loop:` in the run config): uvloop and asyncio give the same conversations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from usersimcrs.config import RunConfig
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.loop import current_loop_kind, resolve_loop, run_coroutine
from usersimcrs.engine.runner import run
from usersimcrs.errors import ConfigError
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
uvloop = pytest.importorskip("uvloop")


def _config(base_url: str, loop: str, client: str) -> RunConfig:
    return RunConfig.model_validate({
        "name": "loops",
        "seed": 3,
        "conversations": 6,
        "concurrency": 3,
        "max_turns": 4,
        "event_loop": loop,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "llm": {"backend": "openai", "model": "test-model", "base_url": base_url, "cache": False, "retries": 0,
                "client": client},
        "simulator": {"type": "llm_single", "max_tokens": 32},
        "crs": {"type": "retrieval"},
        "progress": False,
    })  # fmt: skip


def _conversations(run_dir: Path) -> dict[str, dict]:
    """Each conversation by ID, without its timings (which differ between any two runs)."""
    out = {}
    for rec in iter_jsonl(run_dir / "dialogues.jsonl"):
        rec = json.loads(json.dumps(rec))
        rec.pop("timings", None)
        for utt in rec["utterances"]:
            utt.pop("latency_s", None)
        out[rec["conversation_id"]] = rec
    return out


@pytest.mark.parametrize("client", ["official", "lean"])
def test_uvloop_and_asyncio_runs_give_identical_conversations(tmp_path, client):
    with LLMServer(latency_ms=2) as server:
        run(_config(server.openai_url, "asyncio", client), tmp_path / "asyncio")
        run(_config(server.openai_url, "uvloop", client), tmp_path / "uvloop")
        calls = server.counters["chat"]
    plain, fast = _conversations(tmp_path / "asyncio"), _conversations(tmp_path / "uvloop")
    assert len(plain) == 6 and all(r["status"] == "ok" for r in plain.values())
    assert sum(len(r["utterances"]) for r in plain.values()) > 12  # several turns each, via real LLM calls
    assert calls > 0
    assert plain == fast
    assert RunFolder(tmp_path / "asyncio").read_manifest()["environment"]["event_loop"] == "asyncio"
    assert RunFolder(tmp_path / "uvloop").read_manifest()["environment"]["event_loop"] == "uvloop"


def test_event_loop_does_not_change_the_config_hash():
    a = _config("http://127.0.0.1:9/v1", "asyncio", "official")
    b = _config("http://127.0.0.1:9/v1", "uvloop", "official")
    assert a.config_hash() == b.config_hash()


def test_run_coroutine_starts_the_loop_asked_for():
    async def kind() -> str:
        return current_loop_kind()

    assert run_coroutine(kind(), "asyncio") == "asyncio"
    assert run_coroutine(kind(), "uvloop") == "uvloop"
    assert run_coroutine(kind(), "auto") == "uvloop"  # uvloop is installed here


def test_uvloop_missing_is_a_config_error_and_auto_falls_back(monkeypatch):
    import usersimcrs.engine.loop as loop

    monkeypatch.setattr(loop, "uvloop_factory", lambda: None)
    assert resolve_loop("auto") == "asyncio"
    with pytest.raises(ConfigError, match="event_loop"):
        resolve_loop("uvloop")


def test_a_run_freezes_the_heap_and_widens_the_young_generation_then_restores_both(tmp_path):
    import gc

    import usersimcrs as us
    from usersimcrs.engine.loop import YOUNG_GENERATION

    during: list[tuple[int, int]] = []

    def crs(text: str) -> str:
        during.append((gc.get_threshold()[0], gc.get_freeze_count()))
        return "How about Heat (1995)?"

    before = gc.get_threshold()
    us.simulate(
        crs=crs,
        simulator="agenda",
        items=str(ROOT / "configs/data/tiny_movies.csv"),
        conversations=2,
        output=tmp_path / "run",
        progress=False,
    )
    assert during and all(young >= YOUNG_GENERATION and frozen > 0 for young, frozen in during)
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_a_run_loads_its_data_with_the_collector_paused_then_frozen_until_its_context_closes(tmp_path, monkeypatch):
    import gc

    from usersimcrs.engine import local
    from usersimcrs.errors import DataError

    seen: list[bool] = []
    load_items = local.load_items

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return load_items(*args, **kwargs)

    monkeypatch.setattr(local, "load_items", watched)
    config = _config("http://127.0.0.1:9/v1", "asyncio", "lean")
    assert gc.isenabled()
    context = local.build_context(config, tmp_path / "run")
    assert seen == [False] and gc.isenabled() and len(context.items) == 40
    assert gc.get_freeze_count() > 0  # what was loaded is frozen out of the collector's scans ...
    run_coroutine(local.close_context(context))
    assert gc.get_freeze_count() == 0  # ... until the context closes (a Ray worker runs chunk after chunk)

    bad_items = tmp_path / "items.csv"
    bad_items.write_text("title\nHeat (1995)\n", encoding="utf-8")  # no movieId column
    broken = config.model_copy(update={"items": config.items.model_copy(update={"path": str(bad_items)})})
    with pytest.raises(DataError, match="movieId"):
        local.build_context(broken, tmp_path / "run2")
    assert gc.isenabled() and gc.get_freeze_count() == 0
