"""Shared builders for the agenda-simulator tests: a tiny catalogue, profiles, a scripted CRS."""

from __future__ import annotations

import asyncio
import random

from crs_connectors.base import ConnectorConfig, CRSConnector, CRSReply
from usersimcrs.core.dialogue import AGENT, Dialogue, DialogueAct, ItemRef, SlotValue, Utterance
from usersimcrs.core.items import Item, ItemCollection, display_title
from usersimcrs.core.profile import InformationNeed, Preferences, SeenItem, UserProfile
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.agenda.policy.domain import domain_from_items
from usersimcrs.simulators.agenda.policy.interaction_model import load_interaction_model
from usersimcrs.simulators.agenda.policy.item_judge import ItemJudge
from usersimcrs.simulators.agenda.policy.policy import AgendaPolicy, PolicySettings
from usersimcrs.simulators.agenda.policy.transitions import TransitionModel
from usersimcrs.simulators.agenda.simulator import AgendaSimulator
from usersimcrs.simulators.base import Stop


def catalogue() -> ItemCollection:
    def item(i: str, title: str, genres: list[str], director: str) -> Item:
        year = int(title[-5:-1])
        return Item(id=i, title=title, year=year, attributes={"genres": genres, "director": [director]})

    return ItemCollection(
        [
            item("1", "Heat (1995)", ["Action", "Crime"], "Michael Mann"),
            item("2", "Toy Story (1995)", ["Animation", "Comedy"], "John Lasseter"),
            item("3", "Airplane! (1980)", ["Comedy"], "Jim Abrahams"),
            item("4", "Superbad (2007)", ["Comedy"], "Greg Mottola"),
            item("5", "Saw (2004)", ["Horror", "Comedy"], "James Wan"),
            item("6", "Step Brothers (2008)", ["Comedy"], "Adam McKay"),
            item("7", "Collateral (2004)", ["Action", "Crime", "Drama"], "Michael Mann"),
        ]
    )


def comedy_fan(
    user_id: str = "u7", *, requests: list[str] | None = None, targets: list[str] | None = None
) -> UserProfile:
    """Wants a comedy whose director they ask about; target Superbad; seen Airplane!; dislikes horror."""
    items = catalogue()
    target_ids = targets if targets is not None else ["4"]
    return UserProfile(
        user_id=user_id,
        need=InformationNeed(
            constraints={"genres": "Comedy"},
            requests=requests if requests is not None else ["director"],
            targets=[items.get(t).ref() for t in target_ids],  # type: ignore[union-attr]
        ),
        preferences=Preferences(slots={"genres": {"Comedy": 0.9, "Animation": -0.5, "Horror": -1.0, "Action": 0.2}}),
        seen_items=[SeenItem(item=items.get("3").ref(), rating=4.5)],  # type: ignore[union-attr]
    )


def act(intent: str, **slots: str | None) -> DialogueAct:
    return DialogueAct(intent=intent, slot_values=[SlotValue(slot=k, value=v) for k, v in slots.items()])


def ref(items: ItemCollection, item_id: str) -> ItemRef:
    return items.get(item_id).ref()  # type: ignore[union-attr]


def policy_for(profile: UserProfile, seed: int = 0, **settings) -> AgendaPolicy:  # type: ignore[no-untyped-def]
    items = catalogue()
    model = load_interaction_model()
    domain = domain_from_items(items, list(profile.need.constraints) + list(profile.need.requests))
    return AgendaPolicy(
        profile,
        model,
        domain,
        ItemJudge(profile, items),
        TransitionModel.from_interaction_model(model),
        random.Random(seed),
        PolicySettings(**settings),
    )


def simulator(
    profile: UserProfile | None = None, seed: int = 0, context: RunContext | None = None, **config
) -> AgendaSimulator:  # type: ignore[no-untyped-def]
    ctx = context or RunContext(items=catalogue())
    return AgendaSimulator(AgendaSimulator.Config(type="agenda", **config), ctx, profile or comedy_fan(), seed)


class ScriptedCRSConfig(ConnectorConfig):
    order: list[str] = ["2", "5", "3", "4", "6"]
    list_size: int = 1


class ScriptedCRS(CRSConnector):
    """Asks for a genre, then recommends the catalogue in a fixed order and answers director questions."""

    Config = ScriptedCRSConfig

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        items = self.context.items
        text = (user_utterance.text if user_utterance else "").lower()
        shown = [i.id for u in history.agent_turns for i in u.items]
        if not history.agent_turns:
            return CRSReply(text="Hi! I can help you find a movie. Which genre are you in the mood for?")
        if "direct" in text and shown:
            item = items.get(shown[-1])
            return CRSReply(text=f"It was directed by {item.values('director')[0]}.")
        if "bye" in text:
            return CRSReply(text="Enjoy your movie, goodbye!")
        remaining = [i for i in self.config.order if i not in shown]
        if not remaining:
            return CRSReply(text="Sorry, I have no more suggestions that fit.")
        picks = [items.get(i) for i in remaining[: self.config.list_size]]
        return CRSReply(
            text=f"I would recommend: {display_title(picks[0].title)}. Have you seen it?",
            items=[p.ref() for p in picks],
        )


async def converse(sim: AgendaSimulator, crs: CRSConnector, max_turns: int = 12) -> Dialogue:
    """A minimal turn loop (the engine's is tested elsewhere): user opens, CRS answers, until Stop."""
    dialogue = Dialogue(conversation_id=f"c{sim.seed}")
    opening = await sim.start()
    for _ in range(max_turns):
        reply = await crs.reply(dialogue, opening)
        if opening is not None:
            dialogue.add(opening)
        dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
        out = await sim.respond(dialogue)
        if isinstance(out, Stop):
            if out.utterance is not None:
                dialogue.add(out.utterance)
            dialogue.end_reason = out.reason
            return dialogue
        opening = out
    dialogue.end_reason = "max_turns"
    return dialogue


def run_conversation(sim: AgendaSimulator, crs: CRSConnector | None = None, max_turns: int = 12) -> Dialogue:
    crs = crs or ScriptedCRS(ScriptedCRS.Config(type="scripted"), sim.context)
    return asyncio.run(converse(sim, crs, max_turns))
