"""`auto`: pick a backend from what this machine offers (Ollama, then an OpenAI key, then embedded)."""

from __future__ import annotations

import logging
import os

from usersimcrs.llm.backends.common import ollama_host
from usersimcrs.llm.config import LLMConfig

log = logging.getLogger("usersimcrs.llm")

PROBE_TIMEOUT_S = 0.5


def ollama_reachable(host: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """True when an Ollama server answers GET /api/version at `host` within `timeout_s`."""
    import httpx  # only `backend: auto` probes, so only it pays for the import

    try:
        response = httpx.get(f"{host.rstrip('/')}/api/version", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    if response.status_code != 200:
        return False
    try:
        return isinstance(response.json(), dict) and "version" in response.json()
    except ValueError:
        return False


def choose_backend(config: LLMConfig) -> tuple[str, str]:
    """(backend name, why) for an `auto` config."""
    host = ollama_host(config)
    if ollama_reachable(host):
        return "ollama", f"Ollama answered at {host}"
    if config.base_url:
        return "openai", f"no Ollama at {host}; using the OpenAI-compatible server at {config.base_url}"
    if os.environ.get(config.api_key_env):
        return "openai", f"no Ollama at {host}; {config.api_key_env} is set"
    return "llamacpp", f"no Ollama at {host} and {config.api_key_env} is not set; using the embedded model"


def resolve_auto(config: LLMConfig) -> LLMConfig:
    """`config` with backend 'auto' replaced by the chosen backend (logged with the reason)."""
    if config.backend != "auto":
        return config
    name, why = choose_backend(config)
    log.info("llm backend auto -> %s (%s)", name, why)
    return config.model_copy(update={"backend": name})
