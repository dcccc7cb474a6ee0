"""JSON of HTTP bodies on the hot path (LLM requests and replies, CRS requests and replies).

orjson encodes and decodes several times faster than the standard library, which at a few thousand
calls a second is a visible share of the toolkit's CPU (docs/benchmarks.md). Decoding falls back to
the standard library for what Python servers emit but strict JSON forbids (NaN, lone surrogates),
so a reply either reader accepts reads the same. A document nested deeper than Python's reader
follows is a `ValueError` (`TooDeep`), like any other unreadable body, never a RecursionError;
an integer too long for Python's int conversion is kept as its digits (a string).

What the fallback lets through and no UTF-8 writer takes (lone surrogates, NaN, Infinity) is
repaired and counted where the value is stored (`core/text_repair.py`).
"""

from __future__ import annotations

import json

import orjson

from usersimcrs.core.json_types import JSON


def encode(value: JSON) -> bytes:
    """`value` as compact UTF-8 JSON (non-string keys written as strings, as `json.dumps` does)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


class TooDeep(ValueError):
    """A JSON document nested deeper than the reader follows."""


def decode(data: bytes | str) -> JSON:
    """The JSON document in `data`; ValueError if neither strict JSON nor Python's dialect of it."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data, parse_int=_int_or_digits)
        except RecursionError:
            raise TooDeep("JSON nested too deeply") from None


def _int_or_digits(text: str) -> int | str:
    """An integer, or its digits as a string when Python refuses to convert that many (> 4300 digits)."""
    try:
        return int(text)
    except ValueError:
        return text
