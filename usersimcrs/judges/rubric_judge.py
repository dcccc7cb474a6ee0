"""A judge that rates each criterion of a rubric in its own LLM call, or all of them in one
(`batch`), the shared engine of the quality, CoRE, PEPPER and persuasiveness judges.

Every call of one conversation starts with the same system text and data block and differs only
in its closing request, so a serving stack with prefix caching computes the shared part once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Mapping

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.usage import Usage
from usersimcrs.errors import UserError
from usersimcrs.judges.base import Judge, JudgeOptions, Judgment, PlannedCall, gather_all
from usersimcrs.judges.components import criterion_chain
from usersimcrs.judges.estimate import expected_completion_tokens, prompt_tokens
from usersimcrs.judges.parsing import BatchSpec, ScoreSpec, ask_batch, ask_score, model_key
from usersimcrs.judges.prompt_builder import (
    ConversationView,
    PromptLayout,
    batch_messages,
    criterion_messages,
    turn_messages,
)
from usersimcrs.judges.prompt_text import load_judge_prompts
from usersimcrs.judges.rubrics import Criterion, Rubric, load_rubric

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.llm.base import LLM
    from usersimcrs.runtime.context import RunContext

LOCAL_WINDOW_BACKENDS = ("llamacpp", "ollama")
"""Backends serving a model with a fixed context window (`llm.n_ctx`): a prompt too long for it is
refused (llama.cpp) or cut from the start (Ollama), so the judge then uses the compact layout."""


class RubricJudge(Judge):
    """Rates every criterion of `default_rubric` (or the configured rubric) in its own call, or all of
    them in one call per model with `batch`; each judgment records which (`mode`)."""

    name: ClassVar[str] = "rubric"
    default_rubric: ClassVar[str] = "quality"

    def __init__(self, config: JudgeOptions | None = None) -> None:
        super().__init__(config)
        self.rubric: Rubric = load_rubric(self.config.rubric or self.default_rubric)
        wanted = self.config.criteria
        self.criteria: list[Criterion] = (
            [self.rubric.criterion(n) for n in wanted] if wanted else list(self.rubric.criteria)
        )
        self.prompts = load_judge_prompts(self.config.prompts)
        self.layout = PromptLayout(
            criteria=tuple(self.criteria), shared_rubric=self.config.shared_rubric, prompts=self.prompts
        )
        self.compact_layout = PromptLayout(criteria=tuple(self.criteria), shared_rubric=False, prompts=self.prompts)
        self.mode = "batched" if self.config.batch else "per_criterion"

    def names(self) -> list[str]:
        return [c.name for c in self.criteria]

    def component(self, criterion: Criterion) -> str:
        return criterion_chain(self.name, criterion.name)[0]

    def batch_component(self) -> str:
        """The component a batched call is accounted under (the judge's level of the chain)."""
        return f"judge.{self.name}"

    def component_chains(self) -> dict[str, list[str]]:
        return {self.component(c): criterion_chain(self.name, c.name) for c in self.criteria}

    def name_components(self) -> dict[str, list[str]]:
        return {c.name: [self.component(c)] for c in self.criteria}

    def spec(self, criterion: Criterion) -> ScoreSpec:
        low, high = self.rubric.scale
        allowed = tuple(float(v) for v in criterion.allowed) if criterion.allowed is not None else None
        return ScoreSpec(low=low, high=high, allowed=allowed, text_chars=self.config.rationale_chars)

    def scale_of(self, criterion: Criterion) -> tuple[float, float]:
        """The scale recorded on a criterion's judgments (the rubric's)."""
        return (float(self.rubric.scale[0]), float(self.rubric.scale[1]))

    def _judgment(self, view: ConversationView, criterion: Criterion, **fields) -> Judgment:
        return Judgment(
            conversation_id=view.conversation_id,
            judge=self.name,
            scale=self.scale_of(criterion),
            **{"name": criterion.name, "mode": self.mode, **fields},
        )

    def pending(self, existing: Mapping[str, Judgment] | None) -> list[Criterion]:
        done = set(existing or {})
        return [c for c in self.criteria if c.name not in done]

    def layout_for(self, view: ConversationView, llm: LLM) -> PromptLayout:
        """The configured layout, or the compact one when a shared-rubric prompt of this conversation
        would not fit the context window of a local model (llama.cpp, Ollama: `n_ctx`)."""
        return self.layout_in_window(view, context_window(llm))

    def layout_in_window(self, view: ConversationView, window: int | None) -> PromptLayout:
        """`layout_for` given the context window itself (None: no limit)."""
        if not self.layout.shared_rubric or window is None:
            return self.layout
        longest = max(
            prompt_tokens(criterion_messages(self.rubric, c, view, layout=self.layout)) for c in self.criteria
        )
        return self.layout if longest + self.config.max_tokens <= window else self.compact_layout

    async def score_criterion(
        self,
        view: ConversationView,
        criterion: Criterion,
        context: RunContext,
        layout: PromptLayout | None = None,
        turn: tuple[int, str] | None = None,
    ) -> Judgment:
        """One criterion: a missing input is recorded without a call; otherwise ask with retries.

        `turn`: (number of the SYSTEM turn in the data, judgment name) for a per-turn criterion.
        A configuration error (no key, unknown backend) is raised: no criterion could be scored.
        """
        component = self.component(criterion)
        named = {} if turn is None else {"name": turn[1]}
        try:
            llm = context.llm(component)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001 - any other failure to get the LLM is recorded
            return self._judgment(view, criterion, value=None, status="llm_error", error=str(exc)[:500], **named)
        missing = view.missing(criterion.inputs)
        if missing:
            return self._judgment(
                view,
                criterion,
                value=None,
                status="missing_input",
                model=model_key(llm),
                error=f"the conversation has no {', '.join(missing)}",
                **named,
            )
        layout = layout or self.layout_for(view, llm)
        messages = (
            criterion_messages(self.rubric, criterion, view, layout=layout)
            if turn is None
            else turn_messages(self.rubric, criterion, view, turn[0], layout=layout)
        )
        outcome = await ask_score(
            llm,
            messages,
            self.spec(criterion),
            component=component,
            max_attempts=self.config.max_attempts,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=self.config.seed,
            prompts=self.prompts,
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
            **named,
        )

    async def score_batch(
        self, view: ConversationView, criteria: list[Criterion], context: RunContext
    ) -> list[Judgment]:
        """All of `criteria` in one structured call per LLM (criteria sharing a model share a call);
        a missing input is recorded without a call, a missing or invalid part is None with its status."""
        out: list[Judgment] = []
        groups: dict[int, tuple[LLM, list[Criterion]]] = {}
        for criterion in criteria:
            try:
                llm = context.llm(self.component(criterion))
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - any other failure to get the LLM is recorded
                out.append(self._judgment(view, criterion, value=None, status="llm_error", error=str(exc)[:500]))
                continue
            missing = view.missing(criterion.inputs)
            if missing:
                out.append(
                    self._judgment(
                        view,
                        criterion,
                        value=None,
                        status="missing_input",
                        model=model_key(llm),
                        error=f"the conversation has no {', '.join(missing)}",
                    )
                )
                continue
            groups.setdefault(id(getattr(llm, "slot", llm)), (llm, []))[1].append(criterion)
        batches = await gather_all(*(self._one_batch(view, llm, group) for llm, group in groups.values()))
        for judgments in batches:
            out.extend(judgments)
        order = {c.name: i for i, c in enumerate(criteria)}
        return sorted(out, key=lambda j: order[j.name])

    def batch_max_tokens(self, count: int) -> int:
        """Completion cap of a batched call: the per-criterion cap for each criterion."""
        return self.config.max_tokens * max(1, count)

    async def _one_batch(self, view: ConversationView, llm: LLM, criteria: list[Criterion]) -> list[Judgment]:
        batch = BatchSpec({c.name: self.spec(c) for c in criteria})
        outcome = await ask_batch(
            llm,
            batch_messages(self.rubric, criteria, view, layout=self.layout),
            batch,
            component=self.batch_component(),
            max_attempts=self.config.max_attempts,
            temperature=self.config.temperature,
            max_tokens=self.batch_max_tokens(len(criteria)),
            seed=self.config.seed,
            prompts=self.prompts,
        )
        shares = split_usage(outcome.usage, len(criteria))
        judgments = []
        for criterion, usage in zip(criteria, shares):
            parsed = outcome.results[criterion.name]
            ok = parsed.status == "ok"
            judgments.append(
                self._judgment(
                    view,
                    criterion,
                    value=parsed.value,
                    rationale=parsed.rationale,
                    status=parsed.status,
                    error=parsed.error,
                    model=outcome.model,
                    usage=usage,
                    attempts=outcome.attempts,
                    raw=None if ok else {"replies": outcome.replies},
                )
            )
        return judgments

    async def score(
        self, dialogue: Dialogue, context: RunContext, existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        view = ConversationView.from_dialogue(dialogue)
        if self.config.batch:
            pending = self.pending(existing)
            return await self.score_batch(view, pending, context) if pending else []
        pending = self.pending(existing)
        layout = self.layout
        if pending:
            try:
                layout = self.layout_for(view, context.llm(self.component(pending[0])))
            except Exception:  # noqa: BLE001 - score_criterion records (or raises) the same failure
                pass
        return await gather_all(*(self.score_criterion(view, c, context, layout) for c in pending))

    def plan(
        self,
        dialogue: Dialogue,
        existing: Mapping[str, Judgment] | None = None,
        layout: PromptLayout | None = None,
    ) -> list[PlannedCall]:
        """The calls `score` would make; `layout` is the prompt layout of per-criterion calls (default:
        the configured one; `plan_in` passes the one the judging's LLM would get)."""
        view = ConversationView.from_dialogue(dialogue)
        expected = expected_completion_tokens(self.config.max_tokens, self.config.rationale_chars)
        todo = [c for c in self.pending(existing) if not view.missing(c.inputs)]
        if self.config.batch:
            if not todo:
                return []
            return [
                PlannedCall(
                    judge=self.name,
                    name="+".join(c.name for c in todo),
                    component=self.batch_component(),
                    messages=batch_messages(self.rubric, todo, view, layout=self.layout),
                    max_tokens=self.batch_max_tokens(len(todo)),
                    expected_completion_tokens=expected * len(todo),
                    note="batched: one call for all criteria",
                )
            ]
        return [
            PlannedCall(
                judge=self.name,
                name=criterion.name,
                component=self.component(criterion),
                messages=criterion_messages(self.rubric, criterion, view, layout=layout or self.layout),
                max_tokens=self.config.max_tokens,
                expected_completion_tokens=expected,
            )
            for criterion in todo
        ]

    def plan_in(
        self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None, context: RunContext
    ) -> list[PlannedCall]:
        """The calls `score` would make with the LLMs of `context`: a local model whose window is too small
        for the shared-rubric prompt gets the compact layout, as in `score`."""
        window = configured_window(context, self.component(self.criteria[0])) if self.criteria else None
        layout = self.layout_in_window(ConversationView.from_dialogue(dialogue), window)
        return self.plan(dialogue, existing, layout=layout)


def configured_window(context: RunContext, component: str) -> int | None:
    """The context window the component's LLM would have, read from its config (no backend is built)."""
    component_config = getattr(context.llms, "component_config", None)
    if component_config is None:
        return None
    config = component_config(component)
    return config.n_ctx if config.backend in LOCAL_WINDOW_BACKENDS else None


def context_window(llm: LLM) -> int | None:
    """The context window a prompt must fit, for local backends whose window is configured (`n_ctx`)."""
    if getattr(llm, "backend", None) not in LOCAL_WINDOW_BACKENDS:
        return None
    return getattr(getattr(llm, "config", None), "n_ctx", None)


def split_usage(usage: Usage, parts: int) -> list[Usage]:
    """`usage` of one batched request spread over its `parts` judgments so that the sums stay exact:
    tokens evenly (the remainder on the first), the calls on the first judgment."""
    parts = max(1, parts)
    out = []
    for i in range(parts):
        first = i == 0
        out.append(
            Usage(
                prompt_tokens=usage.prompt_tokens // parts + (usage.prompt_tokens % parts if first else 0),
                completion_tokens=usage.completion_tokens // parts + (usage.completion_tokens % parts if first else 0),
                calls=usage.calls if first else 0,
                cache_hits=usage.cache_hits if first else 0,
                retries=usage.retries if first else 0,
                errors=usage.errors if first else 0,
            )
        )
    return out
