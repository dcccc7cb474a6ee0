"""`usersimcrs probe-crs`: check a CRS endpoint against its connector before an expensive run.

It checks health, runs a short scripted conversation (latency p50/p95, reply shape, parsed
items), opens a second conversation to see that sessions stay apart, and a third to see whether
the CRS uses the conversation context. A broken endpoint ends with one line and a non-zero exit.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any

from usersimcrs.errors import ConfigError, ConnectorError, UserError

PROBE_MESSAGES = (
    "Hi! I am looking for a movie to watch tonight.",
    "I really like science fiction movies, something like The Matrix.",
    "I have seen those already. Can you suggest something else?",
    "What genre is it?",
    "Thanks, that sounds good. Bye!",
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("probe-crs", help="check a CRS endpoint (health, latency, items, sessions)")
    parser.add_argument("--type", required=True, help="connector type, e.g. crs_arena, moviebot, rasa, http")
    parser.add_argument("--url", help="the CRS URL (for HTTP connectors)")
    parser.add_argument("--turns", type=int, default=3, help="turns of the scripted conversation (default 3)")
    parser.add_argument("--item-file", help="item CSV (MovieLens columns) to resolve parsed titles to IDs")
    parser.add_argument("--config", help="YAML with the connector options (a run config's `crs:` section is used)")
    parser.add_argument("--set", dest="options", action="append", default=[], metavar="KEY=VALUE",
                        help="a connector option, e.g. --set timeout_s=5 --set text_path=reply.text")
    parser.add_argument("--timeout", type=float, help="seconds per request (default: the connector's)")
    parser.add_argument("--message", action="append", help="user messages to send instead of the built-in script")
    parser.set_defaults(func=handle)


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


def connector_section(args: argparse.Namespace) -> dict[str, Any]:
    """The connector options from --config, --type/--url and --set (later ones win)."""
    from usersimcrs.core.yaml_io import parse_yaml, read_yaml

    section: dict[str, Any] = {}
    if args.config:
        data = read_yaml(args.config)
        section = dict(data.get("crs", data)) if isinstance(data.get("crs", data), dict) else {}
    section["type"] = args.type
    if args.url:
        section["url"] = args.url
    if args.timeout is not None:
        section["timeout_s"] = args.timeout
    for option in args.options:
        if "=" not in option:
            raise ConfigError(f"--set {option!r}: expected key=value")
        key, raw = option.split("=", 1)
        section[key.strip()] = parse_yaml(raw, source=f"--set {key.strip()}")
    return section


def build_context(item_file: str | None) -> Any:
    from usersimcrs.core.items import ItemCollection
    from usersimcrs.engine.context import RunContext

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
        report.notes.append(f"cookies: the CRS set {', '.join(sorted(set(cookies)))}; each conversation keeps its own jar")
    second = await converse(build_connector(section, context, source="probe-crs"), "probe-b", messages[:1])
    if second[0].text == report.turns[0].text:
        report.notes.append("sessions: a second conversation got the same first reply (sessions are kept apart)")
    else:
        report.notes.append("sessions: a second conversation got a different first reply "
                            "(state carried across conversations, or a non-deterministic CRS)")
    if len(messages) > 1:
        fresh = await converse(build_connector(section, context, source="probe-crs"), "probe-c", messages[-1:])
        if fresh[0].text != report.turns[-1].text:
            report.notes.append("context: the last message got a different reply in a fresh conversation (context is used)")
        else:
            report.notes.append("context: the last message got the same reply without the earlier turns "
                                "(context may be ignored)")
    return report


def render(report: ProbeReport, resolved_possible: bool) -> str:
    lines = [f"CRS: {report.crs}"]
    if report.health is not None:
        lines.append(f"health: ok ({report.health[:60]!r})")
    lines.append(
        f"latency over {len(report.turns)} turns: p50 {report.latency(0.5) * 1000:.0f} ms, "
        f"p95 {report.latency(0.95) * 1000:.0f} ms"
    )
    for number, turn in enumerate(report.turns, start=1):
        lines.append(f"turn {number}: user: {turn.message}")
        text = turn.text.replace("\n", " ").strip()
        lines.append(f"        crs:  {text[:160]}{'...' if len(text) > 160 else ''}")
        if turn.items:
            resolved = sum(1 for i in turn.items if i.id is not None)
            titles = ", ".join((i.title or i.raw or i.id or "?") for i in turn.items[:5])
            suffix = f", {resolved} resolved to item IDs" if resolved_possible or resolved else ""
            lines.append(f"        items: {len(turn.items)} ({titles}){suffix}")
    items_seen = sum(len(t.items) for t in report.turns)
    lines.append(f"reply shape: text in {sum(1 for t in report.turns if t.text.strip())}/{len(report.turns)} turns, "
                 f"{items_seen} items parsed")
    lines.extend(report.notes)
    lines.append("result: OK")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    if args.turns < 1:
        raise UserError("--turns must be at least 1")
    section = connector_section(args)
    context = build_context(args.item_file)
    script = args.message or list(PROBE_MESSAGES)
    messages = [script[i % len(script)] for i in range(args.turns)]
    report = asyncio.run(probe(section, context, messages))
    print(render(report, context.items is not None))
    return 0
