"""Test helpers for the LLM simulators: a scripted in-test LLM and a tiny CRS turn loop."""

from __future__ import annotations

import json
from typing import Any, Callable

from usersimcrs.core.dialogue import AGENT, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.core.profile import UserProfile
from usersimcrs.llm.base import LLM, LLMResult, Message
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import Stop, UserSimulator

Reply = Callable[[list[Message], "dict[str, Any] | None", int], "str | dict[str, Any]"]


class ScriptedLLM(LLM):
    """An in-test LLM: answers come from `reply(messages, schema, call_index)`; every call is kept."""

    backend = "scripted"
    model = "scripted"

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    async def complete(self, messages, *, temperature=0.0, max_tokens=256, seed=None, schema=None, component="default"):
        self.calls.append(
            {
                "messages": list(messages),
                "temperature": temperature,
                "max_tokens": max_tokens,
                "seed": seed,
                "schema": schema,
                "component": component,
            }
        )
        out = self.reply(list(messages), schema, len(self.calls) - 1)
        if isinstance(out, dict):
            return LLMResult(text=json.dumps(out), parsed=out if schema is not None else None)
        parsed = None
        if schema is not None:
            try:
                parsed = json.loads(out)
            except json.JSONDecodeError:
                return LLMResult(text=out, parse_error="not JSON")
        return LLMResult(text=out, parsed=parsed)

    def prompts(self) -> list[str]:
        """Every message text sent so far."""
        return [m.content for call in self.calls for m in call["messages"]]


class OneLLM:
    """An LLM source that hands out the same LLM for every component."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm

    def get(self, component: str) -> LLM:
        return self.llm


def movie_items() -> ItemCollection:
    """A small movie collection with the slots the simulators describe."""
    rows = [
        (
            "1",
            "Heat (1995)",
            ["Action", "Crime"],
            ["Michael Mann"],
            ["Al Pacino", "Robert De Niro"],
            "A cop hunts a crew of thieves in Los Angeles.",
        ),
        (
            "2",
            "Toy Story (1995)",
            ["Animation", "Comedy"],
            ["John Lasseter"],
            ["Tom Hanks"],
            "Toys come alive when people leave the room.",
        ),
        (
            "3",
            "Alien (1979)",
            ["Horror", "Sci-Fi"],
            ["Ridley Scott"],
            ["Sigourney Weaver"],
            "A ship's crew meets a deadly creature.",
        ),
        (
            "4",
            "Amelie (2001)",
            ["Comedy", "Romance"],
            ["Jean-Pierre Jeunet"],
            ["Audrey Tautou"],
            "A shy waitress quietly changes the lives around her.",
        ),
        (
            "5",
            "Collateral (2004)",
            ["Action", "Crime", "Thriller"],
            ["Michael Mann"],
            ["Tom Cruise"],
            "A cab driver is forced to drive a hitman around.",
        ),
        (
            "6",
            "Up (2009)",
            ["Animation", "Adventure"],
            ["Pete Docter"],
            ["Ed Asner"],
            "An old man flies his house away with balloons.",
        ),
        (
            "7",
            "Se7en (1995)",
            ["Crime", "Thriller"],
            ["David Fincher"],
            ["Brad Pitt"],
            "Two detectives chase a killer who follows the seven sins.",
        ),
        (
            "8",
            "Notting Hill (1999)",
            ["Comedy", "Romance"],
            ["Roger Michell"],
            ["Julia Roberts"],
            "A bookshop owner falls for a film star.",
        ),
    ]
    return ItemCollection(
        Item(id=i, title=t, year=int(t[-5:-1]), attributes={"genres": g, "director": d, "stars": s, "plot": [p]})
        for i, t, g, d, s, p in rows
    )


def context_with(llm: LLM, items: ItemCollection | None = None) -> RunContext:
    return RunContext(items=items if items is not None else movie_items(), llms=OneLLM(llm))


def list_crs(pages: list[list[str]], text: str = "You might like these.") -> Callable[[Dialogue], Utterance]:
    """A CRS that shows `pages[k]` (item IDs) on its k-th turn (the last page repeats)."""

    def reply(dialogue: Dialogue) -> Utterance:
        turn = len(dialogue.agent_turns)
        ids = pages[min(turn, len(pages) - 1)]
        return Utterance(participant=AGENT, text=text, items=[ItemRef(id=i) for i in ids])

    return reply


async def converse(
    sim: UserSimulator, crs: Callable[[Dialogue], Utterance], *, max_turns: int = 10, conversation_id: str = "c1"
) -> Dialogue:
    """The engine's loop in miniature: start, CRS, respond, ... until Stop or `max_turns` user turns."""
    dialogue = Dialogue(conversation_id=conversation_id)
    opening = await sim.start()
    user_turns = 0
    if opening is not None:
        dialogue.add(opening)
        user_turns = 1
    dialogue.add(crs(dialogue))
    while True:
        if user_turns >= max_turns:
            dialogue.end_reason = "max_turns"
            break
        out = await sim.respond(dialogue)
        if isinstance(out, Stop):
            if out.utterance is not None:
                dialogue.add(out.utterance)
            dialogue.end_reason = out.reason
            break
        dialogue.add(out)
        user_turns += 1
        dialogue.add(crs(dialogue))
    sim.finish(dialogue)
    return dialogue


def profile_for(targets: list[str], items: ItemCollection, **extra: Any) -> UserProfile:
    """A profile whose need targets the given item IDs."""
    from usersimcrs.core.profile import InformationNeed

    need = InformationNeed(
        constraints=extra.pop("constraints", {"genres": "Crime"}),
        requests=extra.pop("requests", []),
        targets=[items.get(t).ref() for t in targets],
    )
    return UserProfile(user_id=extra.pop("user_id", "u1"), need=need, **extra)
