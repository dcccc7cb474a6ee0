"""The run-wide HTTP pool of the HTTP connectors (`CRSPool`): one pool for every conversation of a
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
        assert pool.client._state is not None and pool.client._state.idle  # noqa: SLF001 - closing a conversation leaves the run's pool open
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


def test_agent_text_is_byte_identical_through_the_pool_and_httpx(ievalm):
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


def test_an_http10_server_gets_a_new_connection_every_turn_and_a_refusal_reads_plainly():
    """Issue #22: against an HTTP/1.0 server (as CRS Arena's Flask server) every turn connects anew and the
    session cookie still goes along; a refused connection is one short reason naming the URL."""
    import socket

    from usersimcrs.errors import ConnectorError

    server = serve("ievalm", close_after_reply=True)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # a port nothing listens on

    async def main() -> None:
        context, pool = pooled_context()
        connector = build_connector({"type": "crs_arena", "url": server.url}, context)
        await connector.open("c")
        dialogue = Dialogue(conversation_id="c")
        for text in MESSAGES[:3]:
            user = Utterance(participant=USER, text=text)
            reply = await connector.reply(dialogue, user)
            dialogue.add(user)
            dialogue.add(Utterance(participant=AGENT, text=reply.text))
        refused = build_connector({"type": "crs_arena", "url": f"http://127.0.0.1:{port}/", "retries": 0}, context)
        await refused.open("d")
        with pytest.raises(ConnectorError) as failure:
            await refused.reply(Dialogue(conversation_id="d"), Utterance(participant=USER, text="hi"))
        assert str(failure.value) == f"cannot connect to http://127.0.0.1:{port}/ (Connection refused)"
        assert not pool.client._state.idle  # noqa: SLF001 - nothing kept from a server that closes each connection
        await pool.aclose()

    try:
        asyncio.run(main())
        turns = [e for e in server.exchanges() if e.method == "POST"]
        # the session cookie went along each time: the server counted the turns before the last one
        assert len(turns) == 3 and [t.info["session_turns"] for t in turns] == [0, 1, 2]
    finally:
        server.stop()


def test_what_a_transport_derives_from_the_options_is_built_once_per_run():
    context, _ = pooled_context()
    section = {"type": "crs_arena", "url": "http://127.0.0.1:9/", "headers": {"X-Run": "1"}}
    from crs_connectors.base import connector_spec

    spec = connector_spec(section)
    a, b = spec.build(context), spec.build(context)
    assert a.transport._request_headers is b.transport._request_headers  # noqa: SLF001
    assert a.transport._request_headers["X-Run"] == "1" and a.transport._policy is b.transport._policy  # noqa: SLF001
    other = connector_spec({**section, "headers": {"X-Run": "2"}}).build(context)
    assert other.transport._request_headers["X-Run"] == "2"  # noqa: SLF001 - other options, own headers
    a.transport.reset_session("conv-1", 7)
    b.transport.reset_session("conv-1", 7)
    assert [a.transport.backoff(k) for k in (1, 2, 3)] == [b.transport.backoff(k) for k in (1, 2, 3)]
