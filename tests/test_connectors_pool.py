"""The run-wide aiohttp pool of the HTTP connectors (`CRSPool`): one pool for every conversation of a
run, yet one cookie jar per conversation, and the same agent text as through an httpx client."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from crs_connectors.base import build_connector
from crs_connectors.transport import POOL_KEY, CRSPool
from tests.connectors_support import catalog_items, scripted_conversation
from usersimcrs.core.dialogue import AGENT, USER, Dialogue, Utterance
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.crs_servers import serve

MESSAGES = ["Hello there", "I like horror", "something else please", "thanks"]


@pytest.fixture
def ievalm():
    server = serve("ievalm")
    yield server
    server.stop()


def pooled_context() -> tuple[RunContext, CRSPool]:
    """A context holding a run-wide pool, as `build_context` makes it."""
    context = RunContext(items=catalog_items())
    return context, context.shared(POOL_KEY, CRSPool)


def test_interleaved_conversations_keep_their_own_cookies_over_one_pool(ievalm):
    async def main() -> None:
        context, pool = pooled_context()
        section = {"type": "crs_arena", "url": ievalm.url}
        a, b = build_connector(section, context), build_connector(section, context)
        da, db = Dialogue(conversation_id="a"), Dialogue(conversation_id="b")
        await a.open("a")
        await b.open("b")

        async def turn(connector, dialogue, text):
            user = Utterance(participant=USER, text=text)
            reply = await connector.reply(dialogue, user)
            dialogue.add(user)
            dialogue.add(Utterance(participant=AGENT, text=reply.text, items=reply.items))
            return reply

        await turn(a, da, "I like horror")
        await turn(a, da, "something else")
        first_b = await turn(b, db, "I like horror")
        await turn(a, da, "another one")
        assert a.transport.cookies == ["session"] and b.transport.cookies == ["session"]
        assert a.transport._pool is pool and b.transport._pool is pool  # one pool for the run
        await a.close()
        await b.close()
        assert not pool.session().closed  # closing a conversation leaves the run's pool open
        assert first_b.items
        await pool.aclose()

    asyncio.run(main())
    posts = [e for e in ievalm.log if e.method == "POST"]
    assert [p.info["session_turns"] for p in posts] == [0, 1, 0, 2]
    assert [p.info["had_cookie"] for p in posts] == [False, True, False, True]


def test_a_new_conversation_on_the_same_connector_starts_without_cookies(ievalm):
    async def main() -> None:
        context, pool = pooled_context()
        connector = build_connector({"type": "crs_arena", "url": ievalm.url}, context)
        for conversation in ("one", "two"):
            await connector.open(conversation)
            await connector.reply(Dialogue(conversation_id=conversation), Utterance(participant=USER, text="hi"))
        await connector.close()
        await pool.aclose()

    asyncio.run(main())
    assert [p.info["had_cookie"] for p in ievalm.log if p.method == "POST"] == [False, False]


def test_agent_text_is_byte_identical_through_aiohttp_and_httpx(ievalm):
    section = {"type": "crs_arena", "url": ievalm.url}

    async def with_pool():
        context, pool = pooled_context()
        try:
            return await scripted_conversation(section, context, MESSAGES)
        finally:
            await pool.aclose()

    async def with_httpx():
        async with httpx.AsyncClient() as client:
            return await scripted_conversation(section, RunContext(items=catalog_items(), http=client), MESSAGES)

    (_, lean), (_, reference) = asyncio.run(with_pool()), asyncio.run(with_httpx())
    assert [r.text.encode() for r in lean] == [r.text.encode() for r in reference]
    assert [[i.id for i in r.items] for r in lean] == [[i.id for i in r.items] for r in reference]


def test_a_pool_survives_a_second_event_loop(ievalm):
    context, pool = pooled_context()
    section = {"type": "crs_arena", "url": ievalm.url}
    first = asyncio.run(scripted_conversation(section, context, MESSAGES[:1]))
    second = asyncio.run(scripted_conversation(section, context, MESSAGES[:1]))  # the old loop's session is let go
    assert first[1][0].text == second[1][0].text
    asyncio.run(pool.aclose())
