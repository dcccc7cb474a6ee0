"""`ollama` backend: non-streaming `/api/chat`, host from config.base_url or OLLAMA_HOST.

The POST {host}/api/chat (model, messages, format, options, stream=false) goes through `LeanHTTP` to a
local plain-HTTP server and through the official `ollama.AsyncClient` to anything else (`client: auto`,
core/http_route.py; `lean` or `official` forces one); the official client is imported only then.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from usersimcrs.core.env_headers import headers_from_env
from usersimcrs.core.retry import parse_retry_after
from usersimcrs.core.usage import Usage
from usersimcrs.llm.backends.common import close_transports, llm_route, message_dicts, ollama_host
from usersimcrs.llm.backends.lean_http import LeanHTTP
from usersimcrs.llm.base import ChatRequest, PreflightTarget, RawBackend, token_usage
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.failures import TransientLLMError, redirect_error, status_error
from usersimcrs.llm.loops import PerLoop

if TYPE_CHECKING:
    import httpx
    import ollama

DEFAULT_MODEL = "llama3.2"


class OllamaChat(RawBackend):
    """One `/api/chat` call (non-streaming) per request; JSON schema goes in `format`."""

    backend = "ollama"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.model = config.model or DEFAULT_MODEL
        self.host = ollama_host(config)
        headers = headers_from_env(config.headers_env, section="llm")
        self._secrets = list(headers.values())
        self._wire_headers = self._with_api_key(headers)
        self._url = f"{self.host.rstrip('/')}/api/chat"
        self.route = llm_route(self._url, config)
        self._lean: LeanHTTP | None = None
        if self.route.client == "lean":
            self._lean = self._lean_transport()
        self._client = PerLoop(lambda: self._official_client(headers))

    def _official_client(self, headers: dict[str, str]) -> ollama.AsyncClient:
        """The official async client (https, a proxy, or `client: official`), HTTP errors classified in its
        response hook."""
        import ollama

        return ollama.AsyncClient(
            host=self.host,
            timeout=self.config.timeout_s,
            headers=headers or None,
            follow_redirects=False,  # the key and headers go to no other address
            event_hooks={"response": [self._raise_for_status]},
        )

    def _with_api_key(self, headers: dict[str, str]) -> dict[str, str]:
        """The headers the official client would send: the configured ones, OLLAMA_API_KEY as a bearer token."""
        wire_headers = dict(headers)
        api_key = os.environ.get("OLLAMA_API_KEY")
        if api_key and not any(name.lower() == "authorization" for name in wire_headers):
            wire_headers["Authorization"] = f"Bearer {api_key}"
            self._secrets.append(api_key)
        return wire_headers

    def _lean_transport(self) -> LeanHTTP:
        """The lean transport, with the headers the official client would send (OLLAMA_API_KEY too)."""
        return LeanHTTP(
            "ollama",
            connections=self.config.max_concurrency,
            timeout_s=self.config.timeout_s,
            headers=self._wire_headers,
            secrets=self._secrets,
        )

    def preflight_target(self) -> PreflightTarget:
        """GET {host}/api/tags (the local models) with the headers of every call: answered without
        loading a model."""
        assert self.route is not None  # set in __init__
        return PreflightTarget(
            f"{self.host.rstrip('/')}/api/tags", self._wire_headers, "OLLAMA_API_KEY", self.route.client
        )

    async def _raise_for_status(self, response: httpx.Response) -> None:
        """Classify HTTP errors and redirects here, where the Retry-After and Location headers are at hand."""
        if 300 <= response.status_code < 400:
            raise redirect_error("ollama", response.status_code, response.headers.get("location"), self._secrets)
        if response.status_code < 400:
            return
        await response.aread()
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        raise status_error("ollama", response.status_code, _error_text(response), retry_after, self._secrets)

    def options(self, temperature: float, max_tokens: int, seed: int | None) -> dict[str, Any]:
        """Sampling options: config.options first, then the per-call values."""
        opts: dict[str, Any] = {**self.config.options, "temperature": temperature, "num_predict": max_tokens}
        if seed is not None:
            opts["seed"] = seed
        return opts

    async def call(self, request: ChatRequest) -> tuple[str, Usage]:
        """One raw call; failures come out as TransientLLMError or PermanentLLMError."""
        if self._lean is not None:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": message_dicts(request.messages),
                "tools": [],
                "stream": False,
            }
            if request.schema is not None:
                body["format"] = request.schema
            body["options"] = self.options(request.temperature, request.max_tokens, request.seed)
            return _lean_reply(await self._lean.post_ok_json(self._url, body, _error_of))
        return await self._call_official(request)

    async def _call_official(self, request: ChatRequest) -> tuple[str, Usage]:
        """The call through the official client (https, a proxy, or `client: official`), its failures classified."""
        import httpx
        import ollama

        try:
            response = await self._client.get().chat(
                model=self.model,
                messages=message_dicts(request.messages),
                format=request.schema,
                options=self.options(request.temperature, request.max_tokens, request.seed),
                stream=False,
            )
        except ollama.ResponseError as exc:
            raise status_error("ollama", exc.status_code, str(exc.error), None, self._secrets) from None
        except httpx.TimeoutException:
            raise TransientLLMError("ollama: request timed out") from None
        except (ConnectionError, httpx.TransportError) as exc:
            raise TransientLLMError(f"ollama: connection failed ({type(exc).__name__})") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise TransientLLMError(f"ollama: malformed response body ({type(exc).__name__})") from None
        message = getattr(response, "message", None)
        usage = token_usage(response.prompt_eval_count, response.eval_count)
        return (message.content if message is not None else "") or "", usage

    async def aclose(self) -> None:
        """Close the HTTP pool."""
        await close_transports(self._lean, self._client)


def _lean_reply(data: Any) -> tuple[str, Usage]:
    """The text and token counts of a decoded `/api/chat` answer (missing counts read as 0)."""
    try:
        message = data.get("message") or {}
        text = message.get("content") or ""
        usage = token_usage(data.get("prompt_eval_count"), data.get("eval_count"))
    except (AttributeError, TypeError, ValueError) as exc:
        raise TransientLLMError(f"ollama: malformed response body ({type(exc).__name__})") from None
    if not isinstance(text, str):
        raise TransientLLMError("ollama: malformed response body (content is not text)")
    return text, usage


def _error_of(body: Any) -> str:
    """The `error` field of an Ollama error document."""
    return str(body.get("error", "")) if isinstance(body, dict) else ""


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    return str(body.get("error", "")) if isinstance(body, dict) else ""
