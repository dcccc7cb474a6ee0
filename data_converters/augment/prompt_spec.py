"""Annotation prompts are YAML data files; this module loads them and fills their templates."""

from __future__ import annotations

from pathlib import Path
from string import Template
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.yaml_io import load_yaml_model, read_yaml
from usersimcrs.errors import ConfigError

PROMPT_DIR = Path(__file__).with_name("prompts")  # the YAML files (a package only so installs ship them)


class PromptSpec(BaseModel):
    """A prompt file: id and version (stored as provenance), templates, label sets and limits."""

    model_config = ConfigDict(extra="allow")

    id: str
    version: int | str
    system: str
    user: str
    intents: dict[str, dict[str, str]] = Field(default_factory=dict)
    slots: dict[str, str] = Field(default_factory=dict)

    def option(self, key: str, default: Any) -> Any:
        """A numeric limit from the file (max_acts, max_chars, ...), else `default`."""
        return (self.model_extra or {}).get(key, default)

    def render_user(self, **values: str) -> str:
        """Fill `$name` placeholders; a placeholder the caller did not supply is a ConfigError."""
        try:
            return Template(self.user).substitute(values)
        except KeyError as exc:
            raise ConfigError(f"prompt {self.id!r}: unknown placeholder ${exc.args[0]}") from None


def load_prompt(name_or_path: str) -> PromptSpec:
    """A built-in prompt by name (`dialogue_acts`) or a YAML file by path."""
    path = Path(name_or_path)
    if not path.suffix:
        path = PROMPT_DIR / f"{name_or_path}.yaml"
    return load_yaml_model(path, PromptSpec)


def labels_from_yaml(path: str | Path, kind: str) -> dict[str, Any]:
    """Intents from an interaction-model YAML (`user_intents`, agent intent lists) or slots from a domain YAML."""
    data = read_yaml(path)
    if kind == "slots":
        names = data.get("slot_names") or data.get("slots")
        if not isinstance(names, (dict, list)) or not names:
            raise ConfigError(f"{path}: expected 'slot_names' (a domain file)")
        return {str(n): "" for n in names}
    user = data.get("user_intents")
    if not isinstance(user, dict) or not user:
        raise ConfigError(f"{path}: expected 'user_intents' (an interaction-model file)")
    agent: dict[str, str] = {}
    for spec in user.values():
        for name in (spec or {}).get("expected_agent_intents") or []:
            agent.setdefault(str(name), "")
    for key in ("agent_elicit_intents", "agent_set_retrieval", "agent_inquire_intents"):
        for name in data.get(key) or []:
            agent.setdefault(str(name), "")
    return {"USER": {str(n): "" for n in user}, "AGENT": agent}
