"""Stored conversations a study shows people: the annotation source, gold conversations, Turing pools.

Sources are any run or matrix folder (simulated or human), read through the one run reader
(`pipeline.sources.load_sources`). A conversation is known by (source, conversation ID), the source
being the run folder's name (a matrix cell's name), so IDs repeated across folders stay apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from usersimcrs.core.dialogue import AGENT, Dialogue, Utterance
from usersimcrs.errors import ConfigError
from usersimcrs.pipeline.sources import load_sources
from usersimcrs.studio.config import GoldConversation

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.pipeline.sources import RunSource

GOLD_SOURCE = "gold"


@dataclass
class PoolEntry:
    source: str
    dialogue: Dialogue
    crs: str | None
    simulator: str | None


@dataclass
class ConversationPool:
    """Conversations by (source, ID), in a stable order (source folder order, then file order)."""

    entries: list[PoolEntry] = field(default_factory=list)
    skipped: int = 0  # conversations without a single system turn: nothing to rate

    def __post_init__(self) -> None:
        self._index = {(e.source, e.dialogue.conversation_id): e for e in self.entries}

    def get(self, source: str, conversation_id: str) -> PoolEntry | None:
        return self._index.get((source, conversation_id))

    def __len__(self) -> int:
        return len(self.entries)


def _entries(sources: list[RunSource]) -> tuple[list[PoolEntry], int]:
    entries, skipped = [], 0
    for source in sources:
        for dialogue in source.run.dialogues:
            if not any(u.participant == AGENT for u in dialogue.utterances):
                skipped += 1
                continue
            entries.append(PoolEntry(source.name, dialogue, source.crs or dialogue.agent_id, source.simulator))
    return entries, skipped


def load_pool(path: str | Path) -> ConversationPool:
    """Every conversation with at least one system turn under a run or matrix folder."""
    sources = load_sources(path)  # its runs share one SharedResources: each item file is read once
    entries, skipped = _entries(sources)
    return ConversationPool(entries, skipped)


def gold_pool(gold: list[GoldConversation], source: ConversationPool | None) -> list[PoolEntry]:
    """The gold conversations, in config order: inline ones built here, the others looked up in `source`."""
    out = []
    for number, spec in enumerate(gold):
        if spec.utterances:
            dialogue = Dialogue(conversation_id=f"gold-{number}")
            for utterance in spec.utterances:
                dialogue.add(Utterance(participant=utterance.participant, text=utterance.text))
            out.append(PoolEntry(GOLD_SOURCE, dialogue, None, None))
            continue
        match = next(
            (e for e in (source.entries if source else []) if e.dialogue.conversation_id == spec.conversation_id), None
        )
        if match is None:
            raise ConfigError(
                f"key 'tasks.annotate.gold[{number}].conversation_id': {spec.conversation_id!r} "
                "is not a conversation of the annotation source"
            )
        out.append(match)
    return out
