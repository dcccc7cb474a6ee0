"""The CRSs people talk to: one connector per conversation, made by the engine's connector factory.

A connector stays open while its conversation goes on (at most `limits.open_sessions` at once; the
least recently used is closed first and reopened on its next message, with the stored history).
A CRS that fails or takes longer than `limits.crs_timeout_s` gives a `CRSOutcome` with an error
for the participant's page and the log, never an exception.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass

from crs_connectors.base import CRSConnector, CRSReply
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.engine.plugins import ConnectorFactory, connector_factory
from usersimcrs.runtime.context import RunContext
from usersimcrs.studio.config import Study

logger = logging.getLogger(__name__)
ERROR_CHARS = 300


@dataclass
class CRSOutcome:
    """What one CRS call gave: a reply, or the reason there is none."""

    reply: CRSReply | None
    error: str | None
    latency_s: float


def one_line(text: object, limit: int = ERROR_CHARS) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class CRSSessions:
    """Open connectors by conversation ID, their locks, and the study's shared run context."""

    def __init__(self, study: Study, context: RunContext) -> None:
        self.study = study
        self.context = context
        self.limits = study.config.limits
        self.factories: dict[str, ConnectorFactory] = {
            name: connector_factory(config.crs, source=f"{study.path}: crs {name}")
            for name, config in study.crs_configs.items()
        }
        self._open: OrderedDict[str, CRSConnector] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, conversation_id: str) -> asyncio.Lock:
        """The lock that keeps one message of a conversation in flight at a time."""
        if conversation_id not in self._locks:
            self._locks[conversation_id] = asyncio.Lock()
        return self._locks[conversation_id]

    async def _connector(self, crs: str, conversation_id: str) -> CRSConnector:
        connector = self._open.get(conversation_id)
        if connector is not None:
            self._open.move_to_end(conversation_id)
            return connector
        while len(self._open) >= self.limits.open_sessions:
            oldest, _ = next(iter(self._open.items()))
            await self.close(oldest)
        connector = self.factories[crs](self.context)
        await connector.open(conversation_id)
        self._open[conversation_id] = connector
        return connector

    async def reply(self, crs: str, history: Dialogue, user_text: str | None) -> CRSOutcome:
        """Ask `crs` for its next turn (`user_text` None: the CRS opens); failures become `error`."""
        started = time.perf_counter()
        timeout = self.limits.crs_timeout_s
        utterance = Utterance(participant="USER", text=user_text) if user_text is not None else None
        try:
            async with asyncio.timeout(timeout):
                connector = await self._connector(crs, history.conversation_id)
                reply = await connector.reply(history, utterance)
        except TimeoutError:
            await self.close(history.conversation_id)  # a half-done call may leave its session unusable
            return CRSOutcome(None, f"timeout: no answer within {timeout:g} s", time.perf_counter() - started)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a CRS fault is shown to the participant and recorded
            logger.info("CRS %s failed in %s: %s", crs, history.conversation_id, one_line(exc))
            await self.close(history.conversation_id)
            return CRSOutcome(None, one_line(f"{type(exc).__name__}: {exc}"), time.perf_counter() - started)
        return CRSOutcome(reply, None, time.perf_counter() - started)

    async def close(self, conversation_id: str) -> None:
        """Close a conversation's connector (ended, evicted or broken); errors on close are logged only."""
        connector = self._open.pop(conversation_id, None)
        lock = self._locks.get(conversation_id)
        if lock is not None and not lock.locked():
            self._locks.pop(conversation_id, None)
        if connector is None:
            return
        try:
            await asyncio.wait_for(connector.close(), timeout=5)
        except Exception as exc:  # noqa: BLE001
            logger.info("closing the CRS of %s failed: %s", conversation_id, one_line(exc))

    async def aclose(self) -> None:
        for conversation_id in list(self._open):
            await self.close(conversation_id)
        await self.context.aclose()
