"""The `metrics:` section of a run or matrix config and the validity gate (`RunFolder` names the metric files)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.validity import ValidityOptions


class MetricsConfig(BaseModel):
    """The `metrics:` section of a run or matrix config (all optional)."""

    model_config = ConfigDict(extra="forbid")

    options: MetricOptions = Field(default_factory=MetricOptions)
    validity: ValidityOptions = Field(default_factory=ValidityOptions)
    bootstrap_resamples: int = Field(2000, ge=100)
    max_failure_rate: float | None = Field(None, ge=0, le=1)
    max_invalid_rate: float | None = Field(None, ge=0, le=1)


def gate_messages(rates: dict[str, float | None], config: MetricsConfig) -> list[str]:
    """One line per exceeded threshold (empty when the run passes the gate or has no conversations)."""
    messages = []
    errors, valid = rates.get("error"), rates.get("valid")
    if config.max_failure_rate is not None and errors is not None and errors > config.max_failure_rate:
        messages.append(f"error rate {errors:.1%} exceeds the allowed {config.max_failure_rate:.1%}")
    if valid is None and (config.max_failure_rate is not None or config.max_invalid_rate is not None):
        messages.append("no conversations to check")
    invalid = None if valid is None else 1.0 - valid
    if config.max_invalid_rate is not None and invalid is not None and invalid > config.max_invalid_rate:
        messages.append(f"invalid rate {invalid:.1%} exceeds the allowed {config.max_invalid_rate:.1%}")
    return messages
