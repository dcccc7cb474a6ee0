"""CRS Arena (iEvaLM), IAI MovieBot v1.0.1 and Rasa REST connectors against real local servers."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from crs_connectors.base import build_connector
from tests.connectors_support import catalog_items, scripted_conversation
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.errors import ConnectorError
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.crs_servers import FaultPlan, IEvaLMApp, LocalCRSServer, MovieBotApp, RasaApp, serve

MESSAGES = ["Hello there", "I like sci-fi thrillers", "Seen them, something else please"]


@pytest.fixture
def ievalm():
    server = serve("ievalm")
    yield server
    server.stop()


@pytest.fixture
def moviebot():
    server = serve("moviebot")
    yield server
    server.stop()


@pytest.fixture
def rasa():
    server = serve("rasa")
    yield server
    server.stop()


# ------------------------------------------------------------------ the servers speak the protocols


def test_ievalm_server_protocol_answers(ievalm):
    with httpx.Client() as client:
        assert client.get(ievalm.url).text == "Model is running."
        missing = client.post(ievalm.url, json={"message": "hi"})
        assert missing.status_code == 400 and "context" in missing.text
        assert not missing.headers["content-type"].startswith("application/json")
        not_json = client.post(ievalm.url, content=b"hello", headers={"Content-Type": "text/plain"})
        assert not_json.status_code == 415
        ok = client.post(ievalm.url, json={"context": [], "message": "I like horror"})
        assert ok.status_code == 200 and "I would recommend the following items:" in ok.json()["response"]
        session = ok.cookies["session"]
        tampered = session[:-1] + ("0" if session[-1] != "0" else "1")
        client.cookies.clear()
        client.cookies.set("session", tampered)
        client.post(ievalm.url, json={"context": ["a", "b"], "message": "more"})
    assert ievalm.log[-1].info["had_cookie"] is False  # a bad signature starts a new session


def test_moviebot_exit_answers_plain_text(moviebot):
    with httpx.Client() as client:
        assert client.get(moviebot.url).text == "MovieBot is alive"
        body = {"entry": [{"messaging": [{"message": {"text": "/exit"}, "sender": {"id": "x"}}]}]}
        answer = client.post(moviebot.url, json=body)
    assert answer.text == "Message Processed"
    with pytest.raises(ValueError):
        answer.json()


# ------------------------------------------------------------------ conversations through the connectors


def test_crs_arena_items_match_what_the_server_sent(ievalm):
    context = RunContext(items=catalog_items())
    dialogue, replies = asyncio.run(scripted_conversation({"type": "crs_arena", "url": ievalm.url}, context, MESSAGES))
    sent = [e.items for e in ievalm.exchanges("/") if e.method == "POST"]
    assert [[i.raw for i in r.items] for r in replies] == sent
    assert sent[1] and sent[2]  # the server recommended in turns 2 and 3
    by_title = {i.title: i.id for i in catalog_items()}
    assert replies[1].items[0].id == by_title["Matrix, The (1999)"]  # "The Matrix (1999)" resolved
    assert all(r.items_from_text for r in replies)
    # the context is the earlier turns, alternating and user first; the cookie carries the session
    assert [e.info["context_len"] for e in ievalm.log if e.method == "POST"] == [0, 2, 4]
    assert [e.info["session_turns"] for e in ievalm.log if e.method == "POST"] == [0, 1, 2]
    first_post = next(e for e in ievalm.log if e.method == "POST" and e.info["context_len"] == 2)
    assert first_post.body["context"] == ["Hello there", replies[0].text]


def test_crs_arena_without_collection_keeps_titles(ievalm):
    _, replies = asyncio.run(
        scripted_conversation({"type": "crs_arena", "url": ievalm.url}, RunContext(), MESSAGES[:2])
    )
    assert replies[1].items and all(i.id is None and i.title for i in replies[1].items)


def test_crs_arena_cookies_stay_in_their_conversation(ievalm):
    """Two interleaved conversations over one shared client: neither sees the other's session."""

    async def main() -> None:
        async with httpx.AsyncClient() as shared:
            context = RunContext(items=catalog_items(), http=shared)
            section = {"type": "crs_arena", "url": ievalm.url}
            a, b = build_connector(section, context), build_connector(section, context)
            da, db = Dialogue(conversation_id="a"), Dialogue(conversation_id="b")
            await a.open("a")
            await b.open("b")
            from usersimcrs.core.dialogue import AGENT, USER, Utterance

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
            assert len(shared.cookies.jar) == 0  # nothing left in the shared client's jar
            await a.close()
            await b.close()
            assert first_b.items  # b got a fresh session: the same first list a got
        posts = [e for e in ievalm.log if e.method == "POST"]
        assert [p.info["session_turns"] for p in posts] == [0, 1, 0, 2]
        assert [p.info["had_cookie"] for p in posts] == [False, True, False, True]

    asyncio.run(main())


def test_moviebot_session_per_conversation(moviebot):
    context = RunContext(items=catalog_items())
    _, replies = asyncio.run(
        scripted_conversation({"type": "moviebot", "url": moviebot.url}, context, MESSAGES, conversation_id="conv-77")
    )
    posts = [e for e in moviebot.log if e.method == "POST"]
    texts = [p.info["text"] for p in posts]
    assert texts == ["/start", *MESSAGES, "/exit"]
    assert {p.info["sender"] for p in posts} == {"conv-77"}
    sent = [p.items for p in posts[1:-1]]
    assert [[i.raw for i in r.items] for r in replies] == sent
    assert replies[1].items[0].id == "2571" and replies[1].items[0].title == "Matrix, The (1999)"
    assert [b["title"] for b in replies[1].raw["buttons"]] == ["I like this", "Seen it", "Something else"]
    assert moviebot.app.sessions == {}  # /exit closed the session


def test_moviebot_welcome_when_the_crs_opens(moviebot):
    async def main():
        connector = build_connector({"type": "moviebot", "url": moviebot.url}, RunContext())
        await connector.open("c")
        reply = await connector.reply(Dialogue(conversation_id="c"), None)
        await connector.close()
        return reply

    reply = asyncio.run(main())
    assert reply.text == MovieBotApp.WELCOME and reply.raw["intent"] == "WELCOME"
    assert len([e for e in moviebot.log if e.method == "POST"]) == 2  # /start and /exit only


def test_rasa_items_from_custom_payload(rasa):
    context = RunContext(items=catalog_items())
    _, replies = asyncio.run(
        scripted_conversation({"type": "rasa", "url": rasa.url + "webhooks/rest/webhook"}, context, MESSAGES)
    )
    sent = [e.items for e in rasa.exchanges("/webhooks/rest/webhook")]
    assert [[i.id for i in r.items] for r in replies] == sent
    assert not replies[1].items_from_text
    assert replies[1].text == "Here are some movies you might enjoy.\nWould you like more suggestions?"
    assert [b["payload"] for b in replies[1].raw["buttons"]] == ["/more", "/deny"]
    assert {e.info["sender"] for e in rasa.exchanges("/webhooks/rest/webhook")} == {"conv-1"}


def test_rasa_items_parsed_from_text_when_no_custom_payload():
    server = LocalCRSServer(RasaApp(custom_items=False)).start()
    try:
        _, replies = asyncio.run(
            scripted_conversation({"type": "rasa", "url": server.url + "webhooks/rest/webhook"}, RunContext(), MESSAGES)
        )
        sent = [e.items for e in server.exchanges("/webhooks/rest/webhook")]
    finally:
        server.stop()
    assert [[i.title for i in r.items] for r in replies] == sent
    assert replies[1].items_from_text


def test_rasa_health_uses_server_root(rasa):
    async def main():
        connector = build_connector({"type": "rasa", "url": rasa.url + "webhooks/rest/webhook"}, RunContext())
        try:
            return await connector.health()
        finally:
            await connector.close()

    assert asyncio.run(main()).startswith("Hello from Rasa")


# ------------------------------------------------------------------ faults: retried, then a short reason

FAULT_REASONS = {
    "http_500": "HTTP 500",
    "hang": "timeout after 0.4s",
    "non_json": "non-JSON reply",
    "empty_text": "empty reply text",
    "oversize": "reply over 50 kB",
    "reset": "connection reset",
}
PROTOCOLS = {
    "crs_arena": (IEvaLMApp, "", "/"),
    "moviebot": (MovieBotApp, "", "/"),
    "rasa": (RasaApp, "webhooks/rest/webhook", "/webhooks/rest/webhook"),
}


@pytest.mark.parametrize("kind", sorted(FAULT_REASONS))
@pytest.mark.parametrize("connector", sorted(PROTOCOLS))
def test_each_fault_is_retried_then_reported(connector, kind):
    app_class, suffix, route = PROTOCOLS[connector]
    server = LocalCRSServer(app_class(), FaultPlan(rates={kind: 1.0}, hang_s=1.5, oversize_bytes=400_000)).start()
    section = {
        "type": connector,
        "url": server.url + suffix,
        "timeout_s": 0.4,
        "retries": 1,
        "backoff_s": 0.01,
        "max_response_bytes": 50_000,
    }
    try:
        with pytest.raises(ConnectorError) as failure:
            asyncio.run(scripted_conversation(section, RunContext(), ["I like horror"]))
        attempts = [e for e in server.wait_for_requests(2, route) if e.method == "POST" and e.fault == kind]
    finally:
        server.stop()
    assert str(failure.value) == f"{FAULT_REASONS[kind]} (after 2 attempts)"
    # under heavy load a timed-out attempt may be dropped before the server's thread logs it
    assert len(attempts) == 2 or (kind == "hang" and len(attempts) == 1), [e.fault for e in server.log]


def test_transient_faults_are_retried_until_an_answer(ievalm):
    server = LocalCRSServer(IEvaLMApp(), FaultPlan(sequence=["http_500", "reset", None])).start()
    try:
        section = {"type": "crs_arena", "url": server.url, "retries": 2, "backoff_s": 0.01}
        _, replies = asyncio.run(scripted_conversation(section, RunContext(), ["I like horror"]))
        faults = [e.fault for e in server.log if e.method == "POST"]
    finally:
        server.stop()
    assert faults == ["http_500", "reset", None]
    assert replies[0].items


def test_client_errors_are_not_retried(ievalm):
    section = {"type": "http", "url": ievalm.url, "request_template": {"message": "{message}"}, "text_path": "response"}
    with pytest.raises(ConnectorError, match=r"^HTTP 400: Bad Request"):
        asyncio.run(scripted_conversation(section, RunContext(), ["hi"]))
    assert len([e for e in ievalm.log if e.method == "POST"]) == 1


def test_closed_port_is_a_connection_failure():
    section = {"type": "crs_arena", "url": "http://127.0.0.1:1/", "retries": 0}
    with pytest.raises(ConnectorError, match="cannot connect to http://127.0.0.1:1/"):
        asyncio.run(scripted_conversation(section, RunContext(), ["hi"]))
