"""A judge with CRSArena-Eval's aspects and scales (rubric `crsarena_eval`): relevance and
interestingness of every SYSTEM turn, and the dialogue aspects of the whole conversation.

Its judgments export to a CRSArena-Eval run file (`usersimcrs export-run`) that any LLM can fill
and that compares directly with the published baselines. Turn scores are named
``<aspect>@<turn_ind>``. Every call of a conversation, turn or dialogue aspect, sends the same
system text and the same data block (the whole conversation) and differs only in the closing
request, so a serving stack's prefix cache computes the conversation once (the LLM usage summary
counts the reused characters; `manifest.json` keeps them under ``judges.prefix_reuse.crsarena``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar, Mapping

from usersimcrs.core.crsarena_eval import split_score_name, turn_index, turn_score_name
from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.judges.base import Judgment, PlannedCall, gather_all
from usersimcrs.judges.estimate import expected_completion_tokens
from usersimcrs.judges.prompt_builder import ConversationView, PromptLayout, turn_messages
from usersimcrs.judges.rubric_judge import RubricJudge
from usersimcrs.judges.rubrics import Criterion

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


def system_turns(dialogue: Dialogue) -> list[tuple[int, int]]:
    """(number in the judge's data block, turn index) of every SYSTEM turn."""
    return [(i + 1, turn_index(i, u)) for i, u in enumerate(dialogue.utterances) if u.participant == AGENT]


class CRSArenaJudge(RubricJudge):
    """CRSArena-Eval's nine aspects: two per SYSTEM turn, seven per dialogue."""

    name: ClassVar[str] = "crsarena"
    default_rubric: ClassVar[str] = "crsarena_eval"
    min_system_turns: ClassVar[int] = 1

    @property
    def turn_criteria(self) -> list[Criterion]:
        return [c for c in self.criteria if c.level == "turn"]

    @property
    def dialogue_criteria(self) -> list[Criterion]:
        return [c for c in self.criteria if c.level == "dialogue"]

    def pending(self, existing: Mapping[str, Judgment] | None) -> list[Criterion]:
        """The dialogue criteria not stored yet (turn criteria are pending per turn, see `score`)."""
        return [c for c in super().pending(existing) if c.level == "dialogue"]

    def names_for(self, dialogue: Dialogue) -> list[str]:
        turns = system_turns(dialogue)
        return [c.name for c in self.dialogue_criteria] + [
            turn_score_name(c.name, t) for c in self.turn_criteria for _, t in turns
        ]

    def model_for(self, name: str, resolve: Callable[[str], str]) -> str:
        return super().model_for(split_score_name(name)[0], resolve)

    def scale_of(self, criterion: Criterion) -> tuple[float, float]:
        """The criterion's own scale (relevance 0-3, efficiency 0-1, ...), as the run file reads it."""
        scores = self.rubric.valid_scores(criterion)
        return (float(min(scores)), float(max(scores)))

    async def score(
        self, dialogue: Dialogue, context: RunContext, existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        view = ConversationView.from_dialogue(dialogue)
        done = set(existing or {})
        pending = self.pending(existing)
        layout = self.layout
        if self.criteria:
            try:
                layout = self.layout_for(view, context.llm(self.component(self.criteria[0])))
            except Exception:  # noqa: BLE001 - score_criterion records (or raises) the same failure
                pass
        calls = []
        if self.config.batch and pending:
            calls.append(self.score_batch(view, pending, context))
        else:
            calls += [_one(self.score_criterion(view, c, context, layout)) for c in pending]
        for criterion in self.turn_criteria:
            for number, turn in system_turns(dialogue):
                name = turn_score_name(criterion.name, turn)
                if name not in done:
                    calls.append(_one(self.score_criterion(view, criterion, context, layout, (number, name))))
        results = await gather_all(*calls)
        return [j for part in results for j in part]

    def plan(
        self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None, layout: PromptLayout | None = None
    ) -> list[PlannedCall]:
        done = set(existing or {})
        calls = super().plan(dialogue, existing, layout)  # the dialogue criteria (see `pending`)
        view = ConversationView.from_dialogue(dialogue)
        expected = expected_completion_tokens(self.config.max_tokens, self.config.rationale_chars)
        for criterion in self.turn_criteria:
            for number, turn in system_turns(dialogue):
                name = turn_score_name(criterion.name, turn)
                if name in done:
                    continue
                calls.append(
                    PlannedCall(
                        judge=self.name,
                        name=name,
                        component=self.component(criterion),
                        messages=turn_messages(self.rubric, criterion, view, number, layout=layout or self.layout),
                        max_tokens=self.config.max_tokens,
                        expected_completion_tokens=expected,
                    )
                )
        return calls


async def _one(call) -> list[Judgment]:
    return [await call]
