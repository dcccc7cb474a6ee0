"""The generic `http` connector, JSON paths, request templates and the shared HTTP plumbing."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import httpx
import pytest

from crs_connectors.base import build_connector
from crs_connectors.http import fill_template
from crs_connectors.json_paths import parse_path, select
from crs_connectors.transport import HTTPOptions, HTTPTransport, format_size
from tests.connectors_support import catalog_items, scripted_conversation
from usersimcrs.engine.context import RunContext
from usersimcrs.errors import ConfigError, ConnectorError
from usersimcrs.testing.crs_servers import FaultPlan, GenericJSONApp, LocalCRSServer

GENERIC = {
    "type": "http",
    "request_template": {"session": "{conversation_id}", "text": "{message}", "history": "{history}"},
    "text_path": "reply.text",
    "items_path": "reply.recommendations[*]",
    "item_id_field": "movie_id",
    "item_title_field": "name",
    "headers_env": {"Authorization": "CRS_TEST_AUTH"},
}


@pytest.fixture
def generic(monkeypatch):
    monkeypatch.setenv("CRS_TEST_AUTH", "Bearer s3cret-token")
    server = LocalCRSServer(GenericJSONApp(token="s3cret-token")).start()
    yield server
    server.stop()


def test_json_paths_select_keys_indices_and_wildcards():
    data = {"a": [{"b": 1, "c": {"d": "x"}}, {"b": 2}], "e": "top"}
    assert select(data, "a[*].b") == [1, 2]
    assert select(data, "a[0].c.d") == ["x"]
    assert select(data, "a[-1].b") == [2]
    assert select(data, "a[5].b") == []
    assert select([{"t": "p"}, {"t": "q"}], "[*].t") == ["p", "q"]
    assert select(data, "$") == [data]
    with pytest.raises(ConfigError):
        parse_path("a..b[")


def test_template_fills_placeholders_and_lists():
    template = {"id": "{conversation_id}", "q": "say: {message}", "h": "{history}", "n": 3, "l": ["{turn}"]}
    filled = fill_template(template, {"conversation_id": "c", "message": "hi {x}", "turn": "2"}, {"{history}": [1]})
    assert filled == {"id": "c", "q": "say: hi {x}", "h": [1], "n": 3, "l": ["2"]}


def test_generic_connector_reads_text_items_and_sends_history(generic):
    section = {**GENERIC, "url": generic.url + "api/chat"}
    context = RunContext(items=catalog_items())
    _, replies = asyncio.run(scripted_conversation(section, context, ["hello", "I like crime movies", "more please"]))
    chats = generic.exchanges("/api/chat")
    assert [len(e.body["history"]) for e in chats] == [0, 2, 4]
    assert chats[1].body["history"][0] == {"role": "user", "text": "hello"}
    assert [[i.id for i in r.items] for r in replies] == [e.items for e in chats]
    assert replies[1].items and replies[1].items[0].title == "Shawshank Redemption, The (1994)"
    assert replies[1].text.startswith("You might like")
    assert all(e.headers.get("authorization") == "Bearer s3cret-token" for e in chats)


def test_secret_header_missing_from_environment_is_a_config_error(monkeypatch, generic):
    monkeypatch.delenv("CRS_TEST_AUTH")
    with pytest.raises(ConfigError, match="environment variable CRS_TEST_AUTH is not set"):
        build_connector({**GENERIC, "url": generic.url + "api/chat"}, RunContext())


def test_secret_header_value_stays_out_of_errors_and_records(generic, tmp_path):
    record = tmp_path / "rec.jsonl"
    generic.faults = type(generic.faults)(FaultPlan(rates={"http_500": 1.0}))
    section = {**GENERIC, "url": generic.url + "api/chat", "retries": 0, "record_to": str(record)}
    with pytest.raises(ConnectorError) as failure:
        asyncio.run(scripted_conversation(section, RunContext(), ["hi"]))
    assert "s3cret" not in str(failure.value)
    assert "s3cret" not in record.read_text()


def test_unknown_option_is_rejected():
    with pytest.raises(ConfigError, match="unknown key 'crs.txt_path'"):
        build_connector({**GENERIC, "url": "http://127.0.0.1:9/", "txt_path": "x"}, RunContext())


def test_missing_text_path_is_retried_then_reported(generic):
    section = {**GENERIC, "url": generic.url + "api/chat", "text_path": "reply.message", "retries": 1, "backoff_s": 0}
    with pytest.raises(ConnectorError, match=r"^reply without 'reply.message' \(after 2 attempts\)$"):
        asyncio.run(scripted_conversation(section, RunContext(), ["hi"]))


def test_backoff_is_seeded_per_conversation():
    options = HTTPOptions(type="http", url="http://x/", backoff_s=1.0, max_backoff_s=100)
    one, two = HTTPTransport(options, RunContext()), HTTPTransport(options, RunContext())
    one.reset_session("conv-1", 7)
    two.reset_session("conv-1", 7)
    delays = [one.backoff(k) for k in range(1, 5)]
    assert delays == [two.backoff(k) for k in range(1, 5)]
    assert all(0.5 * 2**i <= d <= 2**i for i, d in enumerate(delays))
    two.reset_session("conv-2", 7)
    assert [two.backoff(k) for k in range(1, 5)] != delays


def test_size_units_read_naturally():
    assert format_size(1_000_000) == "1 MB"
    assert format_size(50_000) == "50 kB"
    assert format_size(512) == "512 bytes"


@pytest.mark.parametrize(("retry_after", "cap", "low", "high"), [("0.2", 5.0, 0.2, 1.0), ("30", 0.1, 0.1, 1.0)])
def test_retry_after_of_a_crs_is_honoured_up_to_the_cap(retry_after, cap, low, high):
    answers = iter([httpx.Response(429, headers={"Retry-After": retry_after}), httpx.Response(200, json={"ok": 1})])

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda request: next(answers))) as client:
            options = HTTPOptions(type="http", url="http://crs/", retries=1, backoff_s=0, max_backoff_s=cap)
            transport = HTTPTransport(options, SimpleNamespace(http=client, run_seed=0))
            started = time.perf_counter()
            body = await transport.call("POST", "http://crs/", lambda answer: answer.json(), json_body={})
            return body, time.perf_counter() - started, transport.attempts

    body, elapsed, attempts = asyncio.run(scenario())
    assert body == {"ok": 1} and attempts == 2
    assert low <= elapsed < high
