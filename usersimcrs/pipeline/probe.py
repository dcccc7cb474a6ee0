"""Check a CRS endpoint through its connector before an expensive run.

Health, a short scripted conversation (latency, reply shape, parsed items), a second
conversation to see that sessions stay apart, and a third to see whether the CRS uses the
conversation context. A broken endpoint is a UserError naming the turn or URL.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from usersimcrs.errors import ConnectorError, UserError
from usersimcrs.runtime.context import RunContext

PROBE_MESSAGES = (
    "Hi! I am looking for a movie to watch tonight.",
    "I really like science fiction movies, something like The Matrix.",
    "I have seen those already. Can you suggest something else?",
    "What genre is it?",
    "Thanks, that sounds good. Bye!",
)


@dataclass
class TurnResult:
    """One probed turn."""

    message: str
    text: str
    items: list[Any]
    latency_s: float


@dataclass
class ProbeReport:
    """What the probe found; printed as a short report."""

    crs: str
    health: str | None = None
    turns: list[TurnResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def latency(self, quantile: float) -> float:
        values = sorted(t.latency_s for t in self.turns)
        return values[max(0, math.ceil(quantile * len(values)) - 1)] if values else 0.0


def probe_context(item_file: str | None) -> RunContext:
    from usersimcrs.core.items import ItemCollection

    items = None
    if item_file:
        items = ItemCollection.from_csv(item_file, delimiters={"genres": "|", "keywords": "|"})
    return RunContext(items=items)


async def converse(connector: Any, conversation_id: str, messages: list[str]) -> list[TurnResult]:
    """Run one scripted conversation; a failing turn is a UserError naming the turn."""
    from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance

    dialogue = Dialogue(conversation_id=conversation_id)
    results = []
    await connector.open(conversation_id)
    try:
        for number, message in enumerate(messages, start=1):
            utterance = Utterance(participant=USER, text=message)
            started = time.perf_counter()
            try:
                reply = await connector.reply(dialogue, utterance)
            except ConnectorError as exc:
                raise UserError(f"{conversation_id} turn {number}: {exc}") from None
            latency = time.perf_counter() - started
            dialogue.add(utterance)
            dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
            results.append(TurnResult(message, reply.text, list(reply.items), latency))
    finally:
        await connector.close()
    return results


async def probe(section: dict[str, Any], context: Any, messages: list[str]) -> ProbeReport:
    """Health, a scripted conversation, session separation and context use."""
    from crs_connectors.base import build_connector

    report = ProbeReport(crs=str(section["type"]))
    first = build_connector(section, context, source="probe-crs")
    health = getattr(first, "health", None)
    if callable(health):
        try:
            report.health = await health()
        except ConnectorError as exc:
            raise UserError(f"health check of {section.get('url', section['type'])} failed: {exc}") from None
    report.turns = await converse(first, "probe-a", messages)
    if not any(t.text.strip() for t in report.turns):
        raise UserError("the CRS answered every turn with empty text")
    cookies = list(getattr(getattr(first, "transport", None), "cookies", {}) or [])
    if cookies:
        report.notes.append(
            f"cookies: the CRS set {', '.join(sorted(set(cookies)))}; each conversation keeps its own jar"
        )
    second = await converse(build_connector(section, context, source="probe-crs"), "probe-b", messages[:1])
    if second[0].text == report.turns[0].text:
        report.notes.append("sessions: a second conversation got the same first reply (sessions are kept apart)")
    else:
        report.notes.append(
            "sessions: a second conversation got a different first reply "
            "(state carried across conversations, or a non-deterministic CRS)"
        )
    if len(messages) > 1:
        fresh = await converse(build_connector(section, context, source="probe-crs"), "probe-c", messages[-1:])
        if fresh[0].text != report.turns[-1].text:
            report.notes.append(
                "context: the last message got a different reply in a fresh conversation (context is used)"
            )
        else:
            report.notes.append(
                "context: the last message got the same reply without the earlier turns (context may be ignored)"
            )
    return report


async def probe_crs_async(
    section: dict[str, Any], *, item_file: str | None = None, turns: int = 3, messages: list[str] | None = None
) -> ProbeReport:
    """Probe the CRS a `crs:` section describes with `turns` scripted messages."""
    if turns < 1:
        raise UserError("--turns must be at least 1")
    script = messages or list(PROBE_MESSAGES)
    context = probe_context(item_file)
    try:
        return await probe(section, context, [script[i % len(script)] for i in range(turns)])
    finally:
        await context.aclose()


def probe_crs(section: dict[str, Any], **options: Any) -> ProbeReport:
    """`probe_crs_async` from synchronous code (also inside a running event loop)."""
    from usersimcrs.engine.loop import run_blocking

    return run_blocking(probe_crs_async(section, **options))
