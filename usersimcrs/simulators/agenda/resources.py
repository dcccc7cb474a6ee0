"""Run-wide, read-only resources of the agenda simulator, built once per run via RunContext.shared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from usersimcrs.core.dialogue import USER, Dialogue
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.agenda.nlg.corpus import SeekerPool, build_pool, read_corpus
from usersimcrs.simulators.agenda.nlg.seeker_acts import SeekerLabeller
from usersimcrs.simulators.agenda.nlg.templates import load_default_templates, mine_templates
from usersimcrs.simulators.agenda.nlu.act_parser import format_acts
from usersimcrs.simulators.agenda.policy.domain import Domain, canonical_slot, domain_from_items, load_domain
from usersimcrs.simulators.agenda.policy.interaction_model import InteractionModel, load_interaction_model
from usersimcrs.simulators.agenda.policy.transitions import TransitionModel


@dataclass(frozen=True)
class AgendaResources:
    """Interaction model, domain, transition statistics, templates and few-shot examples."""

    model: InteractionModel
    domain: Domain
    transitions: TransitionModel
    defaults: dict[str, tuple[str, ...]]
    mined: dict[str, tuple[str, ...]]
    examples: list[tuple[str, str]]


def build_resources(
    context: RunContext,
    *,
    interaction_model_path: str | None,
    domain_path: str | None,
    annotated_dialogues_path: str | None,
    need_slots: tuple[str, ...] = (),
) -> AgendaResources:
    """Load (or share, within one run) everything the agenda simulator reads but never changes."""
    key = f"agenda:{interaction_model_path}:{domain_path}:{annotated_dialogues_path}:{','.join(need_slots)}"
    return context.shared(
        key,
        lambda: _build(context, interaction_model_path, domain_path, annotated_dialogues_path, need_slots),
    )


def _build(
    context: RunContext,
    interaction_model_path: str | None,
    domain_path: str | None,
    annotated_dialogues_path: str | None,
    need_slots: tuple[str, ...],
) -> AgendaResources:
    model = load_interaction_model(interaction_model_path)
    domain = load_domain(domain_path) if domain_path else domain_from_items(context.items, list(need_slots))
    dialogues: list[Dialogue] = read_dialoguekit(annotated_dialogues_path) if annotated_dialogues_path else []
    transitions = (
        TransitionModel.from_dialogues(dialogues) if dialogues else TransitionModel.from_interaction_model(model)
    )
    examples = [
        (format_acts(u.dialogue_acts), u.text.strip())
        for d in dialogues
        for u in d.utterances
        if u.participant == USER and u.dialogue_acts and u.text.strip()
    ]
    return AgendaResources(
        model=model,
        domain=domain,
        transitions=transitions,
        defaults=load_default_templates(),
        mined=mine_templates(dialogues),
        examples=examples,
    )


def corpus_pool(context: RunContext, path: str | None, holdout: float) -> Callable[[], SeekerPool] | None:
    """The corpus NLG's pool of labelled seeker messages, built on first use and shared by the run."""
    if not path:
        return None

    def build() -> SeekerPool:
        genres = [
            value
            for attribute in (context.items.slots() if context.items is not None else [])
            if canonical_slot(attribute) == "GENRE"
            for value in context.items.slot_values(attribute)  # type: ignore[union-attr]
        ]
        return build_pool(read_corpus(path), SeekerLabeller(genres=genres), holdout=holdout)

    return lambda: context.shared(f"agenda.nlg.corpus:{path}:{holdout}", build)
