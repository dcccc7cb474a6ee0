"""docs/configuration.md and the config models agree: every documented key exists, every field is
documented, and every documented default is the code's default (a descriptive default such as
"backend default" stands for a field whose code default is None: decided elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from usersimcrs.config import ItemsConfig, ProfilesConfig, RatingsConfig, RunConfig
from usersimcrs.llm.config import LLMConfig
from usersimcrs.pipeline.matrix import MatrixConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
SECTIONS: dict[str, type[BaseModel]] = {
    "## Top level (`RunConfig`)": RunConfig,
    "## `items`": ItemsConfig,
    "## `ratings`": RatingsConfig,
    "## `profiles`": ProfilesConfig,
    "## `llm`": LLMConfig,
    "## Matrix files": MatrixConfig,
}
MENTIONED_IN_ROW = {("RunConfig", "ray_address"): "in the `executor` row"}


def section_text(heading: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def documented(heading: str) -> dict[str, str]:
    """key -> documented default, from the section's table (`| key | default | meaning |`) or its prose
    (`key` (`default`))."""
    text = section_text(heading)
    out: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) < 2 or cells[0] in ("key", "") or set(cells[0]) <= {"-"}:
            continue
        keys = re.findall(r"`([a-z_]+)`", cells[0])
        values = [v.strip() for v in split_top_level(cells[1])] if len(keys) > 1 else [cells[1]]
        assert len(values) == len(keys), f"{heading}: {line}"
        out.update(zip(keys, values, strict=True))
    if not out:  # prose: `key` (`default`)
        for key, value in re.findall(r"`([a-z_]+)` \(`([^`]*)`", text):
            out[key] = value
        for key in re.findall(r"^`([a-z_]+)`,|, `([a-z_]+)`", text, flags=re.M):
            out.setdefault(next(k for k in key if k), "none")
    return out


def split_top_level(text: str) -> list[str]:
    """'120, 3, 0.5' -> three parts; commas inside brackets stay."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "[{(" and 1 or (char in "]})" and -1 or 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def literal(text: str) -> tuple[bool, Any]:
    """(is a literal value, the value) of a documented default: numbers, booleans, lists, mappings and
    backticked words are literals; 'none' is None; anything else describes a default decided elsewhere."""
    bare = text.strip().strip("`").strip()
    if bare.lower() == "none":
        return True, None
    try:
        value = yaml.safe_load(bare)
    except yaml.YAMLError:
        return False, None
    if isinstance(value, (bool, int, float, list, dict)):
        return True, value
    if isinstance(value, str) and text.strip().startswith("`") and re.fullmatch(r"[A-Za-z_][\w.-]*", value):
        return True, value
    return False, None


def code_default(model: type[BaseModel], key: str) -> Any:
    field = model.model_fields[key]
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return value


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_every_documented_default_is_the_code_default(heading):
    model = SECTIONS[heading]
    docs = documented(heading)
    assert docs, heading
    unknown = sorted(set(docs) - set(model.model_fields))
    assert not unknown, f"{heading}: documented keys the model does not have: {unknown}"
    wrong = []
    for key, text in docs.items():
        default = code_default(model, key)
        if default is PydanticUndefined:
            assert text.startswith("required"), f"{heading}: {key} is required in the code, documented {text!r}"
            continue
        if isinstance(default, BaseModel) or (
            isinstance(default, list) and default and isinstance(default[0], BaseModel)
        ):
            continue  # a nested section: its own table documents it
        is_literal, value = literal(text)
        if default is None:
            if is_literal and value is not None:
                wrong.append(f"{key}: documented {text!r}, code None")
        elif not is_literal or plain(value) != plain(default):
            wrong.append(f"{key}: documented {text!r}, code {default!r}")
    assert not wrong, f"{heading}: " + "; ".join(wrong)


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_every_field_is_documented(heading):
    model = SECTIONS[heading]
    text = section_text(heading)
    missing = [
        key for key in model.model_fields if f"`{key}`" not in text and (model.__name__, key) not in MENTIONED_IN_ROW
    ]
    assert not missing, f"{heading}: fields without documentation: {missing}"


def test_the_reported_mismatch_is_gone():
    assert documented("## `llm`")["client"] == "`auto`" == f"`{LLMConfig.model_fields['client'].default}`"
