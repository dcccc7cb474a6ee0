"""Prompt templates shipped as YAML data files (package data), and a loader for them."""

from __future__ import annotations

import copy
import functools
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import parse_yaml_mapping, read_yaml
from usersimcrs.errors import ConfigError


def load_prompt(name: str) -> dict[str, Any]:
    """The built-in prompt `name` (e.g. ``"simulators/llm_single"``) as a mapping (a fresh copy)."""
    return copy.deepcopy(_parsed_prompt(name))


@functools.cache
def _parsed_prompt(name: str) -> dict[str, Any]:
    """Parse a built-in prompt once per process: simulators are built per conversation, and parsing
    the YAML each time cost ~30 ms per conversation (the top hot spot of the B1 benchmark)."""
    resource = resources.files(__package__).joinpath(*f"{name}.yaml".split("/"))
    if not resource.is_file():
        raise ConfigError(f"no built-in prompt named {name!r}")
    return parse_yaml_mapping(resource.read_text(encoding="utf-8"), source=f"prompt {name}")


def load_prompt_file(path: str | Path, *, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """A user's prompt YAML merged onto `base` (the built-in prompt): keys it leaves out come from
    `base`, and a key `base` does not have (a typo) is a ConfigError naming the file and the key."""
    data = read_yaml(path)
    if base is not None:
        validate(prompt_model(_key_types(base)), data, source=str(path))
    return {**(base or {}), **data}


def _key_types(base: dict[str, Any]) -> tuple[tuple[str, type], ...]:
    """The built-in prompt's keys with the kind of value each takes (text, mapping or list)."""
    return tuple((key, type(value) if isinstance(value, (str, dict, list)) else object) for key, value in base.items())


@functools.lru_cache(maxsize=64)
def prompt_model(key_types: tuple[tuple[str, type], ...]) -> type[BaseModel]:
    """A pydantic model of a prompt: every key optional, of its built-in kind, no other key allowed."""
    fields: dict[str, Any] = {key: (kind | None, None) for key, kind in key_types}
    return create_model("PromptFile", __config__=ConfigDict(extra="forbid", strict=True), **fields)
