"""Hostile values from outside (a CRS reply, an LLM reply, an imported file) made storable, with a count.

Python's JSON reader accepts what strict JSON forbids and what no UTF-8 file can hold: lone
surrogates (``"\\ud800"``), ``NaN`` and ``Infinity``, and nesting deeper than a serializer follows.
Left as they are they fail later and far away (a conversation that cannot be written, a cache row
that cannot be stored, a PydanticSerializationError that loses an import). `repair_value` turns
them into values every writer takes, explicitly, and counts what it changed:

- ``lone_surrogates``: each lone surrogate becomes U+FFFD (the replacement character);
- ``non_finite_numbers``: NaN, Infinity and -Infinity become null (missing, never a number);
- ``too_deep``: a structure nested deeper than `MAX_DEPTH` levels is cut there and replaced by a
  short string saying so.

Callers record the counts next to the value (an utterance's ``metadata.repairs``, the import report,
the LLM usage summary), so a repaired record is kept and says it was repaired.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 64
"""Levels of nesting kept in a payload (pydantic's serializer refuses a few hundred; real replies use < 10)."""
REPLACEMENT = "\ufffd"
TOO_DEEP = f"<nested deeper than {MAX_DEPTH} levels: cut>"
_SURROGATE = re.compile("[\ud800-\udfff]")


def repair_text(text: str) -> tuple[str, int]:
    """`text` with every lone surrogate replaced by U+FFFD, and how many there were."""
    if text.isascii():
        return text, 0
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.subn(REPLACEMENT, text)
    return text, 0


def clean_text(text: str) -> bool:
    """Whether `text` has no lone surrogate (`repair_text` would leave it as it is)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_clean_json(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether `value` is plain JSON data (dicts with string keys, lists, strings, finite numbers,
    booleans, None: exactly those types) within `max_depth` levels and without a lone surrogate:
    `repair_value` would then give an equal value and count nothing. Reads without copying."""
    kind = type(value)
    if kind is str:
        return value.isascii() or clean_text(value)
    if kind is float:
        return math.isfinite(value)
    if value is None or kind is int or kind is bool:
        return True
    if kind is dict:
        if max_depth <= 0:
            return False
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or clean_text(key)) or not is_clean_json(item, max_depth - 1):
                return False
        return True
    if kind is list:
        if max_depth <= 0:
            return False
        for item in value:
            if not is_clean_json(item, max_depth - 1):
                return False
        return True
    return False  # a tuple, another mapping, an object: the full repair decides


def repair_value(
    value: Any, counts: Counter[str] | None = None, *, max_depth: int = MAX_DEPTH
) -> tuple[Any, Counter[str]]:
    """`value` (strings, numbers, mappings, lists) with the repairs above applied, and their counts."""
    counts = Counter() if counts is None else counts
    return _repair(value, counts, max_depth), counts


def _repair(value: Any, counts: Counter[str], depth: int) -> Any:
    if isinstance(value, str):
        text, n = repair_text(value)
        if n:
            counts["lone_surrogates"] += n
        return text
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        counts["non_finite_numbers"] += 1
        return None
    if isinstance(value, Mapping) or isinstance(value, (list, tuple)):
        if depth <= 0:
            counts["too_deep"] += 1
            return TOO_DEEP
        if isinstance(value, Mapping):
            return {_repair(k, counts, depth - 1): _repair(v, counts, depth - 1) for k, v in value.items()}
        return [_repair(v, counts, depth - 1) for v in value]
    return value


def merge_counts(*parts: Counter[str]) -> dict[str, int]:
    """The non-zero counts of `parts` added up, as a plain mapping (what gets recorded)."""
    total: Counter[str] = Counter()
    for part in parts:
        total.update(part)
    return {key: n for key, n in sorted(total.items()) if n}
