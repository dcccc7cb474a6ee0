"""CoRE's multi-agent debate: four roles turn the twelve factor results into one 0-100 score.

Round 1: each role receives the conversation and the results (score + reason) of its own
factors and gives an overall "how willing would I be to use this system" score with a statement;
all statements go to a shared discussion buffer; if all roles gave the same score, the debate
stops. Later rounds: each role sees the buffer, reconsiders and argues where scores differ; the
debate stops on unanimity or at the round limit (4 by default). Roles within a round answer
independently of each other (the buffer grows once the round is complete). The final score is
the mean of the roles' scores. Each role may use its own model (component ``debate.<role>``).

A role whose reply cannot be used in a round keeps its previous valid score; a role that never
produced a valid score makes the final value ``None`` with that role's failure status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Mapping

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.usage import Usage
from usersimcrs.errors import UserError
from usersimcrs.judges.base import Judge, JudgeOptions, Judgment, PlannedCall, Status, gather_all
from usersimcrs.judges.components import role_chain
from usersimcrs.judges.core12 import Core12Judge
from usersimcrs.judges.estimate import COMPLETION_FILL, expected_completion_tokens
from usersimcrs.judges.parsing import ScoreOutcome, ScoreSpec, ask_score
from usersimcrs.judges.prompt_builder import ConversationView, build_messages, output_instructions
from usersimcrs.judges.prompt_text import load_judge_prompts
from usersimcrs.judges.rubrics import DebateRole, DebateRubric, load_debate

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

FACTOR_JUDGE = "core12"
OVERALL = "overall"


class DebateOptions(JudgeOptions):
    """Debate options; `factors` configures the CoRE factor judge that feeds it."""

    debate: str = Field("debate_roles", description="built-in debate file or a path to one")
    max_rounds: int | None = Field(None, ge=1, description="round limit (default: the debate file's, 4)")
    max_tokens: int = Field(256, ge=16)
    rationale_chars: int = Field(500, ge=20, description="longest statement the output schema allows")
    factors: JudgeOptions = Field(default_factory=JudgeOptions)


class DebateEntry(BaseModel):
    """One statement in the shared discussion buffer."""

    model_config = ConfigDict(extra="forbid")

    round: int
    evaluator: str
    score: float | None
    statement: str
    status: Status = "ok"
    error: str | None = None
    model: str = ""


class DebateJudge(Judge):
    """Multi-agent debate over the CoRE factor results; also scores any factor not yet scored."""

    name: ClassVar[str] = "debate"
    Config = DebateOptions
    config: DebateOptions

    def __init__(self, config: DebateOptions | None = None) -> None:
        super().__init__(config)
        self.debate: DebateRubric = load_debate(self.config.debate)
        self.factor_judge = Core12Judge(
            self.config.factors.model_copy(
                update={
                    "rubric": self.config.factors.rubric or self.debate.factor_rubric,
                    "prompts": self.config.factors.prompts or self.config.prompts,
                }
            )
        )
        self.debate.check_factors(self.factor_judge.rubric)
        self.max_rounds = self.config.max_rounds or self.debate.max_rounds
        self.prompts = load_judge_prompts(self.config.prompts)

    # ------------------------------------------------------------------ naming
    def names(self) -> list[str]:
        return [OVERALL]

    def all_names(self) -> list[str]:
        """The overall score and every CoRE factor it argues from."""
        return [OVERALL, *self.factor_judge.names()]

    def reused_judges(self) -> list[str]:
        return [FACTOR_JUDGE]

    def name_components(self) -> dict[str, list[str]]:
        return {**self.factor_judge.name_components(), OVERALL: [self.component(r) for r in self.debate.roles]}

    def component(self, role: DebateRole) -> str:
        return role_chain(role.name)[0]

    def component_chains(self) -> dict[str, list[str]]:
        chains = self.factor_judge.component_chains()
        chains.update({self.component(r): role_chain(r.name) for r in self.debate.roles})
        return chains

    def spec(self) -> ScoreSpec:
        low, high = self.debate.scale
        return ScoreSpec(
            low=low,
            high=high,
            integer=False,
            score_key="score",
            text_key="statement",
            text_chars=self.config.rationale_chars,
        )

    # ------------------------------------------------------------------ prompts
    def _instructions(self, role: DebateRole) -> list[str]:
        """The system part: what every role shares (task, scale) first, then the role's own text."""
        p = self.prompts
        low, high = self.debate.scale
        focus = "\n".join(p.text("debate_focus_item", item=item) for item in role.focus)
        anchors = "\n".join(
            p.text("debate_anchor", score=a.score, anchor=a.anchor)
            for a in sorted(self.debate.anchors, key=lambda a: a.score)
        )
        return [
            self.debate.task.strip(),
            p.text("debate_scale", low=low, high=high, anchors=anchors),
            p.text("debate_role", title=role.title, persona=role.persona.strip()),
            p.text("debate_focus", focus=focus),
        ]

    def role_messages(
        self,
        role: DebateRole,
        view: ConversationView,
        factors: Mapping[str, Judgment],
        buffer: list[DebateEntry],
        round_no: int,
    ):
        """The prompt of `role` in round `round_no`: conversation, its factor results, the discussion so far."""
        p = self.prompts
        low, high = self.debate.scale
        payload = view.payload(["recommendations", "ground_truth"])
        payload["factor_results"] = [self._factor_entry(name, factors.get(name)) for name in role.factors]
        payload["discussion"] = [
            {"round": e.round, "evaluator": e.evaluator, "score": e.score, "statement": e.statement} for e in buffer
        ]
        guidance = self.debate.first_round if round_no == 1 else self.debate.later_rounds
        request = "\n\n".join(
            [
                p.text("debate_round_request", round=round_no, max_rounds=self.max_rounds, guidance=guidance.strip()),
                output_instructions("score", "statement", low, high, p.debate_text_hint, p),
            ]
        )
        return build_messages(self._instructions(role), payload, request, p)

    def _factor_entry(self, name: str, judgment: Judgment | None) -> dict[str, Any]:
        title = self.factor_judge.rubric.criterion(name).title
        if judgment is None:
            return {"factor": title, "score": None, "reason": "not scored"}
        if judgment.value is None:
            return {"factor": title, "score": None, "reason": f"no usable score ({judgment.status})"}
        return {"factor": title, "score": judgment.value, "reason": judgment.rationale}

    # ------------------------------------------------------------------ the debate
    async def _role_turn(
        self,
        role: DebateRole,
        view: ConversationView,
        factors: Mapping[str, Judgment],
        buffer: list[DebateEntry],
        round_no: int,
        context: RunContext,
    ) -> tuple[DebateEntry, Usage]:
        component = self.component(role)
        try:
            llm = context.llm(component)
        except UserError:
            raise
        except Exception as exc:  # noqa: BLE001
            return DebateEntry(
                round=round_no, evaluator=role.name, score=None, statement="", status="llm_error", error=str(exc)[:500]
            ), Usage()
        outcome: ScoreOutcome = await ask_score(
            llm,
            self.role_messages(role, view, factors, buffer, round_no),
            self.spec(),
            component=component,
            max_attempts=self.config.max_attempts,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            seed=self.config.seed,
            prompts=self.prompts,
        )
        entry = DebateEntry(
            round=round_no,
            evaluator=role.name,
            score=outcome.value,
            statement=outcome.rationale,
            status=outcome.status,
            error=outcome.error,
            model=outcome.model,
        )
        return entry, outcome.usage

    async def run_debate(
        self, view: ConversationView, factors: Mapping[str, Judgment], context: RunContext
    ) -> Judgment:
        """Run the rounds and return the overall judgment with transcript, per-round scores and stop reason."""
        buffer: list[DebateEntry] = []
        rounds: list[dict[str, float | None]] = []
        latest: dict[str, DebateEntry] = {}
        usage = Usage()
        stop_reason = "round_limit"
        for round_no in range(1, self.max_rounds + 1):
            snapshot = list(buffer)
            results = await gather_all(
                *(self._role_turn(r, view, factors, snapshot, round_no, context) for r in self.debate.roles)
            )
            scores: dict[str, float | None] = {}
            for entry, spent in results:
                usage = usage + spent
                buffer.append(entry)
                scores[entry.evaluator] = entry.score
                previous = latest.get(entry.evaluator)
                if entry.score is not None or previous is None or previous.score is None:
                    latest[entry.evaluator] = entry
            rounds.append(scores)
            values = list(scores.values())
            if all(v is not None for v in values) and len(set(values)) == 1:
                stop_reason = "unanimous"
                break
        final_scores = {name: entry.score for name, entry in latest.items()}
        failed = [latest[r.name] for r in self.debate.roles if latest[r.name].score is None]
        low, high = self.debate.scale
        raw = {
            "stop_reason": stop_reason,
            "rounds": rounds,
            "final_scores": final_scores,
            "transcript": [e.model_dump() for e in buffer],
            "max_rounds": self.max_rounds,
            "models": {e.evaluator: e.model for e in buffer if e.model},
            "factors": {name: j.value for name, j in factors.items()},
        }
        models = sorted({e.model for e in buffer if e.model})
        if failed:
            first = failed[0]
            return Judgment(
                conversation_id=view.conversation_id,
                judge=self.name,
                name=OVERALL,
                value=None,
                scale=(float(low), float(high)),
                status=first.status,
                error=f"role {first.evaluator} gave no usable score: {first.error}",
                model=",".join(models),
                usage=usage,
                attempts=len(rounds),
                raw=raw,
            )
        role_scores = [score for r in self.debate.roles if (score := final_scores[r.name]) is not None]
        mean = sum(role_scores) / len(role_scores)  # every role scored: a failed one returned above
        summary = "; ".join(f"{r.name}={final_scores[r.name]:g}" for r in self.debate.roles)
        return Judgment(
            conversation_id=view.conversation_id,
            judge=self.name,
            name=OVERALL,
            value=mean,
            scale=(float(low), float(high)),
            status="ok",
            rationale=f"mean of the roles after {len(rounds)} round(s), {stop_reason}: {summary}",
            model=",".join(models),
            usage=usage,
            attempts=len(rounds),
            raw=raw,
        )

    async def score(
        self, dialogue: Dialogue, context: RunContext, existing: Mapping[str, Judgment] | None = None
    ) -> list[Judgment]:
        """Score missing factors first (returned too), then debate unless `overall` exists already.

        `existing` maps names to this conversation's stored judgments; factor names refer to the
        CoRE factor judge's records and ``overall`` to the debate's.
        """
        existing = dict(existing or {})
        view = ConversationView.from_dialogue(dialogue)
        factor_existing = {k: v for k, v in existing.items() if k != OVERALL}
        new_factors = await self.factor_judge.score(dialogue, context, factor_existing)
        factors = {**factor_existing, **{j.name: j for j in new_factors}}
        out = list(new_factors)
        if OVERALL not in existing:
            out.append(await self.run_debate(view, factors, context))
        return out

    def plan_in(
        self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None, context: RunContext
    ) -> list[PlannedCall]:
        """`plan` with the factor calls planned for the factor judge's LLMs (their prompt layout)."""
        factors = self.factor_judge.plan_in(
            dialogue, {k: v for k, v in (existing or {}).items() if k != OVERALL}, context
        )
        return factors + [c for c in self.plan(dialogue, existing) if c.judge == self.name]

    def plan(self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None) -> list[PlannedCall]:
        """Factor calls still needed plus every role in every round up to the limit (an upper bound)."""
        existing = dict(existing or {})
        calls = self.factor_judge.plan(dialogue, {k: v for k, v in existing.items() if k != OVERALL})
        if OVERALL in existing:
            return calls
        view = ConversationView.from_dialogue(dialogue)
        factor_chars = int(self.factor_judge.config.rationale_chars * COMPLETION_FILL)
        factors = {
            c.name: Judgment(
                conversation_id=view.conversation_id,
                judge=FACTOR_JUDGE,
                name=c.name,
                value=2.0,
                scale=(0.0, 4.0),
                rationale="x" * factor_chars,
            )
            for c in self.factor_judge.rubric.criteria
        }
        statement_chars = int(self.config.rationale_chars * COMPLETION_FILL)
        expected = expected_completion_tokens(self.config.max_tokens, self.config.rationale_chars)
        buffer: list[DebateEntry] = []
        for round_no in range(1, self.max_rounds + 1):
            for role in self.debate.roles:
                calls.append(
                    PlannedCall(
                        judge=self.name,
                        name=f"{OVERALL}:{role.name}:round{round_no}",
                        component=self.component(role),
                        messages=self.role_messages(role, view, factors, buffer, round_no),
                        max_tokens=self.config.max_tokens,
                        expected_completion_tokens=expected,
                        note="upper bound: assumes no early unanimity",
                    )
                )
            buffer = buffer + [
                DebateEntry(round=round_no, evaluator=r.name, score=50.0, statement="x" * statement_chars)
                for r in self.debate.roles
            ]
        return calls
