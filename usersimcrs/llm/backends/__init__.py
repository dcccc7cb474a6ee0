"""LLM backends by name: each turns an LLMConfig into an `LLM` that makes one raw call per `complete`.

Backends only talk to their server or library and classify failures (TransientLLMError /
PermanentLLMError); caching, retries, limits and accounting live in `usersimcrs.llm.managed`.
The registry of their names (`llm_backends`) lives in `usersimcrs.llm.config`, which validates
`llm.backend` against it; it is re-exported here.
"""

from __future__ import annotations

from usersimcrs.llm.base import LLM
from usersimcrs.llm.config import BackendFactory, LLMConfig, backend_names, llm_backends

__all__ = ["BackendFactory", "backend_names", "build_backend", "llm_backends"]


def build_backend(config: LLMConfig) -> LLM:
    """The raw backend named by `config.backend` (which must already be resolved, not 'auto')."""
    return llm_backends.get(config.backend)(config)
