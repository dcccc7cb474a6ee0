"""Check a CRS endpoint through its connector before an expensive run.

Health, a short scripted conversation (latency, reply shape, parsed items), a second
conversation to see that sessions stay apart, and a third to see whether the CRS uses the
conversation context. Each step is a row of the report's checks; the first that fails (an
unreachable URL, a CRS that speaks another protocol) is recorded with its one-line reason and the
steps after it are marked not run, so the caller can show the table and stop with that line.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from crs_connectors.base import CRSConnector, build_connector
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.preflight import answered
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
    items: list[ItemRef]
    latency_s: float


CHECKS = ("health", "conversation", "reply text", "sessions", "context")
"""The probe's steps, in the order they run (a table row each)."""


@dataclass
class ProbeCheck:
    """One step of the probe: `ok`, `skipped` (nothing to check), `failed` (with its one-line reason)
    or `not run` (an earlier step failed)."""

    name: str
    status: str
    detail: str = ""


@dataclass
class ProbeReport:
    """What the probe found; printed as a short report with a table of its checks."""

    crs: str
    health: str | None = None
    turns: list[TurnResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checks: list[ProbeCheck] = field(default_factory=list)

    def latency(self, quantile: float) -> float:
        values = sorted(t.latency_s for t in self.turns)
        return values[max(0, math.ceil(quantile * len(values)) - 1)] if values else 0.0

    @property
    def failure(self) -> ProbeCheck | None:
        """The check that failed (None when every check that ran passed)."""
        return next((c for c in self.checks if c.status == "failed"), None)

    @property
    def error(self) -> str | None:
        """The one line that says why the probe failed (None when it passed)."""
        return self.failure.detail if self.failure is not None else None

    def record(self, name: str, status: str, detail: str = "") -> None:
        """Add the row of check `name`."""
        self.checks.append(ProbeCheck(name, status, detail))

    def skip_rest(self) -> None:
        """Mark the checks not reached as `not run`."""
        done = {c.name for c in self.checks}
        self.checks.extend(ProbeCheck(name, "not run") for name in CHECKS if name not in done)


def probe_context(item_file: str | None) -> RunContext:
    items = None
    if item_file:
        items = ItemCollection.from_csv(item_file, delimiters={"genres": "|", "keywords": "|"})
    return RunContext(items=items)


class CheckFailed(Exception):
    """A probe step failed; the message is its one-line reason."""


def refused_hint(exc: ConnectorError, connector: CRSConnector) -> str:
    """A hint for a request the server refused as malformed (HTTP 4xx): the server is up but most
    likely speaks another protocol than the connector's."""
    if not answered(" ".join(str(exc).split())):
        return ""
    kind = getattr(getattr(connector, "config", None), "type", None)
    protocol = f"the {kind!r} connector's" if kind else "this connector's"
    return f" (the server is up but refused the request: does it speak {protocol} protocol?)"


async def talk(
    connector: CRSConnector, conversation_id: str, messages: list[str], results: list[TurnResult]
) -> str | None:
    """Open a conversation and send `messages`, appending each answered turn to `results`; returns
    the reason of the first failure (None when every turn was answered)."""
    dialogue = Dialogue(conversation_id=conversation_id)
    try:
        await connector.open(conversation_id)
    except ConnectorError as exc:
        return f"{conversation_id} opening the conversation: {exc}{refused_hint(exc, connector)}"
    for number, message in enumerate(messages, start=1):
        utterance = Utterance(participant=USER, text=message)
        started = time.perf_counter()
        try:
            reply = await connector.reply(dialogue, utterance)
        except ConnectorError as exc:
            return f"{conversation_id} turn {number}: {exc}{refused_hint(exc, connector)}"
        latency = time.perf_counter() - started
        dialogue.add(utterance)
        dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
        results.append(TurnResult(message, reply.text, list(reply.items), latency))
    return None


async def converse(connector: CRSConnector, conversation_id: str, messages: list[str]) -> list[TurnResult]:
    """Run one scripted conversation and close it; a failure to open, answer or close is
    `CheckFailed` naming the conversation and the turn."""
    results: list[TurnResult] = []
    failure: str | None = None
    try:
        failure = await talk(connector, conversation_id, messages, results)
    finally:
        try:
            await connector.close()
        except ConnectorError as exc:
            failure = failure or f"{conversation_id} closing the conversation: {exc}"
    if failure is not None:
        raise CheckFailed(failure)
    return results


async def run_checks(report: ProbeReport, section: ConfigSection, context: RunContext, messages: list[str]) -> None:
    """The probe's checks in order; the first failure raises `CheckFailed` (recorded by `probe`)."""
    first = build_connector(section, context, source="probe-crs")
    health = getattr(first, "health", None)
    if callable(health):
        try:
            report.health = await health()
        except ConnectorError as exc:
            raise CheckFailed(f"health check of {section.get('url', section['type'])} failed: {exc}") from None
        report.record("health", "ok", repr(report.health[:60]))
    else:
        report.record("health", "skipped", "the connector has no health URL")
    report.turns = await converse(first, "probe-a", messages)
    report.record("conversation", "ok", f"{len(report.turns)} turns answered")
    if not any(t.text.strip() for t in report.turns):
        raise CheckFailed("the CRS answered every turn with empty text")
    with_text = sum(1 for t in report.turns if t.text.strip())
    report.record("reply text", "ok", f"text in {with_text}/{len(report.turns)} turns")
    cookies = list(getattr(getattr(first, "transport", None), "cookies", {}) or [])
    if cookies:
        report.notes.append(
            f"cookies: the CRS set {', '.join(sorted(set(cookies)))}; each conversation keeps its own jar"
        )
    second = await converse(build_connector(section, context, source="probe-crs"), "probe-b", messages[:1])
    if second[0].text == report.turns[0].text:
        report.notes.append("sessions: a second conversation got the same first reply (sessions are kept apart)")
        report.record("sessions", "ok", "kept apart")
    else:
        report.notes.append(
            "sessions: a second conversation got a different first reply "
            "(state carried across conversations, or a non-deterministic CRS)"
        )
        report.record("sessions", "ok", "a different first reply in a second conversation")
    if len(messages) > 1:
        fresh = await converse(build_connector(section, context, source="probe-crs"), "probe-c", messages[-1:])
        if fresh[0].text != report.turns[-1].text:
            report.notes.append(
                "context: the last message got a different reply in a fresh conversation (context is used)"
            )
            report.record("context", "ok", "used")
        else:
            report.notes.append(
                "context: the last message got the same reply without the earlier turns (context may be ignored)"
            )
            report.record("context", "ok", "may be ignored")
    else:
        report.record("context", "skipped", "needs 2 turns or more")


async def probe(section: ConfigSection, context: RunContext, messages: list[str]) -> ProbeReport:
    """Health, a scripted conversation, session separation and context use: a row per check, the
    first failure recorded with its reason and the checks after it not run."""
    report = ProbeReport(crs=str(section["type"]))
    try:
        await run_checks(report, section, context, messages)
    except CheckFailed as exc:
        done = {c.name for c in report.checks}
        report.record(next(name for name in CHECKS if name not in done), "failed", str(exc))
    report.skip_rest()
    return report


async def probe_crs_async(
    section: ConfigSection, *, item_file: str | None = None, turns: int = 3, messages: list[str] | None = None
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


def probe_crs(section: ConfigSection, **options: Any) -> ProbeReport:
    """`probe_crs_async` from synchronous code (also inside a running event loop)."""
    return run_blocking(probe_crs_async(section, **options))
