"""Persuasiveness (iEvaLM): how convinced the simulated user is after the conversation (0-2).

If the user simulator already recorded its post-dialogue rating in
``dialogue.metadata["persuasiveness"]``, that rating is taken as is (no LLM call); otherwise an
LLM plays the user, with the targets and preferences of the profile, and gives the rating.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.judges.base import JudgeOptions, Judgment
from usersimcrs.judges.parsing import as_number
from usersimcrs.judges.prompt_builder import ConversationView, PromptLayout
from usersimcrs.judges.rubric_judge import RubricJudge

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

RECORDED_KEY = "persuasiveness"
RECORDED_MODEL = "simulator"


class PersuasivenessOptions(JudgeOptions):
    """Persuasiveness options: whether a rating recorded by the simulator is used."""

    use_recorded: bool = True


class PersuasivenessJudge(RubricJudge):
    """The simulated user's post-dialogue persuasiveness rating, recorded or asked for."""

    name = "persuasiveness"
    default_rubric = "persuasiveness"
    Config = PersuasivenessOptions
    config: PersuasivenessOptions

    def _recorded(self, dialogue: Dialogue, view: ConversationView) -> list[Judgment] | None:
        value: Any = dialogue.metadata.get(RECORDED_KEY)
        if not self.config.use_recorded or value is None:
            return None
        out = []
        for criterion in self.criteria:
            number = as_number(value.get("rating", value.get("score")) if isinstance(value, dict) else value)
            problem = "recorded rating is not a number" if number is None else self.spec(criterion).check(number)
            status = "ok" if problem is None else ("parse_error" if number is None else "out_of_range")
            out.append(
                self._judgment(
                    view,
                    criterion,
                    value=None if problem else number,
                    status=status,
                    error=problem,
                    rationale="rating recorded by the user simulator",
                    model=RECORDED_MODEL,
                    raw={"recorded": value},
                    mode=None,
                )
            )
        return out

    def accepts(self, stored: Judgment, model: str) -> bool:
        """A rating the simulator recorded is done whichever model would judge now."""
        return stored.model == RECORDED_MODEL or super().accepts(stored, model)

    async def score(
        self, dialogue: Dialogue, context: RunContext, existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        view = ConversationView.from_dialogue(dialogue)
        recorded = self._recorded(dialogue, view)
        if recorded is not None:
            done = set(existing or {})
            return [j for j in recorded if j.name not in done]
        return await super().score(dialogue, context, existing)

    def plan(
        self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None, layout: PromptLayout | None = None
    ):
        if self.config.use_recorded and dialogue.metadata.get(RECORDED_KEY) is not None:
            return []
        return super().plan(dialogue, existing, layout)
