"""Helpers for the connector tests: a scripted conversation loop and small item collections."""

from __future__ import annotations

from typing import Any

from crs_connectors.base import CRSReply, build_connector
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.core.items import Item, ItemCollection
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.crs_servers import DEFAULT_CATALOG


def catalog_items() -> ItemCollection:
    """The test servers' catalog as an item collection (MovieLens-style titles)."""
    return ItemCollection(
        Item(id=m.id, title=m.title, year=int(m.title[-5:-1]), attributes={"genres": list(m.genres)})
        for m in DEFAULT_CATALOG
    )


async def scripted_conversation(
    section: dict[str, Any], context: RunContext, messages: list[str], conversation_id: str = "conv-1"
) -> tuple[Dialogue, list[CRSReply]]:
    """Open, send each message (the engine's way: history without the new turn), close."""
    connector = build_connector(section, context, source="test")
    dialogue = Dialogue(conversation_id=conversation_id)
    replies = []
    await connector.open(conversation_id)
    try:
        for message in messages:
            utterance = Utterance(participant=USER, text=message)
            reply = await connector.reply(dialogue, utterance)
            dialogue.add(utterance)
            dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
            replies.append(reply)
    finally:
        await connector.close()
    return dialogue, replies
