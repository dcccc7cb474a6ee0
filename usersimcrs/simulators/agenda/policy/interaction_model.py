"""Interaction models in the anchor toolkit's YAML schema: which intents exist and how they relate."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from usersimcrs.core.yaml_io import load_yaml_model

DEFAULT_INTERACTION_MODEL = Path(__file__).resolve().parents[1] / "data" / "interaction_model_cir.yaml"


class UserIntentSpec(BaseModel):
    """One user intent: the agent intents it may answer, and its preference semantics."""

    model_config = ConfigDict(extra="allow")

    expected_agent_intents: list[str] | None = None
    preference_contingent: str | None = None
    remove_user_preference: bool = False


class InteractionModel(BaseModel):
    """Intent vocabulary and intent roles (required intents, elicitation, set retrieval, inquiry)."""

    model_config = ConfigDict(extra="allow")

    name: str = "interaction_model"
    description: str | None = None
    required_intents: dict[str, str | None] = Field(default_factory=dict)
    user_intents: dict[str, UserIntentSpec | None] = Field(default_factory=dict)
    agent_elicit_intents: list[str] = Field(default_factory=list)
    agent_set_retrieval: list[str] = Field(default_factory=list)
    agent_inquire_intents: list[str] = Field(default_factory=list)
    agent_other_intents: list[str] = Field(default_factory=list)

    @field_validator("required_intents", "user_intents", mode="before")
    @classmethod
    def _yaml_booleans(cls, value: Any) -> Any:
        """YAML 1.1 reads the intents YES/NO as booleans; turn them back into intent names."""
        if not isinstance(value, dict):
            return value
        return {_intent_name(k): (_intent_name(v) if isinstance(v, bool) else v) for k, v in value.items()}

    @field_validator(
        "agent_elicit_intents", "agent_set_retrieval", "agent_inquire_intents", "agent_other_intents", mode="before"
    )
    @classmethod
    def _yaml_boolean_lists(cls, value: Any) -> Any:
        return [_intent_name(v) for v in value] if isinstance(value, list) else value

    def intent(self, role: str, fallback: str) -> str:
        """The intent playing `role` (e.g. INTENT_LIKE), or `fallback` when the model leaves it empty."""
        return self.required_intents.get(role) or fallback

    def user_intent_names(self) -> list[str]:
        """Every user intent of the model, required ones included."""
        names = dict.fromkeys(self.user_intents)
        for value in self.required_intents.values():
            if value:
                names.setdefault(value, None)
        return list(names)

    def agent_intent_names(self) -> list[str]:
        """Every agent intent the model mentions."""
        names: dict[str, None] = {}
        for group in (self.agent_elicit_intents, self.agent_set_retrieval, self.agent_inquire_intents):
            names.update(dict.fromkeys(group))
        for spec in self.user_intents.values():
            if spec and spec.expected_agent_intents:
                names.update(dict.fromkeys(spec.expected_agent_intents))
        names.update(dict.fromkeys(self.agent_other_intents))
        return list(names)

    def expected_agent_intents(self, user_intent: str) -> list[str]:
        spec = self.user_intents.get(user_intent)
        return list(spec.expected_agent_intents or []) if spec else []

    @property
    def accept_intent(self) -> str:
        """The intent that accepts a recommendation (NOTE.ACCEPT in CIR, the like intent otherwise)."""
        if self.required_intents.get("INTENT_ACCEPT"):
            return str(self.required_intents["INTENT_ACCEPT"])
        if "NOTE.ACCEPT" in self.user_intents:
            return "NOTE.ACCEPT"
        return self.intent("INTENT_LIKE", "NOTE.LIKE")

    @property
    def item_info_intent(self) -> str:
        """The intent that asks about an attribute of an item (a request of the information need)."""
        if self.required_intents.get("INTENT_ITEM_INFO"):
            return str(self.required_intents["INTENT_ITEM_INFO"])
        if "INQUIRE.ITEMINFO" in self.user_intents:
            return "INQUIRE.ITEMINFO"
        return self.intent("INTENT_INQUIRE", "INQUIRE")


def _intent_name(value: Any) -> Any:
    if value is True:
        return "YES"
    if value is False:
        return "NO"
    return value


def load_interaction_model(path: str | Path | None = None) -> InteractionModel:
    """Read an interaction-model YAML (the built-in CIR model when `path` is None)."""
    source = Path(path) if path else DEFAULT_INTERACTION_MODEL
    return load_yaml_model(source, InteractionModel)
