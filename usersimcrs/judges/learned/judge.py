"""The learned evaluator as a judge: `usersimcrs judge RUN --judge learned --model MODEL`.

It calls no LLM: each conversation gets the model's dialogue-aspect scores and one score per
assistant turn and turn aspect (named ``relevance@3``, 3 = the turn's index), written to the run's
judgments like any judge's. The judgments' `model` is ``learned:<first 12 hex digits of the model
file's SHA-256>``, so the scores of two models live side by side and a re-run with the same model
resumes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping

from pydantic import Field

from usersimcrs.core.crsarena_eval import split_score_name, turn_index, turn_score_name
from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.errors import ConfigError
from usersimcrs.judges.base import Judge, JudgeOptions, Judgment, PlannedCall
from usersimcrs.judges.learned.model import Evaluator

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.judges.learned.model import Evaluator
    from usersimcrs.runtime.context import RunContext


class LearnedJudgeOptions(JudgeOptions):
    """The learned judge's options: the model file (the command line's --model)."""

    model: str | None = Field(default=None, description="model file from `usersimcrs evaluator train`")
    items: str | None = Field(default=None, description="the item catalogue, when not where the model was trained")


class LearnedJudge(Judge):
    """Scores CRSArena-Eval's aspects with a trained model; no LLM, no network."""

    name: ClassVar[str] = "learned"
    Config: ClassVar[type[JudgeOptions]] = LearnedJudgeOptions
    uses_llm: ClassVar[bool] = False
    min_system_turns: ClassVar[int] = 1

    def __init__(self, config: JudgeOptions | None = None) -> None:
        super().__init__(config)
        path = getattr(self.config, "model", None)
        if not path:
            raise ConfigError("judge learned: give the model file with --model MODEL (usersimcrs evaluator train)")

        self.evaluator: Evaluator = Evaluator.load(path, getattr(self.config, "items", None))
        self.model_key = "learned:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
        aspects = self.evaluator.model.aspects
        wanted = self.config.criteria
        known = [a.name for a in aspects]
        if wanted:
            unknown = [c for c in wanted if c not in known]
            if unknown:
                raise ConfigError(f"judge learned: the model has no aspect {unknown[0]!r}; known: {', '.join(known)}")
        self.aspects = [a for a in aspects if not wanted or a.name in wanted]

    def names(self) -> list[str]:
        return [a.name for a in self.aspects]

    def names_for(self, dialogue: Dialogue) -> list[str]:
        turns = [turn_index(i, u) for i, u in enumerate(dialogue.utterances) if u.participant == AGENT]
        out = [a.name for a in self.aspects if a.level == "dialogue"]
        for a in self.aspects:
            if a.level == "turn":
                out += [turn_score_name(a.name, t) for t in turns]
        return out

    def model_for(self, name: str, resolve: Callable[[str], str]) -> str:
        return self.model_key

    async def score(
        self, dialogue: Dialogue, context: RunContext, existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        prediction = self.evaluator.predict([dialogue])[0]
        values: dict[str, float] = dict(prediction.dial_level_pred)
        for turn in prediction.turns:
            values.update({turn_score_name(k, turn.turn_ind): v for k, v in turn.turn_level_pred.items()})
        scales = {a.name: (a.low, a.high) for a in self.aspects}
        done = set(existing or {})
        out = []
        for name in self.names_for(dialogue):
            if name in done:
                continue
            base, _ = split_score_name(name)
            value = values.get(name)
            out.append(
                Judgment(
                    conversation_id=dialogue.conversation_id,
                    judge=self.name,
                    name=name,
                    value=value,
                    scale=scales[base],
                    status="ok" if value is not None else "missing_input",
                    error=None if value is not None else "no prediction for this turn",
                    model=self.model_key,
                )
            )
        return out

    def plan(self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None) -> list[PlannedCall]:
        return []
