"""LLM backends by name: each turns an LLMConfig into an `LLM` that makes one raw call per `complete`.

Backends only talk to their server or library and classify failures (TransientLLMError /
PermanentLLMError); caching, retries, limits and accounting live in `usersimcrs.llm.managed`.
"""

from __future__ import annotations

from collections.abc import Callable

from usersimcrs.llm.base import LLM
from usersimcrs.llm.config import LLMConfig
from usersimcrs.registry import Registry

BackendFactory = Callable[[LLMConfig], LLM]

llm_backends: Registry[BackendFactory] = Registry(
    "llm_backends",
    {
        "ollama": "usersimcrs.llm.backends.ollama_chat:OllamaChat",
        "openai": "usersimcrs.llm.backends.openai_chat:OpenAIChat",
        "llamacpp": "usersimcrs.llm.backends.llamacpp_embedded:LlamaCppEmbedded",
    },
)


def build_backend(config: LLMConfig) -> LLM:
    """The raw backend named by `config.backend` (which must already be resolved, not 'auto')."""
    return llm_backends.get(config.backend)(config)


def backend_names() -> list[str]:
    """Names `llm.backend` accepts: "auto" and every registered backend (CLI choices come from here)."""
    return ["auto", *llm_backends.names()]
