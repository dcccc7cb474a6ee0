"""Pydantic validation errors as one line a user can act on: the file (or flag) and the dotted key.

An unknown key names the key as it was given and, when a field of that level is close to it, the
one meant (`unknown key 'conversatons' (did you mean 'conversations'?)`); a key set on the command
line (`--set a.b=1`) is blamed on that flag, not on the file."""

from __future__ import annotations

import difflib
import types
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from usersimcrs.errors import ConfigError, UserError

M = TypeVar("M", bound=BaseModel)


def _one_line(message: object) -> str:
    """A message squeezed onto one line (pydantic and YAML messages may span several)."""
    return " ".join(str(message).split())


def suggestion(given: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` when a known name is close to `given` (difflib's ratio >= 0.6), else ''."""
    close = difflib.get_close_matches(given, [name for name in known if name != given], n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def field_names(model: type[BaseModel] | None, path: Iterable[str | int] = ()) -> list[str]:
    """The keys a model accepts at `path` (a validation error's location without its last part): field
    names and aliases, following nested models through optional, list and dict fields; [] when unknown."""
    annotation: Any = model
    for part in path:
        annotation = _inner(annotation, part)
    models = _models_in(annotation)
    return [name for m in models for key, f in m.model_fields.items() for name in (key, f.alias) if name]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold at its own level (`X | None` -> [X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def _inner(annotation: Any, part: str | int) -> Any:
    """The annotation one step down `part`: a model's field, a list's item, a dict's value."""
    for model in _models_in(annotation):
        for key, info in model.model_fields.items():
            if part in (key, info.alias):
                return info.annotation
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        return next((found for arg in args if (found := _inner(arg, part)) is not None), None)
    if origin in (list, tuple, set, frozenset) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _blamed(key: str, source: str | None, overrides: Mapping[str, str] | None) -> str:
    """`source: ` or, for a key set on the command line (or inside a section set there), `--set k=v: `."""
    for given, assignment in (overrides or {}).items():
        if key == given or key.startswith(f"{given}."):
            return f"{assignment}: "
    return f"{source}: " if source else ""


def _reported(errors: list[Any]) -> Any:
    """The error to report: the first, except that a missing key is reported as the unknown key given
    beside it (`simulator.typ` for a missing `simulator.type`), the typo that most likely caused it."""
    first = errors[0]
    if first["type"] != "missing":
        return first
    level = tuple(first["loc"][:-1])
    return next((e for e in errors if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == level), first)


def describe_validation_error(
    exc: ValidationError,
    *,
    source: str | None,
    prefix: str | None = None,
    flags: bool = False,
    model: type[BaseModel] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> str:
    """The first error of `exc` as `source: unknown key 'a.b' (did you mean 'c'?)`, `source: missing key
    'a.b'` or `source: key 'a.b': message`; `prefix` is prepended to the key (a section inside the file).
    `model` (the one validated) gives the suggestion; `overrides` maps dotted keys set on the command
    line to their `--set k=v`, which is then named instead of `source`. With `flags` the fields are
    command-line options: `--max-turns: message`."""
    errors = exc.errors()
    first = _reported(errors)
    if flags and first["loc"]:
        lead = f"{source}: " if source else ""
        return f"{lead}--{str(first['loc'][0]).replace('_', '-')}: {_one_line(first['msg'])}"
    key = ".".join(str(part) for part in ([prefix] if prefix else []) + list(first["loc"])) or "(top level)"
    lead = _blamed(key, source, overrides)
    if first["type"] == "extra_forbidden":
        level = first["loc"][:-1]
        missing = [str(e["loc"][-1]) for e in errors if e["type"] == "missing" and e["loc"][:-1] == level]
        given = str(first["loc"][-1])
        hint = suggestion(given, missing) or suggestion(given, field_names(model, level))
        return f"{lead}unknown key '{key}'{hint}"
    if first["type"] == "missing":
        return f"{lead}missing key '{key}'"
    return f"{lead}key '{key}': {_one_line(first['msg'])}"


def require_key(
    section: Mapping[str, Any],
    key: str,
    *,
    source: str | None,
    prefix: str,
    overrides: Mapping[str, str] | None = None,
) -> None:
    """A ConfigError when `section` lacks `key`, naming the close key given instead when there is one
    (`unknown key 'simulator.typ' (did you mean 'type'?)`), else the missing one."""
    if key in section:
        return
    typo = difflib.get_close_matches(key, [str(k) for k in section], n=1)
    if typo:
        name = f"{prefix}.{typo[0]}"
        raise ConfigError(f"{_blamed(name, source, overrides)}unknown key '{name}' (did you mean '{key}'?)")
    name = f"{prefix}.{key}"
    raise ConfigError(f"{_blamed(name, source, overrides)}missing key '{name}'")


def validate(
    model: type[M],
    data: Any,
    *,
    source: str | None,
    prefix: str | None = None,
    error: type[UserError] = ConfigError,
    flags: bool = False,
    overrides: Mapping[str, str] | None = None,
) -> M:
    """`model.model_validate(data)`, raising `error` (ConfigError, DataError, ...) with one line on failure;
    with `flags` the fields are named as command-line options (`--max-turns: ...`); `overrides`: the keys
    set with `--set` (dotted key -> `--set k=v`), blamed on that flag instead of `source`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        message = describe_validation_error(
            exc, source=source, prefix=prefix, flags=flags, model=model, overrides=overrides
        )
        raise error(message) from None
