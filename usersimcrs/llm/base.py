"""The one LLM interface every backend implements, and the records it returns."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.http_route import Client, Route
from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.core.usage import Usage


class Message(BaseModel):
    """A chat message."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: Literal["system", "user", "assistant"]
    content: str


class LLMResult(BaseModel):
    """What `LLM.complete` returns: text, the parsed JSON when a schema was given, and accounting."""

    text: str
    parsed: JSON = None  # the structured answer, validated against the schema it was asked for
    truncated: bool = Field(False, description="structured output cut off at max_tokens, closed, then validated")
    usage: Usage = Field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    model: str = ""
    backend: str = ""
    parse_error: str | None = None


@dataclass(frozen=True)
class PreflightTarget:
    """Where a backend's preflight sends its one cheap GET (the server's model list: no tokens, no model
    load) and with which headers (the run's key among them, never shown)."""

    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    key_env: str | None = None  # the *name* of the variable holding the key, for the message on a refused key
    client: Client = "lean"  # the client of the backend's calls: the check goes the same way (core/http_route.py)


class LLM(ABC):
    """A chat model behind one call site for caching, retries, limits and accounting.

    `component` names who is calling (simulator, nlu, nlg, judge, ...) so usage can be summed
    per component and per model.
    """

    backend: str = "abstract"
    model: str = ""
    max_parallel_calls: int | None = None  # a backend that serves fewer calls at once caps its slot to this
    route: Route | None = None  # an HTTP backend: where its calls go and through which client (manifest)

    @abstractmethod
    async def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        schema: JSONSchema | None = None,
        component: str = "default",
    ) -> LLMResult:
        """Complete a chat; with `schema`, the reply is constrained to it and parsed into `parsed`."""

    def preflight_target(self) -> PreflightTarget | None:
        """The request that shows, before a command's first call, that the server answers and takes our
        credentials (`llm/preflight.py`); None: nothing to reach (the embedded model), not checked."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release connections."""


@dataclass(frozen=True)
class ChatRequest:
    """One call's request as `LLM.complete` takes it, bundled once so the code below passes one value."""

    messages: list[Message]
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int | None = None
    schema: JSONSchema | None = None


class RequestLLM(LLM):
    """An LLM written against one `ChatRequest` (the built-in backends and the managed call site):
    `complete` bundles its keywords here, once, and hands them to `respond`."""

    async def complete(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int | None = None,
        schema: JSONSchema | None = None,
        component: str = "default",
    ) -> LLMResult:
        """Complete a chat (see `LLM.complete`) through `respond`."""
        return await self.respond(ChatRequest(messages, temperature, max_tokens, seed, schema), component)

    @abstractmethod
    async def respond(self, request: ChatRequest, component: str) -> LLMResult:
        """Answer one request for `component`."""


class RawBackend(RequestLLM):
    """A built-in backend: one raw call per request (`call`: the text and its token counts), timed and
    returned as an `LLMResult`; failures come out as TransientLLMError or PermanentLLMError."""

    async def respond(self, request: ChatRequest, component: str) -> LLMResult:
        """One raw call, its latency measured around it."""
        started = time.perf_counter()
        text, usage = await self.call(request)
        return LLMResult(
            text=text, usage=usage, latency_s=time.perf_counter() - started, model=self.model, backend=self.backend
        )

    @abstractmethod
    async def call(self, request: ChatRequest) -> tuple[str, Usage]:
        """The reply's text and its prompt and completion tokens."""


def token_usage(prompt_tokens: float | str | None, completion_tokens: float | str | None) -> Usage:
    """The token counts a server reported (a missing count reads as 0); a count that is not a number
    raises ValueError or TypeError, for the caller to classify as a malformed reply."""
    return Usage(prompt_tokens=int(prompt_tokens or 0), completion_tokens=int(completion_tokens or 0))
