"""LLMProvider: response cache, per-component models, shared instances, usage, concurrency cap."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from usersimcrs.llm import LLMProvider, Message
from usersimcrs.llm.cache import CACHE_FILE
from usersimcrs.testing import LLMServer

ASK = [Message(role="user", content="Recommend me a thriller")]
COUNT_KEYS = {"calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "errors"}


def run(coro):
    return asyncio.run(coro)


async def ask_many(provider: LLMProvider, component: str, n: int, **kwargs):
    llm = provider.get(component)
    return [await llm.complete(ASK, **kwargs) for _ in range(n)]


@pytest.mark.parametrize("backend", ["openai", "ollama"])
def test_second_identical_call_is_a_cache_hit(backend, tmp_path):
    with LLMServer() as server:

        async def scenario():
            provider = LLMProvider(server.config(backend), cache_dir=str(tmp_path))
            results = await ask_many(provider, "simulator", 2, seed=3)
            summary = provider.usage_summary()
            await provider.aclose()
            return results, summary

        (first, second), summary = run(scenario())
        assert server.counters["chat"] == 1
    assert not first.cached and second.cached
    assert second.text == first.text and second.usage == first.usage
    assert summary["calls"] == 1 and summary["cache_hits"] == 1
    assert set(summary) == COUNT_KEYS | {"by_component", "by_model"}
    assert summary["by_component"]["simulator"]["cache_hits"] == 1


def test_cache_persists_across_provider_instances(tmp_path):
    with LLMServer() as server:

        async def one_run():
            provider = LLMProvider(server.config("openai"), cache_dir=str(tmp_path))
            result = await provider.get("judge").complete(
                ASK, schema={"type": "object", "properties": {"x": {"type": "integer"}}}
            )
            summary = provider.usage_summary()
            await provider.aclose()
            return result, summary

        first, first_usage = run(one_run())
        second, second_usage = run(one_run())
        assert server.counters["chat"] == 1
    assert first_usage["calls"] == 1 and second_usage["calls"] == 0 and second_usage["cache_hits"] == 1
    assert second.cached and second.parsed == first.parsed and second.text == first.text
    assert (tmp_path / CACHE_FILE).is_file()


def test_cache_dir_comes_from_environment_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("USERSIMCRS_CACHE_DIR", str(tmp_path / "envcache"))
    with LLMServer() as server:
        provider = LLMProvider(server.config("ollama"))
        run(ask_many(provider, "nlg", 1))
        run(provider.aclose())
    assert (tmp_path / "envcache" / CACHE_FILE).is_file()


def test_sampled_calls_are_cached_per_seed_and_not_without_seed(tmp_path):
    with LLMServer() as server:

        async def scenario():
            provider = LLMProvider(server.config("openai"), cache_dir=str(tmp_path))
            llm = provider.get("simulator")
            for seed in (1, 1, 2, None, None):
                await llm.complete(ASK, temperature=0.8, seed=seed)
            summary = provider.usage_summary()
            await provider.aclose()
            return summary

        summary = run(scenario())
        assert server.counters["chat"] == 4
    assert summary["calls"] == 4 and summary["cache_hits"] == 1


def test_cache_can_be_switched_off(tmp_path):
    with LLMServer() as server:
        provider = LLMProvider(server.config("openai", cache=False), cache_dir=str(tmp_path))
        run(ask_many(provider, "simulator", 2))
        assert server.counters["chat"] == 2
        run(provider.aclose())
    assert not (tmp_path / CACHE_FILE).exists()


def test_failed_parses_are_not_cached(tmp_path):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    with LLMServer(replies=["nope"] * 2 + ['{"ok": true}']) as server:

        async def one_run():
            provider = LLMProvider(server.config("openai", retries=1, backoff_s=0.001), cache_dir=str(tmp_path))
            result = await provider.get("judge").complete(ASK, schema=schema)
            await provider.aclose()
            return result

        assert run(one_run()).parsed is None
        assert run(one_run()).parsed == {"ok": True}


def test_component_overrides_route_to_different_models(tmp_path):
    with LLMServer(models=["small", "large"]) as server:
        components = {
            "judge": {"model": "large"},
            "nlg": {"model": "large", "backend": "ollama", "base_url": server.url},
        }

        async def scenario():
            provider = LLMProvider(server.config("openai", model="small"), components, cache_dir=str(tmp_path))
            await ask_many(provider, "simulator", 1)
            await ask_many(provider, "judge", 2, seed=1, temperature=0.5)
            await ask_many(provider, "nlg", 1)
            models = provider.models()
            summary = provider.usage_summary()
            await provider.aclose()
            return models, summary

        models, summary = run(scenario())
        by_model = server.counters["by_model"]
        paths = sorted({r.path for r in server.chat_requests})
    assert models == {"judge": "openai:large", "nlg": "ollama:large", "simulator": "openai:small"}
    assert by_model == {"small": 1, "large": 2}
    assert paths == ["/api/chat", "/v1/chat/completions"]
    assert summary["by_model"]["openai:large"]["calls"] == 1 and summary["by_model"]["openai:large"]["cache_hits"] == 1
    assert {k: summary["by_component"]["judge"][k] for k in COUNT_KEYS} == {
        "calls": 1,
        "cache_hits": 1,
        "prompt_tokens": 4,
        "completion_tokens": summary["by_component"]["judge"]["completion_tokens"],
        "retries": 0,
        "errors": 0,
    }
    assert summary["by_component"]["simulator"]["calls"] == 1 and summary["by_component"]["nlg"]["calls"] == 1


def test_usage_is_summed_per_component_and_overall(tmp_path):
    with LLMServer(replies=lambda body: "one two three") as server:
        provider = LLMProvider(server.config("openai", cache=False))

        async def scenario():
            await ask_many(provider, "simulator", 3)
            await ask_many(provider, "judge", 2)
            await provider.get("simulator").complete(ASK, component="nlu")
            return provider.usage_summary()

        summary = run(scenario())
        run(provider.aclose())
    by = summary["by_component"]
    assert by["simulator"]["calls"] == 3 and by["simulator"]["completion_tokens"] == 9
    assert by["judge"]["calls"] == 2 and by["judge"]["prompt_tokens"] == 8
    assert by["nlu"]["calls"] == 1  # the component named in the call wins over the bound one
    assert summary["calls"] == 6 and summary["completion_tokens"] == 18 and summary["prompt_tokens"] == 24
    assert summary["by_model"] == {"openai:test-model": {k: summary[k] for k in COUNT_KEYS}}


def test_components_with_equal_configs_share_one_backend(tmp_path):
    with LLMServer() as server:
        provider = LLMProvider(server.config("openai"), {"judge": {"model": "other"}}, cache_dir=str(tmp_path))
        sim, nlu, judge = provider.get("simulator"), provider.get("nlu"), provider.get("judge")
        assert sim.slot is nlu.slot and sim.slot.backend is nlu.slot.backend
        assert judge.slot is not sim.slot
        assert provider.get("simulator") is sim
        run(provider.aclose())


def test_concurrency_is_capped_per_backend_under_load(tmp_path):
    with LLMServer(latency_ms=40) as server:
        provider = LLMProvider(server.config("openai", max_concurrency=4, cache=False))

        async def scenario():
            llm = provider.get("simulator")
            messages = [[Message(role="user", content=f"request {i}")] for i in range(64)]
            results = await asyncio.gather(*(llm.complete(m) for m in messages))
            await provider.aclose()
            return results

        results = run(scenario())
        counters = server.counters
    assert len({r.text for r in results}) == 64
    assert counters["chat"] == 64 and counters["max_in_flight"] == 4


def test_same_config_seed_and_cache_give_same_results(tmp_path):
    prompts = [[Message(role="user", content=f"turn {i}")] for i in range(10)]

    def one_run(server, cache_dir):
        server.set_faults(["500", None, "malformed"])
        provider = LLMProvider(server.config("ollama", backoff_s=0.001), cache_dir=str(cache_dir))

        async def scenario():
            llm = provider.get("simulator")
            out = [await llm.complete(p, temperature=0.7, seed=11) for p in prompts]
            await provider.aclose()
            return [r.text for r in out], provider.usage_summary()

        return run(scenario())

    with LLMServer() as server:  # one server: the cache key includes the base URL (and so the port)
        first, first_usage = one_run(server, tmp_path / "a")
        again, _ = one_run(server, tmp_path / "b")
        cached, cached_usage = one_run(server, tmp_path / "a")
    assert first == again == cached
    assert first_usage["calls"] == 10 and first_usage["retries"] == 2
    assert cached_usage["calls"] == 0 and cached_usage["cache_hits"] == 10


def test_cache_holds_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-key-0001")
    monkeypatch.setenv("TEAM_TOKEN", "tok-very-secret-0002")
    with LLMServer() as server:
        provider = LLMProvider(server.config("openai", headers_env={"X-Team": "TEAM_TOKEN"}), cache_dir=str(tmp_path))
        run(ask_many(provider, "judge", 1))
        run(provider.aclose())
    blobs = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert blobs, "the cache wrote nothing"
    assert b"sk-very-secret-key-0001" not in blobs and b"tok-very-secret-0002" not in blobs
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] == 1


def test_mixed_faults_every_request_ends_accounted_for(tmp_path):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    shares = {"malformed": 0.15, "empty": 0.05, "500": 0.05, "429": 0.03, "reset": 0.02}
    with LLMServer(fault_share=shares, retry_after_s=0, seed=9) as server:
        provider = LLMProvider(server.config("openai", cache=False, backoff_s=0.001, retries=2, max_concurrency=16))

        async def scenario():
            llm = provider.get("simulator")
            calls = [llm.complete([Message(role="user", content=f"q{i}")], schema=schema) for i in range(120)]
            outcomes = await asyncio.gather(*calls, return_exceptions=True)
            await provider.aclose()
            return outcomes

        outcomes = run(scenario())
        counters = server.counters
    failed = [o for o in outcomes if isinstance(o, Exception)]
    unparsed = [o for o in outcomes if not isinstance(o, Exception) and o.parsed is None]
    good = [o for o in outcomes if not isinstance(o, Exception) and o.parsed is not None]
    summary = provider.usage_summary()
    assert all(type(e).__name__ == "LLMError" and "after 3 attempts" in str(e) for e in failed)
    assert all(o.parse_error for o in unparsed)
    assert all(isinstance(o.parsed["n"], int) for o in good) and len(good) >= 105
    assert summary["calls"] == 120 and summary["errors"] == len(failed) + len(unparsed)
    assert summary["retries"] == counters["chat"] - 120 and summary["retries"] >= 20


CUT_SCHEMA = {
    "type": "object",
    "properties": {"end": {"type": "boolean"}, "utterance": {"type": "string"}},
    "required": ["end", "utterance"],
}


@pytest.mark.parametrize("backend", ["openai", "ollama"])
def test_answer_cut_at_the_token_cap_is_closed_and_kept_without_a_retry(backend, tmp_path):
    reply = '{"end": false, "utterance": "something tense and dark, like a night drive through the city"}'
    with LLMServer(replies=[reply] * 3) as server:
        provider = LLMProvider(server.config(backend, cache=False, backoff_s=5.0))

        async def ask():
            result = await provider.get("simulator").complete(ASK, schema=CUT_SCHEMA, max_tokens=6)
            await provider.aclose()
            return result

        result = run(ask())
        assert server.counters["chat"] == 1  # a retry at the same cap would be cut off again
    assert result.truncated and result.parse_error is None
    assert result.parsed == {"end": False, "utterance": "something tense and"}
    assert provider.usage_summary()["retries"] == 0


def test_unparseable_answer_is_resampled_at_once_not_after_a_backoff(tmp_path):
    with LLMServer(replies=["I would say yes.", "still prose", '{"ok": true}']) as server:
        provider = LLMProvider(server.config("openai", cache=False, retries=2, backoff_s=30.0))
        schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

        async def ask():
            started = asyncio.get_running_loop().time()
            result = await provider.get("judge").complete(ASK, schema=schema)
            await provider.aclose()
            return result, asyncio.get_running_loop().time() - started

        (result, elapsed) = run(ask())
    assert result.parsed == {"ok": True} and not result.truncated
    assert provider.usage_summary()["retries"] == 2 and elapsed < 10  # a 30 s backoff would have been waited twice


def test_a_cut_off_answer_replayed_from_the_cache_is_still_marked_truncated(tmp_path):
    reply = '{"end": false, "utterance": "something tense and dark, like a night drive through the city"}'
    with LLMServer(replies=[reply] * 3) as server:

        async def ask():
            provider = LLMProvider(server.config("openai", backoff_s=5.0), cache_dir=str(tmp_path))
            result = await provider.get("simulator").complete(ASK, schema=CUT_SCHEMA, max_tokens=6)
            await provider.aclose()
            return result

        first, second = run(ask()), run(ask())
        assert server.counters["chat"] == 1
    assert second.cached and second.truncated and second.parsed == first.parsed
