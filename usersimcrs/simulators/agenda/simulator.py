"""The agenda-based simulator (``type: agenda``): NLU -> agenda policy -> NLG, one instance per conversation."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from usersimcrs.core.dialogue import AGENT, USER, Dialogue, DialogueAct, ItemRef, Utterance
from usersimcrs.core.profile import UserProfile
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.agenda.nlg.base import NLGSettings, nlg_components
from usersimcrs.simulators.agenda.nlu.act_parser import ParseResult, format_acts
from usersimcrs.simulators.agenda.nlu.base import DEFAULT_ROLES, NLUSettings, nlu_components
from usersimcrs.simulators.agenda.policy.item_judge import ItemJudge
from usersimcrs.simulators.agenda.policy.policy import AgendaPolicy, PolicySettings
from usersimcrs.simulators.agenda.resources import build_resources, corpus_pool
from usersimcrs.simulators.base import SimulatorConfig, Stop, UserSimulator


class AgendaConfig(SimulatorConfig):
    """Options of the agenda-based simulator (unknown keys are errors)."""

    type: str = "agenda"
    nlu: str = Field("rules", description="NLU plug-in: rules | llm")
    nlg: str = Field("template", description="NLG plug-in: template | llm | corpus")
    nlu_structured: bool = Field(False, description="LLM NLU returns JSON constrained by a schema")
    nlu_max_tokens: int = Field(96, ge=8)
    nlg_max_tokens: int = Field(60, ge=8)
    few_shot: int = Field(4, ge=0, description="few-shot examples for the LLM NLG")
    nlg_corpus_path: str | None = Field(
        None,
        description="human corpus for `nlg: corpus` (a converted corpus or run folder, dialogues JSONL or "
        "DialogueKit JSON): its seeker messages speak the user's acts",
    )
    nlg_corpus_holdout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="share of the corpus's conversations kept out of the NLG's pool (by ID; `fidelity "
        "--human-holdout` compares with exactly those)",
    )
    annotated_dialogues_path: str | None = Field(None, description="DialogueKit JSON: templates, few-shot, transitions")
    interaction_model_path: str | None = Field(
        None, description="interaction-model YAML (anchor schema); CIR by default"
    )
    domain_path: str | None = Field(
        None, description="domain YAML (slot_names, requestable_slots); from items by default"
    )
    intent_roles: dict[str, str] = Field(default_factory=dict, description="rule-NLU role -> agent intent overrides")
    max_recommendation_rounds: int = Field(5, ge=1, description="rejected recommendations before giving up")
    patience: int = Field(3, ge=1, description="turns without progress before giving up")
    consider_items: int = Field(5, ge=1, description="how many of the shown items the user looks at")
    accept_threshold: float = Field(0.5, ge=-1.0, le=1.0)
    dislike_threshold: float = Field(-0.3, ge=-1.0, le=1.0)
    max_request_attempts: int = Field(2, ge=1)
    greet: bool = Field(True, description="open with a greeting and the first disclosure when the user starts")

    @field_validator("nlu")
    @classmethod
    def _known_nlu(cls, value: str) -> str:
        if value not in nlu_components.names():
            raise ValueError(f"unknown NLU {value!r}; known: {', '.join(nlu_components.names())}")
        return value

    @field_validator("nlg")
    @classmethod
    def _known_nlg(cls, value: str) -> str:
        if value not in nlg_components.names():
            raise ValueError(f"unknown NLG {value!r}; known: {', '.join(nlg_components.names())}")
        return value

    @model_validator(mode="after")
    def _corpus_given(self) -> AgendaConfig:
        if self.nlg == "corpus" and not self.nlg_corpus_path:
            raise ValueError("nlg: corpus needs nlg_corpus_path (a converted human corpus, e.g. ReDial)")
        return self

    def llm_components(self) -> list[str]:
        """`nlu` and `nlg` where the chosen plug-in calls an LLM (rules and templates call none)."""
        chosen = (("nlu", nlu_components.get(self.nlu)), ("nlg", nlg_components.get(self.nlg)))
        return [component for component, plugin in chosen if plugin.uses_llm]


class AgendaSimulator(UserSimulator):
    """A simulated user driven by an agenda built from its information need."""

    Config = AgendaConfig

    def __init__(self, config: AgendaConfig, context: RunContext, profile: UserProfile, seed: int) -> None:
        super().__init__(config, context, profile, seed)
        self.config: AgendaConfig = config
        need_slots = tuple(list(profile.need.constraints) + list(profile.need.requests))
        resources = build_resources(
            context,
            interaction_model_path=config.interaction_model_path,
            domain_path=config.domain_path,
            annotated_dialogues_path=config.annotated_dialogues_path,
            need_slots=need_slots,
        )
        self.resources = resources
        roles = {
            **DEFAULT_ROLES,
            **dict(getattr(resources.model, "agent_intent_roles", None) or {}),
            **config.intent_roles,
        }
        self.nlu = nlu_components.get(config.nlu)(
            NLUSettings(
                interaction_model=resources.model,
                domain=resources.domain,
                items=context.items,
                llm=lambda: context.llm("nlu"),
                structured=config.nlu_structured,
                max_tokens=config.nlu_max_tokens,
                roles=roles,
                cache=context.shared,
            )
        )
        self.nlg = nlg_components.get(config.nlg)(
            NLGSettings(
                defaults=resources.defaults,
                mined=resources.mined,
                examples=resources.examples,
                llm=lambda: context.llm("nlg"),
                few_shot=config.few_shot,
                max_tokens=config.nlg_max_tokens,
                corpus=corpus_pool(context, config.nlg_corpus_path, config.nlg_corpus_holdout),
            )
        )
        judge = ItemJudge(
            profile,
            context.items,
            accept_threshold=config.accept_threshold,
            dislike_threshold=config.dislike_threshold,
            rating_scale=context.ratings.scale if context.ratings is not None else (0.5, 5.0),
        )
        self.policy = AgendaPolicy(
            profile,
            resources.model,
            resources.domain,
            judge,
            resources.transitions,
            self.rng,
            PolicySettings(
                max_recommendation_rounds=config.max_recommendation_rounds,
                patience=config.patience,
                consider_items=config.consider_items,
                max_request_attempts=config.max_request_attempts,
            ),
        )

    async def start(self) -> Utterance | None:
        acts = self.policy.opening() if self.config.greet else []
        if not acts:
            return None
        return await self._utterance(acts, Dialogue(conversation_id="opening"), {"cases": ["opening"]})

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        last = dialogue.utterances[-1] if dialogue.utterances else None
        agent = last if last is not None and last.participant == AGENT else None
        understood = (
            await self.nlu.understand(agent, dialogue, seed=self._turn_seed(1)) if agent is not None else ParseResult()
        )
        items = self._recommended_items(agent, understood.acts)
        decision = self.policy.decide(understood.acts, items, agent.text if agent is not None else "")
        meta = {
            "cases": decision.cases,
            "agent_acts": [str(a) for a in understood.acts],
            "nlu_dropped": understood.dropped,
            "judgements": [j.model_dump(exclude_none=True) for j in decision.judgements],
        }
        if understood.note:
            meta["nlu_note"] = understood.note
        utterance = await self._utterance(decision.acts, dialogue, meta, decision.stop)
        if decision.stop is not None:
            utterance.metadata["stop_reason"] = decision.stop
            return Stop(reason=decision.stop, utterance=utterance)
        return utterance

    async def _utterance(
        self, acts: list[DialogueAct], dialogue: Dialogue, meta: dict[str, Any], ending: str | None = None
    ) -> Utterance:
        generated = await self.nlg.generate(acts, dialogue, rng=self.rng, seed=self._turn_seed(2), ending=ending)
        state = self.policy.state
        meta.update(
            {
                "user_acts": format_acts(acts),
                "nlg_source": generated.source,
                **({"nlg_origin": generated.origin} if generated.origin else {}),
                "agenda": [str(a) for a in self.policy.agenda.acts()],
                "requests": {s: r.model_dump(exclude={"slot"}) for s, r in state.requests.items()},
                "accepted": state.accepted.title if state.accepted else None,
                "turn": state.turn,
            }
        )
        return Utterance(participant=USER, text=generated.text, dialogue_acts=list(acts), metadata=meta)

    def _recommended_items(self, agent: Utterance | None, acts: list[DialogueAct]) -> list[ItemRef]:
        """Items of this CRS turn: its separate list first, then titles the NLU found in recommendation acts."""
        if agent is None:
            return []
        refs = list(agent.items)
        retrieval = set(self.resources.model.agent_set_retrieval)
        known = {r.key() for r in refs}
        for act in acts:
            if act.intent not in retrieval:
                continue
            for sv in act.slot_values:
                if sv.slot == "TITLE" and sv.value:
                    ref = ItemRef(title=sv.value)
                    if self.context.items is not None:
                        ref = self.context.items.resolve(ref)
                    if ref.key() not in known:
                        known.add(ref.key())
                        refs.append(ref)
        return refs

    def _turn_seed(self, salt: int) -> int:
        """A per-call seed for LLM parts: the conversation seed, the turn and the component."""
        return (self.seed * 1000 + self.policy.state.turn * 10 + salt) % (2**31)
