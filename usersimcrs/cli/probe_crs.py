"""`usersimcrs probe-crs`: check a CRS endpoint against its connector before an expensive run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from usersimcrs.errors import ConfigError, UserError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.core.json_types import ConfigSection
    from usersimcrs.pipeline.probe import ProbeReport


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("probe-crs", help="check a CRS endpoint (health, latency, items, sessions)")
    parser.add_argument("--type", required=True, help="connector type, e.g. crs_arena, moviebot, rasa, http")
    parser.add_argument("--url", help="the CRS URL (for HTTP connectors)")
    parser.add_argument("--turns", type=int, default=3, help="turns of the scripted conversation (default 3)")
    parser.add_argument("--item-file", help="item CSV (MovieLens columns) to resolve parsed titles to IDs")
    parser.add_argument("--config", help="YAML with the connector options (a run config's `crs:` section is used)")
    parser.add_argument(
        "--set",
        dest="options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a connector option, e.g. --set timeout_s=5 --set text_path=reply.text",
    )
    parser.add_argument("--timeout", type=float, help="seconds per request (default: the connector's)")
    parser.add_argument("--message", action="append", help="user messages to send instead of the built-in script")
    parser.set_defaults(func=handle)


def connector_section(args: argparse.Namespace) -> ConfigSection:
    """The connector options from --config, --type/--url and --set (later ones win)."""
    from usersimcrs.core.yaml_io import parse_yaml, read_yaml  # lazy: keeps `usersimcrs --help` fast

    section: ConfigSection = {}
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


def check_table(report: ProbeReport) -> list[str]:
    """The probe's checks as aligned rows: check, result, detail."""
    width = max(len("check"), *(len(c.name) for c in report.checks))
    rows = [f"{'check':<{width}}  {'result':<7}  detail"]
    rows.extend(f"{c.name:<{width}}  {c.status:<7}  {c.detail}".rstrip() for c in report.checks)
    return rows


def render(report: ProbeReport, resolved_possible: bool) -> str:
    lines = [f"CRS: {report.crs}"]
    if report.turns:
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
    if report.turns:
        items_seen = sum(len(t.items) for t in report.turns)
        lines.append(
            f"reply shape: text in {sum(1 for t in report.turns if t.text.strip())}/{len(report.turns)} turns, "
            f"{items_seen} items parsed"
        )
    lines.extend(report.notes)
    lines.extend(check_table(report))
    failure = report.failure
    lines.append("result: OK" if failure is None else f"result: FAILED ({failure.name})")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    from usersimcrs.pipeline.probe import probe_crs  # lazy: keeps `usersimcrs --help` fast

    report = probe_crs(connector_section(args), item_file=args.item_file, turns=args.turns, messages=args.message)
    print(render(report, args.item_file is not None))
    if report.error is not None:
        raise UserError(report.error)  # one line on stderr, exit 2, as `run` stops on a CRS it cannot use
    return 0
