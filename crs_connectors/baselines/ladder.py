"""The sensitivity ladder's reference CRSs: their quality order is known by construction.

Best first: `oracle` recommends items the user's profile says they like (the held-out liked items,
`need.targets`, then the unseen catalogue items that best match the profile's preferences);
`oracle_mix30` and `oracle_mix70` are the oracle with each list position filled by a random catalogue
item with probability 0.3 / 0.7; `random` fills every position at random; `broken` ignores the user
and repeats its first reply word for word (a loop). Each is an ordinary connector usable alone in any
config. The engine hands them the conversation's profile and seed (`ProfileOracle`): the profile a
study would give any CRS-side oracle, never the simulator's state. Every random draw comes from the
conversation's seed and the turn, so the rungs of a ladder meet the same user with the same draws
(conversation i of the 30% and 70% rungs uses the same uniform numbers per list position).
See docs/ladder.md.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field

from crs_connectors.base import CRSConnector, CRSReply
from crs_connectors.baselines.rule_based import BaselineConfig, DialogueState, RuleBasedCRS, describe_genres
from crs_connectors.turns import all_turns
from usersimcrs.core.dialogue import AGENT, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import ItemCollection, display_title
from usersimcrs.core.profile import UserProfile
from usersimcrs.user_model.preferences import expected_score

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class OracleConfig(BaselineConfig):
    """Options of the oracle rungs: the share of random list positions sets the rung."""

    elicit_turns: int = Field(0, ge=0, description="the oracle knows the user: it recommends at once")
    random_share: float = Field(
        0.0, ge=0.0, le=1.0, description="probability that a list position holds a random catalogue item"
    )


class Mix30Config(OracleConfig):
    random_share: float = Field(0.3, ge=0.0, le=1.0)


class Mix70Config(OracleConfig):
    random_share: float = Field(0.7, ge=0.0, le=1.0)


class RandomConfig(OracleConfig):
    random_share: float = Field(1.0, ge=0.0, le=1.0)


def turn_rng(seed: int, turn: int) -> random.Random:
    """The generator of one turn of one conversation: a pure function of the conversation seed and the turn."""
    return random.Random(f"ladder:{seed}:{turn}")


def preferred_order(profile: UserProfile, items: ItemCollection) -> list[str]:
    """Unseen catalogue items best first by the profile: items that meet every constraint of the need before
    the rest, then the mean slot preference of their attribute values (`expected_score`), then catalogue order."""
    prefs = profile.preferences
    seen = profile.seen_ids()
    wanted = {slot: value.lower() for slot, value in profile.need.constraints.items()}
    ranked = []
    for position, item_id in enumerate(items.ids()):
        if item_id in seen:
            continue
        item = items.require(item_id)
        meets = all(value in (v.lower() for v in item.values(slot)) for slot, value in wanted.items())
        score = expected_score(prefs, item.attributes)
        ranked.append((not meets, -(score if score is not None else -2.0), position, item_id))
    ranked.sort()
    return [entry[-1] for entry in ranked]


class OracleCRS(RuleBasedCRS):
    """Recommends what the profile says the user likes; `random_share` of the positions hold random items."""

    Config = OracleConfig
    config: OracleConfig

    def __init__(self, config: OracleConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.profile: UserProfile | None = None
        self.seed = 0
        self._preferred: list[str] | None = None

    def meet_user(self, profile: UserProfile, seed: int) -> None:
        """Take the conversation's profile and seed (called by the engine before `open`)."""
        self.profile, self.seed, self._preferred = profile, seed, None

    def has_preferences(self, state: DialogueState) -> bool:
        return True

    def oracle_items(self) -> Iterator[str]:
        """The profile's liked items, best first: held-out liked items (targets), then preferred unseen items."""
        if self.profile is None:
            raise RuntimeError(f"crs {self.config.type!r} needs the conversation's profile; the engine hands it over")
        for ref in self.profile.need.targets:
            resolved = ref if ref.id is not None else self.items.resolve(ref)
            if resolved.id is not None and resolved.id in self.items:
                yield resolved.id
        if self._preferred is None:  # built only when the targets run out
            self._preferred = preferred_order(self.profile, self.items)
        yield from self._preferred

    def rank(self, state: DialogueState, exclude: set[str]) -> list[str]:
        share = self.config.random_share
        rng = turn_rng(self.seed, len(state.readings))
        ids = self.items.ids()
        taken = set(exclude)
        oracle = self.oracle_items() if share < 1.0 else iter(())
        out: list[str] = []
        while len(out) < self.config.k and len(taken) < len(ids):
            # both numbers are drawn at every position (a repeat is redrawn from a generator of its own), so rungs
            # with other shares stay on the same stream: a position random at 30% is random at 70%, same item
            at_random, draw = rng.random() < share, rng.randrange(len(ids))
            choice = ids[draw] if at_random else next((i for i in oracle if i not in taken), None)
            redraw = turn_rng(self.seed, len(state.readings) * 1000 + len(out) + 1)
            while choice is None or choice in taken:
                choice = ids[redraw.randrange(len(ids))]
            taken.add(choice)
            out.append(choice)
        return out


class OracleMix30CRS(OracleCRS):
    """The oracle with each list position a random catalogue item with probability 0.3."""

    Config = Mix30Config


class OracleMix70CRS(OracleCRS):
    """The oracle with each list position a random catalogue item with probability 0.7."""

    Config = Mix70Config


class RandomCRS(OracleCRS):
    """Random catalogue items; it never reads the profile."""

    Config = RandomConfig


class BrokenCRS(CRSConnector):
    """Ignores the user: its first reply names one random catalogue item, and every later reply repeats it word for
    word, whatever the user says (a loop)."""

    Config = BaselineConfig
    config: BaselineConfig

    def __init__(self, config: BaselineConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.items: ItemCollection = context.require_items(f"crs type {config.type!r}")
        self.seed = 0

    def meet_user(self, profile: UserProfile, seed: int) -> None:
        """Take the conversation's seed (the profile is not read)."""
        self.seed = seed

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        earlier = [u for u in all_turns(history, user_utterance) if u.participant == AGENT]
        if earlier:
            return CRSReply(text=earlier[0].text, items=list(earlier[0].items))
        ids = self.items.ids()
        item = self.items.require(ids[turn_rng(self.seed, 0).randrange(len(ids))])
        text = f"How about {display_title(item.title)}? It is {describe_genres(item, self.config.genre_slot)}."
        return CRSReply(text=text, items=[ItemRef(id=item.id, title=item.title)])


__all__ = ["BrokenCRS", "OracleCRS", "OracleMix30CRS", "OracleMix70CRS", "RandomCRS", "preferred_order"]
