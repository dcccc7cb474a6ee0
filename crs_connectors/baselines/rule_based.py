"""The conversation logic shared by the rule-based baselines: read the dialogue, elicit, recommend.

State is re-read from the dialogue on every turn (what the user said, what was shown and turned
down), so a baseline's reply is a pure function of the conversation: no RNG, no hidden state.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import Field

from crs_connectors.base import ConnectorConfig, CRSConnector, CRSReply
from crs_connectors.baselines.understanding import Reading, genre_lexicon, read_utterance
from crs_connectors.turns import all_turns
from usersimcrs.core.dialogue import AGENT, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, ItemCollection, display_title
from usersimcrs.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

QUESTIONS = (
    "Which genre are you in the mood for?",
    "Can you name a movie you liked, or tell me something about what you like?",
)


class BaselineConfig(ConnectorConfig):
    """Options every built-in baseline shares."""

    k: int = Field(5, ge=1, description="items in each recommendation list")
    elicit_turns: int = Field(1, ge=0, description="questions asked at most before recommending anyway")
    genre_slot: str = "genres"
    greeting: str = "Hi! I can help you find a movie."


@dataclass
class DialogueState:
    """What the conversation so far tells a rule-based CRS."""

    readings: list[Reading] = field(default_factory=list)
    user_texts: list[str] = field(default_factory=list)
    genres: list[str] = field(default_factory=list)
    disliked_genres: list[str] = field(default_factory=list)
    mentioned: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    questions_asked: int = 0
    last_items: list[str] = field(default_factory=list)

    @property
    def current(self) -> Reading:
        return self.readings[-1] if self.readings else Reading()

    def excluded(self) -> set[str]:
        """Items never to recommend again: shown, rejected, or named by the user."""
        return set(self.shown) | set(self.rejected) | set(self.mentioned)


def read_state(
    turns: list[Utterance], items: ItemCollection, lexicon: dict[str, str], slots: list[str]
) -> DialogueState:
    """Fold the dialogue into a DialogueState."""
    state = DialogueState()
    for utterance in turns:
        if utterance.participant == AGENT:
            ids = [ref.id for ref in utterance.items if ref.id is not None]
            if ids:
                state.shown.extend(i for i in ids if i not in state.shown)
                state.last_items = ids
            elif utterance.text.rstrip().endswith("?"):
                state.questions_asked += 1
            continue
        reading = read_utterance(utterance.text, items, lexicon, slots)
        state.readings.append(reading)
        state.user_texts.append(utterance.text)
        for genre in reading.disliked_genres:
            if genre in state.genres:
                state.genres.remove(genre)
            if genre not in state.disliked_genres:
                state.disliked_genres.append(genre)
        for genre in reading.genres:
            if genre not in state.genres:
                state.genres.append(genre)
            if genre in state.disliked_genres:
                state.disliked_genres.remove(genre)
        state.mentioned.extend(i for i in reading.titles if i not in state.mentioned)
        if reading.feedback == "reject" and state.last_items:
            state.rejected.extend(i for i in state.last_items[:1] if i not in state.rejected)
    return state


def describe_genres(item: Item, slot: str) -> str:
    """'an action, crime and thriller movie' from an item's genres."""
    genres = [g.lower() for g in item.values(slot)][:3]
    if not genres:
        return "a movie"
    joined = genres[0] if len(genres) == 1 else f"{', '.join(genres[:-1])} and {genres[-1]}"
    article = "an" if joined[0] in "aeiou" else "a"
    return f"{article} {joined} movie"


class RuleBasedCRS(CRSConnector):
    """Elicit a preference, then recommend k items ranked by `rank`; answer simple questions."""

    Config = BaselineConfig
    config: BaselineConfig

    def __init__(self, config: BaselineConfig, context: RunContext) -> None:
        super().__init__(config, context)
        if context.items is None or not len(context.items):
            raise ConfigError(f"crs type {config.type!r} needs an item collection (add an 'items:' section)")
        self.items: ItemCollection = context.items
        # read-only and built from the item collection alone: once per command
        self.slots = context.derived(self.items, "baselines.slots", self.items.slots)
        self.lexicon = context.derived(
            self.items,
            ("baselines.genre_lexicon", config.genre_slot),
            lambda: genre_lexicon(self.items.slot_values(config.genre_slot)),
        )

    @abstractmethod
    def rank(self, state: DialogueState, exclude: set[str]) -> list[str]:
        """Item IDs, best first, none of them in `exclude`."""

    def has_preferences(self, state: DialogueState) -> bool:
        """Whether the user has said enough to recommend from."""
        return bool(state.genres or state.mentioned)

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        turns = all_turns(history, user_utterance)
        state = read_state(turns, self.items, self.lexicon, self.slots)
        if user_utterance is None and not state.readings:
            return CRSReply(text=f"{self.config.greeting} {QUESTIONS[0]}")
        return self.respond(state)

    def respond(self, state: DialogueState) -> CRSReply:
        """The policy: goodbye, answer a question, acknowledge acceptance, elicit, or recommend."""
        reading = state.current
        last = self.items.get(state.last_items[0]) if state.last_items else None
        if reading.goodbye and not reading.genres:
            return CRSReply(text="Thanks for chatting. Enjoy your movie, goodbye!")
        if reading.asks and last is not None:
            return CRSReply(text=self.answer(last, reading.asks))
        if reading.feedback == "accept" and last is not None and not reading.genres and not reading.titles:
            return CRSReply(text=f"Great choice! Enjoy {display_title(last.title)}. Anything else I can help with?")
        if not self.has_preferences(state) and state.questions_asked < self.config.elicit_turns:
            return CRSReply(text=QUESTIONS[state.questions_asked % len(QUESTIONS)])
        ranked = self.rank(state, state.excluded())[: self.config.k]
        if not ranked:
            return CRSReply(
                text="Sorry, I have no more suggestions that fit. Could you tell me something else you like?"
            )
        top = self.items.get(ranked[0])
        assert top is not None
        lead = "Then how about" if reading.feedback == "reject" else "How about"
        text = f"{lead} {display_title(top.title)}? It is {describe_genres(top, self.config.genre_slot)}."
        refs = [ItemRef(id=i, title=self.items.require(i).title, score=None) for i in ranked]
        return CRSReply(text=text, items=refs)

    def answer(self, item: Item, slots: list[str]) -> str:
        """One sentence about the asked attributes of the last recommended item."""
        name = display_title(item.title)
        parts = []
        for slot in slots:
            if slot == "year":
                parts.append(f"it came out in {item.year}" if item.year else "I do not know its year")
                continue
            values = item.values(slot)[:5]
            label = slot.rstrip("s")
            parts.append(f"its {label}s are {', '.join(values)}" if values else f"I do not know its {label}s")
        return f"About {name}: {'; '.join(parts)}."
