"""The one way YAML is read: a mapping from a file (or package resource) with one-line errors,
optionally validated by a pydantic model that rejects unknown keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from usersimcrs.core.validation import _one_line, validate
from usersimcrs.errors import ConfigError, UserError

M = TypeVar("M", bound=BaseModel)


def parse_yaml(text: str, *, source: str) -> Any:
    """Parse YAML text; bad syntax is a ConfigError `source:line: invalid YAML (problem)`.

    Safe loading, by libyaml where PyYAML was built with it (its wheels are): a tenth of the pure-Python
    parser's time, which was 20 ms of a run's start-up for one simulator prompt file."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ConfigError(
            f"{source}{where}: invalid YAML ({_one_line(getattr(exc, 'problem', None) or exc)})"
        ) from None
    except ValueError as exc:  # a scalar resolves but cannot build, e.g. the date 2001-13-45
        raise ConfigError(f"{source}: invalid YAML value ({_one_line(exc)})") from None


def parse_yaml_mapping(text: str, *, source: str) -> dict[str, Any]:
    """Parse YAML text that must hold a mapping (an empty document is an empty mapping)."""
    data = parse_yaml(text, source=source)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping from `path`, with a one-line error on a missing file or bad syntax."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return parse_yaml_mapping(text, source=str(path))


def load_yaml_model(
    path: str | Path, model: type[M], *, prefix: str | None = None, error: type[UserError] = ConfigError
) -> M:
    """Read `path` and validate it as `model`: `file: unknown key 'a.b'`, `file: missing key 'x'`, ..."""
    return validate(model, read_yaml(path), source=str(path), prefix=prefix, error=error)
