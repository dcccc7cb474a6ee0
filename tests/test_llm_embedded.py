"""The embedded llama.cpp backend generating real tokens under a JSON schema (Gemma 3 270M)."""

from __future__ import annotations

import asyncio

import pytest

from usersimcrs.llm import LLMProvider, Message
from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded, grammar_schema, plain_prompt
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.structured import validate

SCHEMA = {
    "type": "object",
    "properties": {
        "genre": {"type": "string", "enum": ["comedy", "drama", "horror", "thriller"]},
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["genre", "rating"],
}


def test_grammar_schema_spells_out_integer_ranges():
    tight = grammar_schema(SCHEMA)
    assert tight["properties"]["rating"] == {"enum": [1, 2, 3, 4, 5]}
    assert tight["properties"]["genre"] == SCHEMA["properties"]["genre"]
    assert grammar_schema({"type": "integer", "minimum": 0}) == {"type": "integer", "minimum": 0}


def test_plain_prompt_for_base_models():
    prompt, stops = plain_prompt([Message(role="system", content="Be brief."), Message(role="user", content="Hi")])
    assert prompt == "Instructions: Be brief.\n\nUser: Hi\n\nAssistant:"
    assert "\n\nUser:" in stops


@pytest.mark.embedded
def test_embedded_model_generates_schema_valid_json(embedded_model_path, tmp_path):
    config = LLMConfig(backend="llamacpp", model_path=embedded_model_path, n_ctx=512, n_threads=2)
    messages = [
        Message(role="system", content="Reply with JSON only."),
        Message(
            role="user",
            content="I laughed all through my favourite film. Which genre is it, and how much did I like it from 1 to 5?",
        ),
    ]

    async def scenario():
        provider = LLMProvider(config, cache_dir=str(tmp_path))
        llm = provider.get("judge")
        first = await llm.complete(messages, max_tokens=40, schema=SCHEMA, seed=1)
        again = await llm.complete(messages, max_tokens=40, schema=SCHEMA, seed=1)
        summary = provider.usage_summary()
        await provider.aclose()
        return first, again, summary

    first, again, summary = asyncio.run(scenario())
    assert first.backend == "llamacpp" and not first.cached
    assert first.parse_error is None, first.text
    assert validate(first.parsed, SCHEMA) == []
    assert first.usage.completion_tokens > 0 and first.usage.prompt_tokens > 10
    assert again.cached and again.parsed == first.parsed
    assert summary["calls"] == 1 and summary["cache_hits"] == 1


@pytest.mark.embedded
def test_loads_in_parallel_threads_leave_stdout_and_stderr_where_they_were(embedded_model_path):
    import os
    import threading

    from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded

    def target(fd: int) -> tuple[int, int]:
        info = os.fstat(fd)
        return info.st_dev, info.st_ino

    before = [target(1), target(2)]
    backends = [
        LlamaCppEmbedded(LLMConfig(backend="llamacpp", model_path=embedded_model_path, n_ctx=256, n_threads=1))
        for _ in range(4)
    ]
    start = threading.Barrier(len(backends))

    def load(backend) -> None:
        start.wait()
        with backend._lock:
            backend._load()

    threads = [threading.Thread(target=load, args=(b,)) for b in backends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert all(b._llama is not None for b in backends)
        # `n_threads` is every thread llama.cpp uses, prompt processing included (its default: one per CPU)
        assert {(b._llama.context_params.n_threads, b._llama.context_params.n_threads_batch) for b in backends} == {
            (1, 1)
        }
        assert [target(1), target(2)] == before  # not /dev/null, as unserialised loads could leave them
    finally:
        for backend in backends:
            asyncio.run(backend.aclose())


def test_n_threads_all_is_every_cpu_this_process_may_use(monkeypatch):
    from usersimcrs.llm.config import llama_threads

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    assert llama_threads("all") == 3
    assert llama_threads(None) is None  # llama.cpp's own default
    assert llama_threads(1) == 1
    with pytest.raises(ValueError, match="n_threads"):
        LLMConfig(backend="llamacpp", n_threads="every")


@pytest.mark.embedded
def test_the_embedded_model_runs_on_the_threads_the_config_names(embedded_model_path, monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    backend = LlamaCppEmbedded(LLMConfig(backend="llamacpp", model_path=embedded_model_path, n_ctx=64, n_threads="all"))
    with backend._lock:
        llama = backend._load()
    assert (llama.n_threads, llama.n_threads_batch) == (2, 2)
    asyncio.run(backend.aclose())
