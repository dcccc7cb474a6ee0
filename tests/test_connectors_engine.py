"""Connectors inside real runs: CRS protocols through the engine, faults recorded, a baseline matrix."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.connectors_support import catalog_items
from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import USER, Dialogue, Utterance
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.engine.runner import run_async
from usersimcrs.simulators.base import SimulatorConfig, Stop, UserSimulator
from usersimcrs.testing.crs_servers import FaultPlan, IEvaLMApp, LocalCRSServer, serve

SCRIPT = ["Hello!", "I like sci-fi thrillers", "Something else please"]


class ScriptedSimulator(UserSimulator):
    """Says the script, then stops: enough to drive a connector through the engine."""

    Config = SimulatorConfig

    async def start(self) -> Utterance | None:
        return Utterance(participant=USER, text=SCRIPT[0])

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        said = len(dialogue.user_turns)
        if said >= len(SCRIPT):
            return Stop(reason="script_done")
        return Utterance(participant=USER, text=SCRIPT[said])


def write_data(folder: Path) -> dict[str, Any]:
    items = folder / "items.csv"
    mapping = catalog_items().to_csv(items)
    ratings = folder / "ratings.csv"
    rows = ["userId,movieId,rating,timestamp"]
    for user in range(1, 5):
        for index, movie in enumerate(catalog_items()):
            if (index + user) % 3:
                rows.append(f"{user},{movie.id},{(index % 5) + 0.5 + user % 2},0")
    ratings.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return {"items": {"path": str(items), **mapping}, "ratings": {"path": str(ratings)}}


def config(tmp_path: Path, crs: dict[str, Any], simulator: dict[str, Any] | None = None, **extra: Any) -> RunConfig:
    data = {
        "name": "connector-run",
        "conversations": 3,
        "concurrency": 3,
        "max_turns": 4,
        "progress": False,
        "simulator": simulator or {"type": "tests.test_connectors_engine:ScriptedSimulator"},
        "crs": crs,
        **write_data(tmp_path),
        **extra,
    }
    return RunConfig.model_validate(data)


def run(cfg: RunConfig, out: Path):
    return asyncio.run(run_async(cfg, out))


def test_crs_arena_through_the_engine(tmp_path):
    server = serve("ievalm")
    try:
        summary = run(config(tmp_path, {"type": "crs_arena", "url": server.url}), tmp_path / "run")
    finally:
        server.stop()
    assert summary.completed == 3 and summary.failed == 0
    dialogues = list(iter_jsonl(tmp_path / "run" / "dialogues.jsonl"))
    stored = sorted(
        json.dumps([i["raw"] for i in u["items"]])
        for d in dialogues
        for u in d["utterances"]
        if u["participant"] == "AGENT"
    )
    sent = sorted(json.dumps(e.items) for e in server.log if e.method == "POST")
    assert stored == sent  # every per-turn list in the run equals what the server sent
    ids = {i["id"] for d in dialogues for u in d["utterances"] for i in u["items"]}
    assert ids and None not in ids  # titles mapped to the run's item collection
    assert [e.info["session_turns"] for e in server.log if e.method == "POST"].count(0) == 3  # 3 fresh sessions


def test_server_faults_fail_conversations_not_the_run(tmp_path):
    server = LocalCRSServer(IEvaLMApp(), FaultPlan(rates={"http_500": 1.0})).start()
    try:
        crs = {"type": "crs_arena", "url": server.url, "retries": 1, "backoff_s": 0.01}
        summary = run(config(tmp_path, crs), tmp_path / "run")
    finally:
        server.stop()
    assert summary.failed == 3 and summary.completed == 0
    dialogues = list(iter_jsonl(tmp_path / "run" / "dialogues.jsonl"))
    assert {d["status"] for d in dialogues} == {"failed"}
    assert all("HTTP 500 (after 2 attempts)" in d["error"] for d in dialogues)


def test_record_in_one_run_and_replay_in_another(tmp_path):
    server = serve("moviebot")
    recording = tmp_path / "moviebot.jsonl"
    try:
        live = run(
            config(tmp_path, {"type": "moviebot", "url": server.url, "record_to": str(recording)}), tmp_path / "live"
        )
    finally:
        server.stop()
    replayed = run(config(tmp_path, {"type": "replay", "path": str(recording), "strict": True}), tmp_path / "replayed")
    assert live.completed == replayed.completed == 3

    def turns(folder: str) -> dict[str, list]:
        return {
            d["conversation_id"]: [(u["text"], u["items"]) for u in d["utterances"]]
            for d in iter_jsonl(tmp_path / folder / "dialogues.jsonl")
        }

    assert turns("replayed") == turns("live")


@pytest.mark.parametrize("crs", ["retrieval", "popularity", "llm_crs"])
def test_baseline_matrix_with_two_simulators_offline(tmp_path, crs, monkeypatch):
    """Each built-in CRS against the rule-based agenda user and the scripted user, no network."""
    monkeypatch.setenv("CRS_TEST_KEY", "not-a-real-key")
    from usersimcrs.testing.llm_server import LLMServer

    def llm_reply(request: dict[str, Any]) -> str:
        return json.dumps({"reply": "How about one of these? The first is a great pick.", "recommend": [1, 2]})

    with LLMServer(llm_reply) as llm:
        llm_section = {
            "backend": "openai",
            "base_url": llm.url + "/v1",
            "model": "test-model",
            "api_key_env": "CRS_TEST_KEY",
            "cache": False,
        }
        for simulator in ({"type": "agenda"}, None):
            out = tmp_path / f"{crs}-{'agenda' if simulator else 'scripted'}"
            cfg = config(tmp_path, {"type": crs, "k": 3}, simulator, llm=llm_section)
            summary = run(cfg, out)
            dialogues = list(iter_jsonl(out / "dialogues.jsonl"))
            assert summary.completed == 3, [d.get("error") for d in dialogues]
            lists = [u["items"] for d in dialogues for u in d["utterances"] if u["participant"] == "AGENT"]
            assert any(lists) and all(len(items) <= 3 for items in lists)
            assert all(i["id"] is not None for items in lists for i in items)


class WaitingSimulator(ScriptedSimulator):
    """The scripted user, with a pause before its first message, as an LLM call would take."""

    async def start(self) -> Utterance | None:
        await asyncio.sleep(0.05)
        return await super().start()


def test_a_run_builds_the_title_indexes_while_its_first_requests_are_awaited(tmp_path, monkeypatch):
    """The title indexes are built in steps between the conversations' own work (issue #22: built by the
    first CRS reply naming titles, they stalled every conversation in flight for 0.1-0.2 s on 13.8k titles),
    so the first lookup finds them done, and the stored items are those a lazily indexed run resolves."""
    from usersimcrs.core.items import ItemCollection

    built_at_lookup: list[bool] = []
    match_title = ItemCollection._match_title

    def watched(self, title, fuzzy, min_score):
        built_at_lookup.append(self._titles is not None and self._fuzzy is not None)
        return match_title(self, title, fuzzy, min_score)

    monkeypatch.setattr(ItemCollection, "_match_title", watched)
    server = serve("ievalm")
    try:
        simulator = {"type": "tests.test_connectors_engine:WaitingSimulator"}
        summary = run(config(tmp_path, {"type": "crs_arena", "url": server.url}, simulator), tmp_path / "run")
        in_steps = list(built_at_lookup)
        built_at_lookup.clear()
        monkeypatch.setattr(ItemCollection, "index_in_steps", lambda self, step=500: iter(()))  # lazy, as before
        lazy = run(config(tmp_path, {"type": "crs_arena", "url": server.url}, simulator), tmp_path / "lazy")
    finally:
        server.stop()
    assert summary.completed == lazy.completed == 3
    assert in_steps and all(in_steps)
    assert built_at_lookup and not built_at_lookup[0]  # lazily: the first lookup builds them

    def items(folder: str) -> list:
        return sorted(
            json.dumps(u["items"]) for d in iter_jsonl(tmp_path / folder / "dialogues.jsonl") for u in d["utterances"]
        )

    assert items("run") == items("lazy")
