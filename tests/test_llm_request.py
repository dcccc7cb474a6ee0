"""The built-in backends share one `complete` (llm/base.py `RawBackend`): each makes only its raw `call`."""

from __future__ import annotations

import asyncio

import pytest

from usersimcrs.core.usage import Usage
from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded
from usersimcrs.llm.backends.ollama_chat import OllamaChat
from usersimcrs.llm.backends.openai_chat import OpenAIChat
from usersimcrs.llm.base import ChatRequest, Message, RawBackend, token_usage
from usersimcrs.llm.managed import ManagedLLM


class _Echo(RawBackend):
    """Answers with the request's last message and reports the counts it was given."""

    backend = "echo"
    model = "echo-1"

    def __init__(self) -> None:
        self.requests: list[ChatRequest] = []

    async def call(self, request: ChatRequest) -> tuple[str, Usage]:
        self.requests.append(request)
        return request.messages[-1].content, token_usage("7", None)


@pytest.mark.parametrize("backend", [OllamaChat, OpenAIChat, LlamaCppEmbedded, ManagedLLM])
def test_one_complete_for_every_builtin(backend):
    assert "complete" not in vars(backend)


def test_complete_bundles_the_request_and_times_the_call():
    llm = _Echo()
    result = asyncio.run(
        llm.complete([Message(role="user", content="hi")], temperature=0.5, max_tokens=9, seed=3, schema={"x": 1})
    )
    assert llm.requests == [ChatRequest([Message(role="user", content="hi")], 0.5, 9, 3, {"x": 1})]
    assert (result.text, result.model, result.backend) == ("hi", "echo-1", "echo")
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (7, 0)
    assert result.latency_s >= 0


def test_token_usage_refuses_a_count_that_is_not_a_number():
    with pytest.raises(ValueError):
        token_usage("many", 1)
