"""Settings shared by the rule-based metrics (cut-offs, horizons, accept intents, reward table)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class RewardConfig(BaseModel):
    """DialogueKit-style reward: start from full points, subtract penalties and a cost per user turn."""

    model_config = ConfigDict(extra="forbid")

    full_set_points: float = 20.0
    intents: dict[str, float] = Field(
        default_factory=dict, description="user intent -> penalty when the dialogue never shows it"
    )
    repeat_penalty: float = 1.0
    cost: float = 1.0


class MetricOptions(BaseModel):
    """What the metric families compute; the defaults follow PEPPER, CoRE and DialogueKit."""

    model_config = ConfigDict(extra="forbid")

    recall_ks: list[int] = Field(default_factory=lambda: [1, 5, 10, 20, 50])
    coverage_ks: list[int] = Field(default_factory=lambda: [5, 10, 20, 50])
    horizon: int | None = Field(
        None, ge=1, description="turns T for PC_T and PCIR_avg; None = the longest dialogue in the set"
    )
    hit_within: list[int] = Field(default_factory=lambda: [1, 3, 5])
    hit_k: int | None = Field(None, ge=1, description="list cut-off for 'hit within N turns'; None = whole list")
    jaccard_k: int | None = Field(None, ge=1, description="compare only the top-k of consecutive lists")
    accept_intents: list[str] = Field(
        default_factory=lambda: ["ACCEPT", "ACC"],
        description="an act whose intent, split at . _ -, has one of these parts is an acceptance",
    )
    success_end_reasons: list[str] = Field(default_factory=lambda: ["target_accepted", "target_hit"])
    failure_end_reasons: list[str] = Field(
        default_factory=lambda: ["agenda_done", "user_gave_up", "max_rounds_no_hit"],
        description="end reasons that show the user did not accept (agenda and target-biased stop rules); "
        "with the success reasons they are the end reasons that make success measurable without acts",
    )
    reward: RewardConfig = Field(default_factory=RewardConfig)
    satisfaction: bool = True
    families: list[str] | None = Field(None, description="metric families to compute; None = all registered")
