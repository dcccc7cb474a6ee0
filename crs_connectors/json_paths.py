"""Simple JSON paths for reply payloads: ``reply.text``, ``items[0].id``, ``[*].custom.items[*]``."""

from __future__ import annotations

import re

from usersimcrs.core.json_types import JSON
from usersimcrs.errors import ConfigError

_TOKEN = re.compile(r"\.?([^.\[\]]+)|\[(\*|-?\d+)\]")


def parse_path(path: str) -> list[str | int]:
    """Split a dotted path into keys, indices and ``*`` wildcards; a bad path is a ConfigError."""
    path = path.strip()
    if path in ("", "$", "."):
        return []
    if path.startswith("$"):
        path = path[1:]
    steps: list[str | int] = []
    position = 0
    while position < len(path):
        match = _TOKEN.match(path, position)
        if not match or match.end() == position:
            raise ConfigError(f"invalid JSON path {path!r} at character {position + 1}")
        key, index = match.groups()
        if key is not None:
            steps.append(key)
        elif index == "*":
            steps.append("*")
        else:
            steps.append(int(index))
        position = match.end()
    return steps


def select(data: JSON, path: str) -> list[JSON]:
    """Every value at `path` (a wildcard fans out; missing keys give nothing)."""
    current = [data]
    for step in parse_path(path):
        following: list[JSON] = []
        for node in current:
            if step == "*":
                if isinstance(node, list):
                    following.extend(node)
                elif isinstance(node, dict):
                    following.extend(node.values())
            elif isinstance(step, int):
                if isinstance(node, list) and -len(node) <= step < len(node):
                    following.append(node[step])
            elif isinstance(node, dict) and step in node:
                following.append(node[step])
        current = following
    return current


def first_value(data: JSON, path: str) -> JSON:
    """The first value at `path`, or None."""
    values = select(data, path)
    return values[0] if values else None
