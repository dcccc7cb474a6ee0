"""Record every exchange with a CRS to JSONL, and replay recorded exchanges offline.

Any connector whose config has ``record_to: path.jsonl`` is wrapped by `RecordingConnector`
(see `crs_connectors.base.build_connector`), which appends one line per CRS turn: conversation ID,
turn number, the user text, and the reply (or the failure reason). The `replay` connector reads
such a file and answers each conversation's turn N with the recorded reply, so a run against a
remote CRS can be repeated deterministically without it. Conversation IDs are stable (run name,
seed and index), so the same config finds its recordings again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import Field

from crs_connectors.seam import ConnectorConfig, CRSConnector, CRSReply
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.errors import ConfigError, ConnectorError
from usersimcrs.runtime.context import RunContext

RECORD_VERSION = 1


class RecordingConnector(CRSConnector):
    """Wraps a connector and appends each of its replies (or failures) to a JSONL file."""

    def __init__(self, inner: CRSConnector, path: str) -> None:
        super().__init__(inner.config, inner.context)
        self.inner = inner
        self.path = str(Path(path).expanduser().resolve())
        self.conversation_id: str | None = None
        self.turn = 0
        self._writer = _shared_writer(inner.context, self.path)

    async def open(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.turn = 0
        await self.inner.open(conversation_id)

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        record: dict[str, Any] = {
            "v": RECORD_VERSION,
            "conversation_id": self.conversation_id or history.conversation_id,
            "turn": self.turn,
            "crs": self.config.type,
            "user_text": None if user_utterance is None else user_utterance.text,
        }
        self.turn += 1
        started = time.perf_counter()
        try:
            reply = await self.inner.reply(history, user_utterance)
        except ConnectorError as exc:
            record.update(error=str(exc), latency_s=round(time.perf_counter() - started, 6))
            self._writer.write(record)
            raise
        record.update(reply=reply.model_dump(mode="json"), latency_s=round(time.perf_counter() - started, 6))
        self._writer.write(record)
        return reply

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        """Anything else (e.g. `health`) comes from the wrapped connector."""
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


def _shared_writer(context: RunContext, path: str) -> JsonlWriter:
    """One appending writer per file per run (whole-line writes, so concurrent conversations interleave
    safely), closed with the run's other resources when the run ends."""

    def open_writer() -> JsonlWriter:
        writer = JsonlWriter(path)
        context.on_close(writer.close)
        return writer

    return context.shared(f"record_to:{path}", open_writer)


class ReplayConfig(ConnectorConfig):
    """Options of the replay connector."""

    path: str = Field(description="a JSONL file written with record_to")
    strict: bool = Field(False, description="fail a turn whose user text differs from the recorded one")


def load_recordings(path: str) -> dict[tuple[str, int], dict[str, Any]]:
    """(conversation ID, turn) -> record; a later record of the same turn replaces an earlier one."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"crs.path: recording {file} not found")
    table: dict[tuple[str, int], dict[str, Any]] = {}
    for record in iter_jsonl(file):
        if "conversation_id" in record and "turn" in record:
            table[(str(record["conversation_id"]), int(record["turn"]))] = record
    return table


class ReplayConnector(CRSConnector):
    """Answers from a recording: turn N of a conversation gets the reply recorded for turn N."""

    Config = ReplayConfig
    config: ReplayConfig

    def __init__(self, config: ReplayConfig, context: RunContext) -> None:
        super().__init__(config, context)
        key = f"replay:{Path(config.path).expanduser().resolve()}"
        shared = getattr(context, "shared", None)
        self.table = (
            shared(key, lambda: load_recordings(config.path)) if callable(shared) else load_recordings(config.path)
        )
        self.conversation_id: str | None = None
        self.turn = 0

    async def open(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.turn = 0

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        conversation = self.conversation_id or history.conversation_id
        turn = self.turn
        self.turn += 1
        record = self.table.get((conversation, turn))
        if record is None:
            raise ConnectorError(f"no recorded reply for conversation {conversation} turn {turn}")
        said = None if user_utterance is None else user_utterance.text
        if self.config.strict and record.get("user_text") != said:
            raise ConnectorError(f"replay diverged at turn {turn}: the user said something else than recorded")
        if record.get("error"):
            raise ConnectorError(str(record["error"]))
        return CRSReply.model_validate(record["reply"])
