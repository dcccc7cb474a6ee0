"""In-process CRSs (`python`), DialogueKit agents, and record/replay."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from dialoguekit.core.annotated_utterance import AnnotatedUtterance
from dialoguekit.core.dialogue_act import DialogueAct
from dialoguekit.core.intent import Intent
from dialoguekit.participant.agent import Agent
from dialoguekit.participant.participant import DialogueParticipant

from crs_connectors.base import CRSReply, build_connector
from crs_connectors.record_replay import RecordingConnector
from tests.connectors_support import catalog_items, scripted_conversation
from usersimcrs.errors import ConfigError, ConnectorError
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.crs_servers import FaultPlan, IEvaLMApp, LocalCRSServer, serve


class EchoCRS:
    """A synchronous CRS object with open/close hooks; records which thread it ran on."""

    def __init__(self, greeting: str = "You said") -> None:
        self.greeting = greeting
        self.events: list[str] = []
        self.threads: set[str] = set()

    def open(self, conversation_id: str) -> None:
        self.events.append(f"open {conversation_id}")

    def reply(self, history, user_utterance):
        self.threads.add(threading.current_thread().name)
        turn = len(history.utterances) // 2
        return {
            "text": f"{self.greeting}: {user_utterance.text}",
            "items": ["2571", {"title": "Heat (1995)"}, "Nope Movie"][: turn + 1],
        }

    def close(self) -> None:
        self.events.append("close")


class AsyncCRS:
    """An async CRS returning a CRSReply."""

    async def reply(self, history, user_utterance):
        return CRSReply(text="async ok")


def text_only_crs(text: str) -> str:
    """A plain function CRS: text in, text out (with a list the connector can parse)."""
    return (
        "I would recommend the following items:  \n1: Alien (1979)  \n2: Jaws (1975)  \n" if "horror" in text else "Hm?"
    )


def broken_crs(history, user_utterance):
    raise RuntimeError("model not loaded")


class ParrotAgent(Agent):
    """A DialogueKit agent: welcomes, echoes, says goodbye."""

    def welcome(self) -> None:
        self._dialogue_connector.register_agent_utterance(
            AnnotatedUtterance(
                "Hello, I am a parrot.",
                participant=DialogueParticipant.AGENT,
                dialogue_acts=[DialogueAct(Intent("WELCOME"))],
            )
        )

    def goodbye(self) -> None:
        self._dialogue_connector.register_agent_utterance(
            AnnotatedUtterance(
                "Bye.", participant=DialogueParticipant.AGENT, dialogue_acts=[DialogueAct(Intent("EXIT"))]
            )
        )

    def receive_utterance(self, utterance) -> None:
        self._dialogue_connector.register_agent_utterance(
            AnnotatedUtterance(
                f"(Parroting) {utterance.text}",
                participant=DialogueParticipant.AGENT,
                dialogue_acts=[DialogueAct(Intent("ECHO"))],
            )
        )


def test_python_class_runs_sync_methods_in_a_worker_thread():
    ctx = RunContext(items=catalog_items())
    section = {"type": "python", "target": "tests.test_connectors_inprocess:EchoCRS", "options": {"greeting": "Echo"}}
    _, replies = asyncio.run(scripted_conversation(section, ctx, ["hi", "more"]))
    assert replies[0].text == "Echo: hi"
    assert [i.id for i in replies[1].items] == ["2571", "6"]  # an ID the collection knows; a title resolved


def test_python_class_hooks_and_thread():
    async def main():
        connector = build_connector(
            {"type": "python", "target": "tests.test_connectors_inprocess.EchoCRS"}, RunContext()
        )
        await connector.open("c9")
        from usersimcrs.core.dialogue import Dialogue, Utterance

        await connector.reply(Dialogue(conversation_id="c9"), Utterance(participant="USER", text="x"))
        await connector.close()
        return connector.model

    model = asyncio.run(main())
    assert model.events == ["open c9", "close"]
    assert threading.main_thread().name not in model.threads


def test_python_async_class_and_text_function():
    _, replies = asyncio.run(
        scripted_conversation(
            {"type": "python", "target": "tests.test_connectors_inprocess:AsyncCRS"}, RunContext(), ["a"]
        )
    )
    assert replies[0].text == "async ok"
    section = {"type": "python", "target": "tests.test_connectors_inprocess:text_only_crs", "items_from_text": True}
    _, replies = asyncio.run(scripted_conversation(section, RunContext(items=catalog_items()), ["some horror"]))
    assert [i.id for i in replies[0].items] == ["1214", "1387"]


def test_python_failures_are_connector_errors_and_bad_targets_config_errors():
    with pytest.raises(ConnectorError, match="RuntimeError: model not loaded"):
        asyncio.run(
            scripted_conversation(
                {"type": "python", "target": "tests.test_connectors_inprocess:broken_crs"}, RunContext(), ["a"]
            )
        )
    with pytest.raises(ConfigError, match="cannot import"):
        build_connector({"type": "python", "target": "tests.nowhere:Thing"}, RunContext())
    with pytest.raises(ConfigError, match="crs.options"):
        build_connector(
            {"type": "python", "target": "tests.test_connectors_inprocess:EchoCRS", "options": {"nope": 1}},
            RunContext(),
        )


def test_dialoguekit_agent_adapter():
    async def main():
        connector = build_connector(
            {"type": "dialoguekit_agent", "agent": "tests.test_connectors_inprocess:ParrotAgent"}, RunContext()
        )
        from usersimcrs.core.dialogue import Dialogue, Utterance

        await connector.open("dk-1")
        dialogue = Dialogue(conversation_id="dk-1")
        welcome = await connector.reply(dialogue, None)
        echoed = await connector.reply(dialogue, Utterance(participant="USER", text="I like horror"))
        await connector.close()
        return welcome, echoed, connector

    welcome, echoed, connector = asyncio.run(main())
    assert welcome.text == "Hello, I am a parrot." and welcome.raw["intents"] == ["WELCOME"]
    assert echoed.text == "(Parroting) I like horror"
    assert connector.agent is None


def test_dialoguekit_adapter_rejects_non_agents():
    with pytest.raises(ConfigError, match="not a DialogueKit Agent subclass"):
        build_connector({"type": "dialoguekit_agent", "agent": "tests.test_connectors_inprocess:EchoCRS"}, RunContext())


# ------------------------------------------------------------------ record / replay


def test_record_then_replay_offline(tmp_path):
    recording = tmp_path / "exchanges.jsonl"
    server = serve("ievalm")
    messages = ["hello", "I like sci-fi", "another please"]
    try:
        section = {"type": "crs_arena", "url": server.url, "record_to": str(recording)}
        assert isinstance(build_connector(section, RunContext()), RecordingConnector)
        ctx = RunContext(items=catalog_items())
        _, live_a = asyncio.run(scripted_conversation(section, ctx, messages, conversation_id="a"))
        _, live_b = asyncio.run(scripted_conversation(section, ctx, messages[:2], conversation_id="b"))
    finally:
        server.stop()
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    assert [(r["conversation_id"], r["turn"]) for r in lines] == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    replay = {"type": "replay", "path": str(recording), "strict": True}
    _, again_b = asyncio.run(scripted_conversation(replay, RunContext(), messages[:2], conversation_id="b"))
    _, again_a = asyncio.run(scripted_conversation(replay, RunContext(), messages, conversation_id="a"))
    assert [r.model_dump() for r in again_a] == [r.model_dump() for r in live_a]
    assert [r.model_dump() for r in again_b] == [r.model_dump() for r in live_b]
    with pytest.raises(ConnectorError, match="no recorded reply for conversation b turn 2"):
        asyncio.run(scripted_conversation(replay, RunContext(), messages, conversation_id="b"))
    with pytest.raises(ConnectorError, match="replay diverged at turn 0"):
        asyncio.run(scripted_conversation(replay, RunContext(), ["something new"], conversation_id="a"))


def test_failures_are_recorded_and_replayed(tmp_path):
    recording = tmp_path / "faults.jsonl"
    server = LocalCRSServer(IEvaLMApp(), FaultPlan(rates={"http_500": 1.0})).start()
    try:
        section = {"type": "crs_arena", "url": server.url, "record_to": str(recording), "retries": 0}
        with pytest.raises(ConnectorError):
            asyncio.run(scripted_conversation(section, RunContext(), ["hi"]))
    finally:
        server.stop()
    assert json.loads(recording.read_text())["error"] == "HTTP 500"
    with pytest.raises(ConnectorError, match="^HTTP 500$"):
        asyncio.run(
            scripted_conversation(
                {"type": "replay", "path": str(recording)}, RunContext(), ["hi"], conversation_id="conv-1"
            )
        )


def test_replay_of_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        build_connector({"type": "replay", "path": str(tmp_path / "none.jsonl")}, RunContext())
