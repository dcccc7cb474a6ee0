"""Structured output: pull the first JSON value out of a completion and check it against a schema.

Models (especially small or unconstrained ones) wrap JSON in code fences or prose; the extraction
is tolerant, the validation is strict for the subset of JSON Schema the toolkit's prompts use
(type, properties, required, additionalProperties, enum, const, items, min/max bounds and lengths,
anyOf/oneOf).

A completion cut off at its token limit leaves unclosed JSON; `close_truncated` closes open strings,
objects and arrays (never a half-written number or literal) and accepts the result only if it
validates, so a length cap costs a shorter answer rather than a retry of the same doomed call.
"""

from __future__ import annotations

import json
import re

from usersimcrs.core.json_types import JSON, JSONObject, JSONSchema

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


class StructuredOutputError(ValueError):
    """The completion holds no JSON value that satisfies the schema."""


def parse_structured(text: str, schema: JSONSchema) -> JSON:
    """The first JSON value in `text` that validates against `schema`; StructuredOutputError if none."""
    if not text or not text.strip():
        raise StructuredOutputError("empty completion")
    first_problem = None
    try:
        for candidate in json_candidates(text):
            problems = validate(candidate, schema)
            if not problems:
                return candidate
            first_problem = first_problem or problems[0]
    except RecursionError:  # hostile nesting: unparseable like any other bad answer (resampled), no traceback
        raise StructuredOutputError("JSON in completion nested too deeply") from None
    if first_problem is None:
        raise StructuredOutputError("no JSON value in completion")
    raise StructuredOutputError(f"JSON does not match schema: {first_problem}")


def parse_or_close(text: str, schema: JSONSchema, *, cut_off: bool) -> tuple[JSON, bool]:
    """(value, closed): the first valid JSON value in `text`, else, when the answer was `cut_off` at its
    token cap, the cut-off value closed (`closed` True); the parse error when neither validates."""
    try:
        return parse_structured(text, schema), False
    except StructuredOutputError as exc:
        if not cut_off:
            raise
        try:
            return close_truncated(text, schema), True
        except StructuredOutputError:
            raise exc from None  # the complete-answer reading's problem is the one worth reporting


def close_truncated(text: str, schema: JSONSchema) -> JSON:
    """The JSON value begun in `text` and cut off, closed and checked against `schema`; raise if it fails."""
    from partial_json_parser import Allow, loads

    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise StructuredOutputError("no JSON value in completion")
    try:
        value = loads(text[min(starts) :], Allow.STR | Allow.OBJ | Allow.ARR)
        problems = validate(value, schema)
    except RecursionError:
        raise StructuredOutputError("cut-off JSON nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - the parser raises several types for text it cannot close
        raise StructuredOutputError(f"cut-off JSON could not be closed ({type(exc).__name__})") from None
    if problems:
        raise StructuredOutputError(f"cut-off JSON does not match schema: {problems[0]}")
    return value


def json_candidates(text: str) -> list[JSON]:
    """Every top-level JSON object/array found in `text`, fenced blocks first, in order."""
    sources = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    found: list[JSON] = []
    for source in sources:
        found.extend(_scan(source))
    return found


def _scan(source: str) -> list[JSON]:
    """JSON objects/arrays decoded from each `{`/`[` that starts a complete value, left to right."""
    values: list[JSON] = []
    index = 0
    while True:
        starts = [i for i in (source.find("{", index), source.find("[", index)) if i >= 0]
        if not starts:
            return values
        start = min(starts)
        try:
            value, end = _DECODER.raw_decode(source, start)
        except json.JSONDecodeError:
            index = start + 1
            continue
        except RecursionError:  # nested deeper than Python reads: every later start lies inside it
            return values
        values.append(value)
        index = end


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
}


def _is_type(value: JSON, name: str) -> bool:
    if name == "integer":
        return (
            isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
        )
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES.get(name, (object,)))


def validate(value: JSON, schema: JSONSchema, path: str = "$") -> list[str]:
    """Problems found checking `value` against `schema` (empty when valid)."""
    if not isinstance(schema, dict) or not schema:
        return []
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is_type(value, name) for name in names):
            return [f"{path}: expected {'/'.join(names)}, got {type(value).__name__}"]
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: must equal {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']!r}")
    for key in ("anyOf", "oneOf"):
        if key in schema and not any(not validate(value, sub, path) for sub in schema[key]):
            problems.append(f"{path}: matches none of {key}")
    problems += _validate_number(value, schema, path)
    problems += _validate_sized(value, schema, path)
    if isinstance(value, dict):
        problems += _validate_object(value, schema, path)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], f"{path}[{i}]")
    return problems


def _validate_number(value: JSON, schema: JSONSchema, path: str) -> list[str]:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return []
    problems = []
    if "minimum" in schema and value < schema["minimum"]:
        problems.append(f"{path}: {value} < minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        problems.append(f"{path}: {value} > maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        problems.append(f"{path}: {value} <= exclusiveMinimum {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        problems.append(f"{path}: {value} >= exclusiveMaximum {schema['exclusiveMaximum']}")
    return problems


def _validate_sized(value: JSON, schema: JSONSchema, path: str) -> list[str]:
    bounds = {"string": ("minLength", "maxLength"), "array": ("minItems", "maxItems")}
    kind = "string" if isinstance(value, str) else "array" if isinstance(value, list) else None
    if kind is None:
        return []
    low, high = bounds[kind]
    problems = []
    if low in schema and len(value) < schema[low]:
        problems.append(f"{path}: shorter than {low} {schema[low]}")
    if high in schema and len(value) > schema[high]:
        problems.append(f"{path}: longer than {high} {schema[high]}")
    return problems


def _validate_object(value: JSONObject, schema: JSONSchema, path: str) -> list[str]:
    problems = [f"{path}: missing required {key!r}" for key in schema.get("required", []) if key not in value]
    properties = schema.get("properties", {})
    for key, item in value.items():
        if key in properties:
            problems += validate(item, properties[key], f"{path}.{key}")
        elif schema.get("additionalProperties") is False:
            problems.append(f"{path}: unexpected key {key!r}")
        elif isinstance(schema.get("additionalProperties"), dict):
            problems += validate(item, schema["additionalProperties"], f"{path}.{key}")
    return problems
