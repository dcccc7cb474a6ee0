"""A judge that rates each criterion of a rubric in its own LLM call (the shared engine of the
quality, CoRE, PEPPER and persuasiveness judges)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Mapping

from rubrics import Criterion, Rubric, load_rubric
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.errors import UserError
from usersimcrs.judges.base import Judge, JudgeOptions, Judgment, PlannedCall, gather_all
from usersimcrs.judges.components import criterion_chain
from usersimcrs.judges.estimate import expected_completion_tokens
from usersimcrs.judges.parsing import ScoreSpec, ask_score, model_key
from usersimcrs.judges.prompt_builder import ConversationView, criterion_messages

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.engine.context import RunContext


class RubricJudge(Judge):
    """Rates every criterion of `default_rubric` (or the configured rubric) separately."""

    name: ClassVar[str] = "rubric"
    default_rubric: ClassVar[str] = "quality"

    def __init__(self, config: JudgeOptions | None = None) -> None:
        super().__init__(config)
        self.rubric: Rubric = load_rubric(self.config.rubric or self.default_rubric)
        wanted = self.config.criteria
        self.criteria: list[Criterion] = (
            [self.rubric.criterion(n) for n in wanted] if wanted else list(self.rubric.criteria)
        )

    def names(self) -> list[str]:
        return [c.name for c in self.criteria]

    def component(self, criterion: Criterion) -> str:
        return criterion_chain(self.name, criterion.name)[0]

    def component_chains(self) -> dict[str, list[str]]:
        return {self.component(c): criterion_chain(self.name, c.name) for c in self.criteria}

    def name_components(self) -> dict[str, list[str]]:
        return {c.name: [self.component(c)] for c in self.criteria}

    def spec(self, criterion: Criterion) -> ScoreSpec:
        low, high = self.rubric.scale
        allowed = tuple(float(v) for v in criterion.allowed) if criterion.allowed is not None else None
        return ScoreSpec(low=low, high=high, allowed=allowed, text_chars=self.config.rationale_chars)

    def _judgment(self, view: ConversationView, criterion: Criterion, **fields) -> Judgment:
        return Judgment(
            conversation_id=view.conversation_id,
            judge=self.name,
            name=criterion.name,
            scale=(float(self.rubric.scale[0]), float(self.rubric.scale[1])),
            **fields,
        )

    def pending(self, existing: Mapping[str, Judgment] | None) -> list[Criterion]:
        done = set(existing or {})
        return [c for c in self.criteria if c.name not in done]

    async def score_criterion(self, view: ConversationView, criterion: Criterion, context: "RunContext") -> Judgment:
        """One criterion: a missing input is recorded without a call; otherwise ask with retries.

        A configuration error (no key, unknown backend) is raised: no criterion could be scored.
        """
        component = self.component(criterion)
        try:
            llm = context.llm(component)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure to get the LLM is recorded
            return self._judgment(view, criterion, value=None, status="llm_error", error=str(exc)[:500])
        missing = view.missing(criterion.inputs)
        if missing:
            return self._judgment(
                view, criterion, value=None, status="missing_input", model=model_key(llm),
                error=f"the conversation has no {', '.join(missing)}",
            )
        messages = criterion_messages(self.rubric, criterion, view)
        outcome = await ask_score(
            llm,
            messages,
            self.spec(criterion),
            component=component,
            max_attempts=self.config.max_attempts,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=self.config.seed,
        )
        return self._judgment(
            view,
            criterion,
            value=outcome.value,
            rationale=outcome.rationale,
            status=outcome.status,
            error=outcome.error,
            model=outcome.model,
            usage=outcome.usage,
            attempts=outcome.attempts,
            raw=None if outcome.status == "ok" else {"replies": outcome.replies},
        )

    async def score(
        self, dialogue: Dialogue, context: "RunContext", existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        view = ConversationView.from_dialogue(dialogue)
        tasks = [self.score_criterion(view, c, context) for c in self.pending(existing)]
        return await gather_all(*tasks)

    def plan(self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None) -> list[PlannedCall]:
        view = ConversationView.from_dialogue(dialogue)
        calls = []
        for criterion in self.pending(existing):
            if view.missing(criterion.inputs):
                continue
            calls.append(
                PlannedCall(
                    judge=self.name,
                    name=criterion.name,
                    component=self.component(criterion),
                    messages=criterion_messages(self.rubric, criterion, view),
                    max_tokens=self.config.max_tokens,
                    expected_completion_tokens=expected_completion_tokens(
                        self.config.max_tokens, self.config.rationale_chars
                    ),
                )
            )
        return calls
