"""LLM settings from YAML, and the registry of the backend names they may take.

Secrets are never stored here: only the *names* of environment variables. The `llm_backends` registry
lives here, beside the setting it checks (`backend`), so that the config validates a name without
importing the backends package; `usersimcrs.llm.backends` re-exports it and builds from it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from usersimcrs.llm.base import LLM
from usersimcrs.registry import Registry


class LLMConfig(BaseModel):
    """Which model to call and how (backend, limits, retries, cache)."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field("auto", description="a name in the llm_backends registry (entry points included), or auto")
    model: str | None = None
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> name of the environment variable holding its value"
    )
    client: Literal["auto", "lean", "official"] = Field(
        "auto",
        description=(
            "HTTP client of the openai/ollama backends: auto (default) takes the toolkit's lean client (well "
            "under 0.1 ms of CPU per call) for plain http to localhost or a local address with no proxy set, "
            "and the official library (about 3 ms per call, TLS and proxies) for anything else; lean or "
            "official forces one (lean cannot speak https). Both send the same request. `aiohttp`, the lean "
            "client's name before issue #22, reads as auto"
        ),
    )
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 0.5
    max_wait_s: float = Field(60.0, description="cap on one wait between attempts, Retry-After included")
    parse_retry_temperature: float = Field(
        0.7, description="temperature of a retry after unparseable structured output (resample, not repeat)"
    )
    max_concurrency: int = 8
    cache: bool = True
    cache_dir: str | None = None
    # embedded llama.cpp options
    model_path: str | None = None
    n_ctx: int = 4096
    n_threads: int | Literal["all"] | None = Field(
        None,
        description=(
            "llamacpp threads for generation and prompts: a number; `all`, every CPU this process may use (fastest "
            "on a machine doing nothing else: the demo's choice); null, llama.cpp's default (half the CPUs)"
        ),
    )
    options: dict[str, Any] = Field(default_factory=dict)
    grammar_sampling: Literal["lazy", "eager"] = Field(
        "lazy",
        description=(
            "llamacpp structured output: `lazy` samples freely and checks the one sampled token against the "
            "JSON grammar, running the grammar over the whole vocabulary only when it rejects the token (about "
            "2.5x the tokens per second); `eager` runs it over the whole vocabulary at every token, as "
            "llama-cpp-python does. Both always give schema-valid JSON, and the same text at temperature 0"
        ),
    )

    @field_validator("client", mode="before")
    @classmethod
    def _former_client_name(cls, value: Any) -> Any:
        """Configs written when the lean client ran on aiohttp keep working: aiohttp spoke TLS and honoured
        proxies, which `auto` gives them (lean where it can, the official client where it cannot)."""
        return "auto" if value == "aiohttp" else value

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, value: str) -> str:
        """Only names the llm_backends registry knows (built-in or entry point), so a typo fails early."""
        if value != "auto" and ":" not in value and value not in llm_backends:  # "pkg.module:Factory" is imported
            raise ValueError(f"unknown LLM backend {value!r}; known: {', '.join(backend_names())}")
        return value

    def merged(self, override: dict[str, Any] | LLMConfig | None) -> LLMConfig:
        """This config with the fields set in `override` replaced (per-component model maps)."""
        if override is None:
            return self
        data = override.model_dump(exclude_unset=True) if isinstance(override, LLMConfig) else dict(override)
        return self.model_validate({**self.model_dump(), **data})


BackendFactory = Callable[[LLMConfig], LLM]

llm_backends: Registry[BackendFactory] = Registry(
    "llm_backends",
    {
        "ollama": "usersimcrs.llm.backends.ollama_chat:OllamaChat",
        "openai": "usersimcrs.llm.backends.openai_chat:OpenAIChat",
        "llamacpp": "usersimcrs.llm.backends.llamacpp_embedded:LlamaCppEmbedded",
    },
)


def backend_names() -> list[str]:
    """Names `llm.backend` accepts: "auto" and every registered backend (CLI choices come from here)."""
    return ["auto", *llm_backends.names()]


def llama_threads(n_threads: int | Literal["all"] | None) -> int | None:
    """The thread count given to llama.cpp: `all` is every CPU this process may use (its affinity mask where
    the platform has one), None leaves llama.cpp's own default."""
    if n_threads != "all":
        return n_threads
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1
