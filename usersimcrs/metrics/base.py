"""The metric seam: a family of pure functions over one stored dialogue, plus shared resources."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, ClassVar, Mapping, TypeVar

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.metrics.options import MetricOptions

T = TypeVar("T")

Value = float | int | str | None


@dataclass
class MetricContext:
    """What a family may read besides the dialogue: options, the corpus horizon and loaded models.

    `shared`: the command's read-only resources; a command scoring several runs (a matrix) then loads a
    model such as the satisfaction classifier once, not once per run."""

    options: MetricOptions = field(default_factory=MetricOptions)
    horizon: int = 1
    shared: SharedResources = field(default_factory=SharedResources)

    def resource(self, key: str, factory: Callable[[], T]) -> T:
        """A resource built once per command (e.g. a classifier), not per dialogue or per run; read-only."""
        return self.shared.get(("metrics", key), factory)


def happened(dialogue: Dialogue) -> bool:
    """Whether the conversation ran to an end with at least one system turn (not failed, not empty).

    A conversation that did not happen has no length, reward, satisfaction or per-turn quality of
    its own: those metrics are missing on it. Only its outcome (`MetricFamily.kept_on_failure`)
    is measured: a conversation the CRS broke did not succeed and covered what it covered.
    """
    return dialogue.status == "ok" and any(u.participant == "AGENT" for u in dialogue.utterances)


class MetricFamily:
    """A group of related metrics; subclasses implement `per_conversation` and maybe `per_turn`.

    `failure_outcomes`: metric -> the value a failed conversation scores when the metric is
    measured on other conversations of the same set but not on it (e.g. success 0: a conversation
    the CRS broke did not succeed, even where only the end reason would have told).
    """

    name: str = "metric"
    failure_outcomes: ClassVar[Mapping[str, float]] = MappingProxyType({})

    def kept_on_failure(self, metric: str) -> bool:
        """Whether `metric` stays defined on a conversation that did not happen (an outcome); default no."""
        return False

    def kept_without_system_turn(self, metric: str) -> bool:
        """Whether `metric` is measured on a conversation that ended, without an error, before any system
        turn (a user who said one thing and left); default: the outcomes (`kept_on_failure`)."""
        return self.kept_on_failure(metric)

    def per_conversation(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, Value]:
        """Metric name -> value for one conversation (None when undefined, e.g. no targets)."""
        raise NotImplementedError

    def per_turn(self, dialogue: Dialogue, ctx: MetricContext) -> dict[str, list[float | None]]:
        """Metric name -> one value per system turn 1..horizon (None where undefined)."""
        return {}


def mean_or_none(values: list[float | None]) -> float | None:
    """Mean of the defined values, None when there are none."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
