"""JSON of HTTP bodies on the hot path (LLM requests and replies, CRS requests and replies).

orjson encodes and decodes several times faster than the standard library, which at a few thousand
calls a second is a visible share of the toolkit's CPU (docs/benchmarks.md). Decoding falls back to
the standard library for what Python servers emit but strict JSON forbids (NaN, lone surrogates),
so a reply either reader accepts reads the same.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def encode(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON (non-string keys written as strings, as `json.dumps` does)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def decode(data: bytes | str) -> Any:
    """The JSON document in `data`; ValueError if neither strict JSON nor Python's dialect of it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
