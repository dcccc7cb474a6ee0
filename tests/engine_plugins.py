"""Small deterministic plug-ins used by the engine tests (loaded by dotted path, also in subprocesses)."""

from __future__ import annotations

import asyncio
import hashlib
import os

from crs_connectors.base import ConnectorConfig, CRSConnector, CRSReply
from usersimcrs.core.dialogue import USER, Dialogue, ItemRef, Utterance
from usersimcrs.errors import ConnectorError
from usersimcrs.simulators.base import SimulatorConfig, Stop, UserSimulator


class CountingUserConfig(SimulatorConfig):
    turns: int = 3


class CountingUser(UserSimulator):
    """Says a seeded number each turn and stops after `turns` turns."""

    Config = CountingUserConfig

    async def start(self) -> Utterance | None:
        return Utterance(participant=USER, text=f"hello {self.rng.randint(0, 999)}")

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        if len(dialogue.user_turns) >= self.config.turns:
            return Stop(reason="agenda_done")
        return Utterance(participant=USER, text=f"number {self.rng.randint(0, 999)}")


class EchoCRSConfig(ConnectorConfig):
    delay_s: float = 0.0
    fail_every: int = 0
    hang_every: int = 0


class EchoCRS(CRSConnector):
    """Echoes the user, recommends an item derived from the text; fails or hangs on request."""

    Config = EchoCRSConfig

    async def open(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.index = int(conversation_id.split("-")[-2])

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        if self.config.delay_s:
            await asyncio.sleep(self.config.delay_s)
        if self.config.fail_every and self.index % self.config.fail_every == 1 and len(history.utterances) >= 2:
            raise ConnectorError("HTTP 500")
        if self.config.hang_every and self.index % self.config.hang_every == 2:
            await asyncio.sleep(3600)
        text = user_utterance.text if user_utterance else "hi"
        digest = hashlib.sha256(text.encode()).hexdigest()
        return CRSReply(text=f"you said: {text}", items=[ItemRef(id=str(int(digest[:4], 16) % 40 + 1))])


class WorkerKillerCRS(CRSConnector):
    """Ends the process it runs in when a conversation opens: a Ray worker (or node) that dies on every
    attempt, for the Ray executor tests. Never use it with the local executor."""

    Config = ConnectorConfig

    async def open(self, conversation_id: str) -> None:
        os._exit(1)

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        raise AssertionError("unreachable: open() ended the process")
