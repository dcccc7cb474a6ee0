"""Small helpers every HTTP backend shares: local-URL test, client route, message dicts, the Ollama host."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from usersimcrs.core.http_route import Route, choose_route
from usersimcrs.errors import ConfigError
from usersimcrs.llm.base import Message
from usersimcrs.llm.config import LLMConfig

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"})


def is_local_url(url: str | None) -> bool:
    """True when `url` points at this machine (a local server needs no real API key)."""
    if not url:
        return False
    host = (urlparse(url if "://" in url else f"http://{url}").hostname or "").lower()
    return host in LOCAL_HOSTS or host.startswith("127.")


def llm_route(url: str, config: LLMConfig) -> Route:
    """Which client sends the calls to `url` under `llm.client` (core/http_route.py); `lean` against an
    https URL is a ConfigError (the lean client speaks plain HTTP only)."""
    try:
        return choose_route(url, config.client, key="llm.client")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def message_dicts(messages: list[Message]) -> list[dict[str, str]]:
    """Messages as the wire format wants them."""
    return [{"role": m.role, "content": m.content} for m in messages]


def ollama_host(config: LLMConfig) -> str:
    """Where Ollama listens: config.base_url, else $OLLAMA_HOST, else the default port on localhost."""
    host = config.base_url or os.environ.get("OLLAMA_HOST") or DEFAULT_OLLAMA_HOST
    return host if "://" in host else f"http://{host}"


async def close_transports(lean: Any, clients: Any) -> None:
    """Close a backend's lean transport (when it has one) and its official client of this loop."""
    if lean is not None:
        await lean.aclose()
    client = clients.take_current()
    if client is not None:
        await client.close()
