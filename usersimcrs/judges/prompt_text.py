"""The judges' scaffolding texts as data: `usersimcrs/judges/prompts.yaml`, validated by `JudgePrompts`.

Every sentence a judge prompt adds to the rubric (data rules, field guide, answer format, the
correction after an unusable reply, the debate's framing) lives in that file. A user may replace
any key with ``--prompts FILE`` (`JudgeRequest.prompts`); keys the file leaves out keep their
built-in text. Each template may use only its own named placeholders (`PLACEHOLDERS`), so a typo
in a key or a placeholder is a one-line error naming the file and the key.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import parse_yaml_mapping, read_yaml

BUILTIN = "prompts.yaml"
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")

PLACEHOLDERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # key: (allowed placeholders, required placeholders)
    "criteria_heading": (frozenset(), frozenset()),
    "criterion_title": (frozenset({"title", "name"}), frozenset()),
    "criterion_definition": (frozenset({"definition"}), frozenset({"definition"})),
    "standard_range": (frozenset({"low", "high"}), frozenset()),
    "standard_allowed": (frozenset({"scores"}), frozenset()),
    "standard_level": (frozenset({"score", "anchor"}), frozenset({"score", "anchor"})),
    "steps_heading": (frozenset(), frozenset()),
    "step": (frozenset({"number", "step"}), frozenset({"step"})),
    "note": (frozenset({"note"}), frozenset({"note"})),
    "field_guide": (frozenset(), frozenset()),
    "data_rules": (frozenset({"open", "close"}), frozenset({"open", "close"})),
    "extra_data": (frozenset({"open", "close"}), frozenset({"open", "close"})),
    "criterion_request": (frozenset({"title", "name", "scores"}), frozenset()),
    "turn_request": (frozenset({"title", "name", "scores", "turn"}), frozenset({"turn"})),
    "answer_format": (
        frozenset({"text_key", "score_key", "text_hint", "low", "high"}),
        frozenset({"text_key", "score_key"}),
    ),
    "criterion_text_hint": (frozenset(), frozenset()),
    "correction": (frozenset({"problem", "text_key", "score_key", "low", "high"}), frozenset()),
    "batch_request": (frozenset({"names"}), frozenset()),
    "batch_answer_format": (
        frozenset({"names", "text_key", "score_key", "text_hint", "low", "high"}),
        frozenset({"text_key", "score_key"}),
    ),
    "batch_correction": (frozenset({"names", "problems", "all_names", "text_key", "score_key"}), frozenset()),
    "debate_scale": (frozenset({"low", "high", "anchors"}), frozenset({"anchors"})),
    "debate_anchor": (frozenset({"score", "anchor"}), frozenset({"score", "anchor"})),
    "debate_role": (frozenset({"title", "persona"}), frozenset({"persona"})),
    "debate_focus": (frozenset({"focus"}), frozenset({"focus"})),
    "debate_focus_item": (frozenset({"item"}), frozenset({"item"})),
    "debate_round_request": (frozenset({"round", "max_rounds", "guidance"}), frozenset({"guidance"})),
    "debate_text_hint": (frozenset(), frozenset()),
}


class JudgePrompts(BaseModel):
    """Every scaffolding text of the judge prompts; templates use ``{name}`` placeholders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["judge_prompts"] = "judge_prompts"
    criteria_heading: str
    criterion_title: str
    criterion_definition: str
    standard_range: str
    standard_allowed: str
    standard_level: str
    steps_heading: str
    step: str
    note: str
    field_guide: str
    data_rules: str
    extra_data: str
    criterion_request: str
    turn_request: str
    answer_format: str
    criterion_text_hint: str
    correction: str
    batch_request: str
    batch_answer_format: str
    batch_correction: str
    debate_scale: str
    debate_anchor: str
    debate_role: str
    debate_focus: str
    debate_focus_item: str
    debate_round_request: str
    debate_text_hint: str

    @field_validator("*")
    @classmethod
    def _placeholders(cls, value: str, info: ValidationInfo) -> str:
        """Only the key's own placeholders, and the ones it cannot do without (e.g. the fences)."""
        if info.field_name not in PLACEHOLDERS:
            return value
        allowed, required = PLACEHOLDERS[info.field_name]
        used = set(_PLACEHOLDER.findall(value))
        unknown = sorted(used - allowed)
        if unknown:
            names = ", ".join("{" + n + "}" for n in sorted(allowed)) or "none"
            raise ValueError(f"unknown placeholder {{{unknown[0]}}} (allowed: {names})")
        missing = sorted(required - used)
        if missing:
            raise ValueError(f"the placeholder {{{missing[0]}}} is required")
        return value

    def text(self, key: str, **values: Any) -> str:
        """Template `key` with its placeholders filled (other braces, e.g. JSON examples, stay)."""
        template: str = getattr(self, key)
        return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)


def _builtin_data() -> dict[str, Any]:
    resource = resources.files(__package__).joinpath(BUILTIN)
    return parse_yaml_mapping(resource.read_text(encoding="utf-8"), source=f"usersimcrs/judges/{BUILTIN}")


@functools.cache
def builtin_prompts() -> JudgePrompts:
    """The shipped texts (parsed once per process; the model is frozen)."""
    return validate(JudgePrompts, _builtin_data(), source=f"usersimcrs/judges/{BUILTIN}")


def load_judge_prompts(path: str | Path | None = None) -> JudgePrompts:
    """The built-in texts, with the keys of a user's file `path` replacing theirs (validated against it)."""
    if path is None:
        return builtin_prompts()
    data = read_yaml(path)
    return validate(JudgePrompts, {**_builtin_data(), **data}, source=str(path))


__all__ = ["JudgePrompts", "PLACEHOLDERS", "builtin_prompts", "load_judge_prompts"]
