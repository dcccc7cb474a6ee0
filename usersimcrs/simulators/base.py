"""The simulator seam: open a conversation (or not) and answer each CRS turn, or stop.

The engine creates a fresh simulator per conversation, so no state leaks between
conversations. All randomness comes from `self.rng`, seeded from the conversation seed.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel, ConfigDict

from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.profile import UserProfile
from usersimcrs.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class Stop(BaseModel):
    """The simulator ends the conversation; `reason` becomes the dialogue's end_reason.

    `utterance`, when given, is a closing user turn recorded before stopping.
    """

    model_config = ConfigDict(extra="forbid")

    reason: str
    utterance: Utterance | None = None


class SimulatorConfig(BaseModel):
    """Base of every simulator's options; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")

    type: str

    def llm_components(self) -> list[str]:
        """The LLM components this simulator calls (`context.llm(name)`), whose servers a command checks
        before its first conversation; a simulator without an LLM calls none."""
        return []


class UserSimulator(ABC):
    """A simulated user playing one profile in one conversation."""

    Config: ClassVar[type[SimulatorConfig]] = SimulatorConfig

    def __init__(self, config: SimulatorConfig, context: RunContext, profile: UserProfile, seed: int) -> None:
        self.config = config
        self.context = context
        self.profile = profile
        self.seed = seed
        self.rng = random.Random(seed)

    async def start(self) -> Utterance | None:
        """The opening user utterance, or None to let the CRS speak first."""
        return None

    @abstractmethod
    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        """The next user turn after the CRS's last reply, or Stop."""

    def finish(self, dialogue: Dialogue) -> None:  # noqa: B027 - optional hook
        """Called once the conversation ended; may add post-dialogue fields (e.g. a rating)."""


simulators: Registry[type[UserSimulator]] = Registry(
    "simulators",
    {
        "agenda": "usersimcrs.simulators.agenda.simulator:AgendaSimulator",
        "llm_single": "usersimcrs.simulators.llm_single:SinglePromptSimulator",
        "llm_dual": "usersimcrs.simulators.llm_dual:DualPromptSimulator",
        "target_free": "usersimcrs.simulators.target_free:TargetFreeSimulator",
        "target_biased": "usersimcrs.simulators.target_biased:TargetBiasedSimulator",
    },
)
