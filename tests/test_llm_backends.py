"""The `openai` and `ollama` backends against a real local server speaking each protocol."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from usersimcrs.errors import LLMError
from usersimcrs.llm import LLMProvider, Message
from usersimcrs.llm.backends.common import ollama_host
from usersimcrs.llm.config import LLMConfig
from usersimcrs.testing import LLMServer

BACKENDS = ["openai", "ollama"]
CLIENTS = ["official", "lean"]  # the libraries' own clients and the lean one speak the same protocol
SCHEMA = {
    "type": "object",
    "properties": {"intent": {"type": "string", "enum": ["ask", "accept", "reject"]}, "score": {"type": "integer"}},
    "required": ["intent", "score"],
}
HELLO = [Message(role="system", content="You are a movie fan."), Message(role="user", content="Suggest a comedy")]


def run(coro):
    return asyncio.run(coro)


async def complete_once(config: LLMConfig, messages=HELLO, **kwargs):
    provider = LLMProvider(config)
    try:
        result = await provider.get("simulator").complete(messages, **kwargs)
        return result, provider.usage_summary()
    finally:
        await provider.aclose()


def schema_sent(request, backend: str):
    """The JSON schema a logged request carried, read from the field each protocol defines."""
    if backend == "openai":
        fmt = request.body["response_format"]
        assert fmt["type"] == "json_schema"
        return fmt["json_schema"]["schema"]
    return request.body["format"]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_plain_completion_goes_over_the_wire(backend, client):
    with LLMServer(replies=["I would love a comedy from the nineties."]) as server:
        result, usage = run(
            complete_once(server.config(backend, client=client), max_tokens=33, temperature=0.0, seed=7)
        )
        (request,) = server.chat_requests
    assert result.text == "I would love a comedy from the nineties."
    assert result.backend == backend and result.model == "test-model" and not result.cached
    assert result.usage.completion_tokens == 8 and result.usage.prompt_tokens == 8
    assert request.body["messages"] == [m.model_dump() for m in HELLO]
    if backend == "openai":
        assert request.path == "/v1/chat/completions"
        assert request.body["max_tokens"] == 33 and request.body["seed"] == 7
    else:
        assert request.path == "/api/chat" and request.body["stream"] is False
        assert request.body["options"] == {"temperature": 0.0, "num_predict": 33, "seed": 7}
    assert usage["calls"] == 1 and usage["retries"] == 0 and usage["completion_tokens"] == 8


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_structured_output_sends_schema_and_parses_reply(backend, client):
    with LLMServer() as server:  # default replies: a JSON value derived from the prompt and schema
        result, _ = run(complete_once(server.config(backend, client=client), schema=SCHEMA))
        (request,) = server.chat_requests
    assert schema_sent(request, backend) == SCHEMA
    assert result.parse_error is None
    assert result.parsed == json.loads(result.text)
    assert result.parsed["intent"] in {"ask", "accept", "reject"} and isinstance(result.parsed["score"], int)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_structured_output_tolerates_fences_and_prose(backend, client):
    reply = 'Sure! Here it is:\n```json\n{"intent": "accept", "score": 4}\n```\nAnything else?'
    with LLMServer(replies=[reply]) as server:
        result, _ = run(complete_once(server.config(backend, client=client), schema=SCHEMA))
    assert result.parsed == {"intent": "accept", "score": 4}


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_unparseable_output_is_retried_then_reported_not_raised(backend, client):
    replies = ["no json here", '{"intent": "maybe", "score": 1}', "still nothing"]
    with LLMServer(replies=replies) as server:
        result, usage = run(
            complete_once(server.config(backend, client=client, retries=2, backoff_s=0.001), schema=SCHEMA)
        )
        temperatures = [
            r.body.get("temperature", r.body.get("options", {}).get("temperature")) for r in server.chat_requests
        ]
    assert result.parsed is None
    assert "after 3 attempts" in result.parse_error
    assert result.text == "still nothing"
    assert usage["calls"] == 1 and usage["retries"] == 2 and usage["errors"] == 1
    assert temperatures[0] == 0.0 and temperatures[1] > 0  # retries resample instead of repeating


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_unparseable_then_valid_json_succeeds(backend, client):
    with LLMServer(replies=["oops", '{"intent": "ask", "score": 2}']) as server:
        result, usage = run(complete_once(server.config(backend, client=client, backoff_s=0.001), schema=SCHEMA))
    assert result.parsed == {"intent": "ask", "score": 2} and result.parse_error is None
    assert usage["retries"] == 1 and usage["errors"] == 0


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_server_error_then_success_is_retried(backend, client):
    with LLMServer(replies=["recovered"], faults=["500"]) as server:
        result, usage = run(complete_once(server.config(backend, client=client, backoff_s=0.01)))
        assert server.counters["faults"] == {"500": 1} and server.counters["chat"] == 2
    assert result.text == "recovered"
    assert usage["calls"] == 1 and usage["retries"] == 1 and usage["errors"] == 0


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fault", ["malformed", "empty", "reset"])
def test_broken_replies_are_retried(backend, fault, client):
    with LLMServer(replies=["fine now"], faults=[fault, fault]) as server:
        result, usage = run(complete_once(server.config(backend, client=client, backoff_s=0.001)))
        assert server.counters["chat"] == 3
    assert result.text == "fine now" and usage["retries"] == 2


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_malformed_body_every_time_raises_llm_error(backend, client):
    with LLMServer(faults=["malformed"] * 3) as server:
        with pytest.raises(LLMError, match="malformed") as caught:
            run(complete_once(server.config(backend, client=client, retries=2, backoff_s=0.001)))
        assert server.counters["chat"] == 3
    assert "after 3 attempts" in str(caught.value)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_raises_llm_error_after_retries_within_bounded_time(backend, client):
    with LLMServer(faults=["hang"] * 5, hang_s=10) as server:
        config = server.config(backend, client=client, timeout_s=0.3, retries=2, backoff_s=0.01)
        started = time.perf_counter()
        with pytest.raises(LLMError, match="within 0.3s") as caught:
            run(complete_once(config))
        elapsed = time.perf_counter() - started
        # each attempt that reached the server hung there; on a loaded machine an attempt can time out
        # before its request is read (the official clients connect inside the 0.3 s), so the server may
        # count fewer than the three attempts the error reports, never more
        assert 1 <= server.counters["chat"] <= 3
    assert 0.9 <= elapsed < 8.0  # three 0.3 s timeouts, far from one 10 s hang
    assert "after 3 attempts" in str(caught.value)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_rate_limit_waits_for_retry_after(backend, client):
    with LLMServer(replies=["after the wait"], faults=["429"], retry_after_s=1) as server:
        started = time.perf_counter()
        result, usage = run(complete_once(server.config(backend, client=client, backoff_s=0.001)))
        elapsed = time.perf_counter() - started
    assert result.text == "after the wait" and usage["retries"] == 1
    assert 1.0 <= elapsed < 2.5  # the 1 s Retry-After was honoured, not the 1 ms backoff


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_retry_after_is_capped_by_max_wait(backend, client):
    with LLMServer(replies=["ok"], faults=["429"], retry_after_s=30) as server:
        started = time.perf_counter()
        result, _ = run(complete_once(server.config(backend, client=client, backoff_s=0.001, max_wait_s=0.2)))
    assert result.text == "ok" and time.perf_counter() - started < 2.0


def test_client_errors_are_not_retried():
    with LLMServer() as server:
        config = LLMConfig(backend="openai", model="m", base_url=server.url + "/wrong/v1", retries=3, backoff_s=0.001)
        with pytest.raises(LLMError, match="HTTP 404"):
            run(complete_once(config))
        assert len(server.requests) == 1


def test_openai_key_and_headers_come_from_environment(monkeypatch):
    monkeypatch.setenv("MY_LLM_KEY", "sk-test-secret-1234")
    monkeypatch.setenv("MY_ORG_HEADER", "org-secret-5678")
    with LLMServer() as server:
        config = server.config("openai", api_key_env="MY_LLM_KEY", headers_env={"X-Org": "MY_ORG_HEADER"})
        run(complete_once(config))
        (request,) = server.chat_requests
    headers = {k.lower(): v for k, v in request.headers.items()}
    assert headers["authorization"] == "Bearer sk-test-secret-1234"
    assert headers["x-org"] == "org-secret-5678"


def test_local_openai_server_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with LLMServer(replies=["hi"]) as server:
        result, _ = run(complete_once(server.config("openai")))
    assert result.text == "hi"


def test_remote_openai_without_key_is_a_config_error(monkeypatch):
    from usersimcrs.errors import ConfigError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = LLMProvider(LLMConfig(backend="openai", base_url="https://llm.example.org/v1"))
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        provider.get("judge")


def test_missing_header_variable_is_a_config_error(monkeypatch):
    from usersimcrs.errors import ConfigError

    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    with LLMServer() as server:
        provider = LLMProvider(server.config("ollama", headers_env={"X-Token": "NOT_SET_ANYWHERE"}))
        with pytest.raises(ConfigError, match="headers_env.X-Token"):
            provider.get("judge")


def test_ollama_host_comes_from_environment(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "10.1.2.3:11434")
    assert ollama_host(LLMConfig(backend="ollama")) == "http://10.1.2.3:11434"
    assert ollama_host(LLMConfig(backend="ollama", base_url="http://h:1")) == "http://h:1"
    with LLMServer(replies=["via env"]) as server:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        result, _ = run(complete_once(LLMConfig(backend="ollama", model="test-model")))
        assert server.chat_requests[0].path == "/api/chat"
    assert result.text == "via env"
