"""Names for the data that has no fixed shape, so that a signature says which kind of "anything" it holds.

Where data has a shape, a pydantic model (or a TypedDict) says so; these aliases are for what is truly
arbitrary: JSON another producer wrote (a CRS's reply, a model's structured answer, an imported record)
and a config section handed on unread to the plug-in whose options model reads it. They are `Any` (no
validation, no narrowing needed), named so that a reader knows why.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JSON: TypeAlias = Any
"""Any value JSON can hold, as `json.loads` returns it: a dict, list, str, int, float, bool or None."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object whose keys are another producer's (a CRS's message, a foreign record's extra fields)."""

JSONSchema: TypeAlias = dict[str, Any]
"""A JSON Schema document: what a structured LLM answer is constrained to and checked against."""

ConfigSection: TypeAlias = dict[str, Any]
"""A plug-in's section of a config (`crs:`, `simulator:`, a matrix axis entry) as the user wrote it: it stays a
mapping until the plug-in's own options model (`Config`) reads and validates it."""

__all__ = ["JSON", "ConfigSection", "JSONObject", "JSONSchema"]
