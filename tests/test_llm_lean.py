"""`client: lean` of the openai and ollama backends against the real local LLM server.

The protocol behaviours shared with the official clients run for both clients in
tests/test_llm_backends.py; here: wire parity with the official client, failures only this client
meets its own way, reuse across event loops, and the connection pool.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from usersimcrs.errors import LLMError
from usersimcrs.llm import LLMProvider, Message
from usersimcrs.testing import LLMServer

BACKENDS = ["openai", "ollama"]
SCHEMA = {
    "type": "object",
    "properties": {"intent": {"type": "string", "enum": ["ask", "accept", "reject"]}, "score": {"type": "integer"}},
    "required": ["intent", "score"],
}
HELLO = [Message(role="system", content="You are a movie fan."), Message(role="user", content="Suggest a comedy")]


def lean(server: LLMServer, backend: str, **overrides):
    """A config for `backend` on `server` using the lean client."""
    return server.config(backend, client="lean", **overrides)


async def complete_once(config, messages=HELLO, **kwargs):
    provider = LLMProvider(config)
    try:
        result = await provider.get("simulator").complete(messages, **kwargs)
        return result, provider.usage_summary()
    finally:
        await provider.aclose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_wire_request_as_the_official_client(backend, monkeypatch):
    monkeypatch.setenv("WIRE_KEY", "sk-wire-secret-0001")
    monkeypatch.setenv("WIRE_HEADER", "hdr-secret-0002")
    extra = {"api_key_env": "WIRE_KEY", "headers_env": {"X-Team": "WIRE_HEADER"}, "options": {"top_p": 0.5}}
    extra["cache"] = False  # the second server may get the first one's port: a cache hit would send nothing
    bodies, headers = {}, {}
    for client in ("official", "lean"):
        with LLMServer(replies=['{"intent": "ask", "score": 3}']) as server:
            config = server.config(backend, client=client, **extra)
            asyncio.run(complete_once(config, max_tokens=20, temperature=0.3, seed=4, schema=SCHEMA))
            (request,) = server.chat_requests
        bodies[client] = request.body
        headers[client] = {k.lower(): v for k, v in request.headers.items()}
    assert bodies["lean"] == bodies["official"]
    assert headers["lean"]["x-team"] == headers["official"]["x-team"] == "hdr-secret-0002"
    if backend == "openai":
        assert headers["lean"]["authorization"] == headers["official"]["authorization"] == "Bearer sk-wire-secret-0001"


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_completion_every_time_raises_llm_error(backend):
    with LLMServer(faults=["empty"] * 2) as server:
        with pytest.raises(LLMError, match="empty completion"):
            asyncio.run(complete_once(lean(server, backend, retries=1, backoff_s=0.001)))


def test_client_errors_are_not_retried_and_secrets_are_scrubbed(monkeypatch):
    monkeypatch.setenv("LEAN_KEY", "sk-never-shown-9999")
    with LLMServer() as server:
        config = server.config("openai", client="lean", api_key_env="LEAN_KEY", retries=3, backoff_s=0.001)
        config = config.model_copy(update={"base_url": server.url + "/wrong/v1"})
        with pytest.raises(LLMError, match="HTTP 404") as caught:
            asyncio.run(complete_once(config))
        assert len(server.requests) == 1
    assert "sk-never-shown-9999" not in str(caught.value)


def test_connection_refused_is_transient_and_reported():
    with LLMServer() as server:
        config = lean(server, "openai", retries=1, backoff_s=0.001)
    with pytest.raises(LLMError, match="connection failed") as caught:  # the server is gone now
        asyncio.run(complete_once(config))
    assert "after 2 attempts" in str(caught.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_provider_serves_several_event_loops(backend):
    """A provider used by two `asyncio.run` calls makes a fresh session for the second loop."""
    with LLMServer(replies=["first", "second", "third"]) as server:
        provider = LLMProvider(lean(server, backend, cache=False))
        llm = provider.get("simulator")
        first = asyncio.run(llm.complete(HELLO))
        second = asyncio.run(llm.complete(HELLO))

        async def last():
            try:
                return await llm.complete(HELLO)
            finally:
                await provider.aclose()

        third = asyncio.run(last())
    assert [first.text, second.text, third.text] == ["first", "second", "third"]


def test_concurrent_calls_share_a_bounded_pool():
    with LLMServer(latency_ms=50) as server:
        provider = LLMProvider(lean(server, "openai", cache=False, max_concurrency=16))
        llm = provider.get("simulator")

        async def burst():
            try:
                started = time.perf_counter()
                messages = [[Message(role="user", content=f"question {i}")] for i in range(64)]
                results = await asyncio.gather(*(llm.complete(m) for m in messages))
                client = llm.slot.backend._lean.client
                kept = sum(len(idle) for idle in client._state.idle.values())
                return results, time.perf_counter() - started, (client.connections, kept)
            finally:
                await provider.aclose()

        results, elapsed, limit = asyncio.run(burst())
    assert len({r.text for r in results}) > 1 and all(r.text for r in results)
    assert limit[0] == 16 and 1 < limit[1] <= 16  # no more connections than the cap, reused afterwards
    assert 0.2 <= elapsed < 2.0  # 64 calls, 16 at a time, 50 ms each: about 4 rounds
    assert provider.usage_summary()["calls"] == 64


def test_configs_written_with_the_former_client_name_still_validate():
    """`client: aiohttp` (the lean client's name before it left aiohttp, which spoke TLS and honoured proxies)
    reads as `auto`, the default; other names fail."""
    from pydantic import ValidationError

    from usersimcrs.llm.config import LLMConfig

    assert LLMConfig(client="aiohttp").client == "auto" == LLMConfig().client
    with pytest.raises(ValidationError, match="client"):
        LLMConfig(client="requests")
