"""Pydantic validation errors as one line a user can act on: the file (or flag) and the dotted key."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from usersimcrs.errors import ConfigError, UserError

M = TypeVar("M", bound=BaseModel)


def _one_line(message: object) -> str:
    """A message squeezed onto one line (pydantic and YAML messages may span several)."""
    return " ".join(str(message).split())


def describe_validation_error(
    exc: ValidationError, *, source: str | None, prefix: str | None = None, flags: bool = False
) -> str:
    """The first error of `exc` as `source: unknown key 'a.b'`, `source: missing key 'a.b'` or
    `source: key 'a.b': message`; `prefix` is prepended to the key (a section inside the file).
    With `flags` the fields are command-line options: `--max-turns: message`."""
    first = exc.errors()[0]
    lead = f"{source}: " if source else ""
    if flags and first["loc"]:
        return f"{lead}--{str(first['loc'][0]).replace('_', '-')}: {_one_line(first['msg'])}"
    key = ".".join(str(part) for part in ([prefix] if prefix else []) + list(first["loc"])) or "(top level)"
    if first["type"] == "extra_forbidden":
        return f"{lead}unknown key '{key}'"
    if first["type"] == "missing":
        return f"{lead}missing key '{key}'"
    return f"{lead}key '{key}': {_one_line(first['msg'])}"


def validate(
    model: type[M],
    data: Any,
    *,
    source: str | None,
    prefix: str | None = None,
    error: type[UserError] = ConfigError,
    flags: bool = False,
) -> M:
    """`model.model_validate(data)`, raising `error` (ConfigError, DataError, ...) with one line on failure;
    with `flags` the fields are named as command-line options (`--max-turns: ...`)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise error(describe_validation_error(exc, source=source, prefix=prefix, flags=flags)) from None
