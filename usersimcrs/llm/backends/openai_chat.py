"""`openai` backend: chat completions against OpenAI or any compatible server.

The request (POST {base_url}/chat/completions, Bearer key, extra headers, `response_format`
json_schema) goes through `LeanHTTP` to a local plain-HTTP server and through the official
`AsyncOpenAI` client to anything else (`client: auto`, core/http_route.py; `lean` or `official`
forces one). The official client is imported only then (about 0.3 s of start-up, 3 ms of CPU per call).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from usersimcrs.core.env_headers import headers_from_env
from usersimcrs.core.retry import parse_retry_after
from usersimcrs.core.usage import Usage
from usersimcrs.errors import ConfigError
from usersimcrs.llm.backends.common import close_transports, is_local_url, llm_route, message_dicts
from usersimcrs.llm.backends.lean_http import LeanHTTP
from usersimcrs.llm.base import ChatRequest, Message, PreflightTarget, RawBackend, token_usage
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, redirect_error, status_error
from usersimcrs.llm.loops import PerLoop

if TYPE_CHECKING:
    import openai

DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_DUMMY_KEY = "not-needed"


def resolve_api_key(config: LLMConfig) -> str:
    """The key from the env var the config names; a dummy for local servers; else a ConfigError."""
    key = os.environ.get(config.api_key_env)
    if key:
        return key
    if is_local_url(config.base_url):
        return LOCAL_DUMMY_KEY
    raise ConfigError(f"llm.api_key_env: environment variable {config.api_key_env} is not set")


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI `response_format` asking for JSON that follows `schema`."""
    name = str(schema.get("title") or "response").replace(" ", "_")[:64]
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


class OpenAIChat(RawBackend):
    """One chat completion per call through `AsyncOpenAI` (its own retries off: ours are in front)."""

    backend = "openai"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.model = config.model or DEFAULT_MODEL
        key = resolve_api_key(config)
        headers = headers_from_env(config.headers_env, section="llm")
        self._secrets = [key, *headers.values()]
        self._wire_headers = {"Authorization": f"Bearer {key}", **headers}
        self._url = f"{openai_base_url(config).rstrip('/')}/chat/completions"
        self.route = llm_route(self._url, config)
        self._lean: LeanHTTP | None = None
        if self.route.client == "lean":
            self._lean = LeanHTTP(
                "openai",
                connections=config.max_concurrency,
                timeout_s=config.timeout_s,
                headers=self._wire_headers,
                secrets=self._secrets,
            )
        self._client = PerLoop(lambda: _official_client(config, key, headers))

    def request_kwargs(
        self, messages: list[Message], temperature: float, max_tokens: int, seed: int | None, schema: dict | None
    ) -> dict[str, Any]:
        """Arguments of `chat.completions.create` for one call."""
        token_field = "max_tokens" if self.config.base_url else "max_completion_tokens"
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": message_dicts(messages),
            "temperature": temperature,
            token_field: max_tokens,
        }
        if seed is not None:
            kwargs["seed"] = seed
        if schema is not None:
            kwargs["response_format"] = response_format(schema)
        if self.config.options:
            kwargs["extra_body"] = dict(self.config.options)
        return kwargs

    async def call(self, request: ChatRequest) -> tuple[str, Usage]:
        """One raw call; failures come out as TransientLLMError or PermanentLLMError."""
        kwargs = self.request_kwargs(
            request.messages, request.temperature, request.max_tokens, request.seed, request.schema
        )
        if self._lean is not None:
            return _lean_reply(await self._lean.post_ok_json(self._url, wire_body(kwargs), _error_message))
        return await self._call_official(kwargs)

    async def _call_official(self, kwargs: dict[str, Any]) -> tuple[str, Usage]:
        """The call through the official client (https, a proxy, or `client: official`), its failures classified."""
        import openai

        try:
            response = await self._client.get().chat.completions.create(**kwargs)
        except openai.APIStatusError as exc:
            if 300 <= exc.status_code < 400:
                raise redirect_error(
                    "openai", exc.status_code, exc.response.headers.get("location"), self._secrets
                ) from None
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            raise status_error("openai", exc.status_code, _message_of(exc), retry_after, self._secrets) from None
        except openai.APITimeoutError:
            raise TransientLLMError("openai: request timed out") from None
        except openai.APIConnectionError as exc:
            raise TransientLLMError(f"openai: connection failed ({type(exc.__cause__ or exc).__name__})") from None
        except openai.APIResponseValidationError:
            raise TransientLLMError("openai: malformed response body") from None
        except (ValueError, TypeError) as exc:
            raise TransientLLMError(f"openai: malformed response body ({type(exc).__name__})") from None
        except openai.OpenAIError as exc:
            raise PermanentLLMError(f"openai: {type(exc).__name__}") from None
        try:
            text = response.choices[0].message.content or ""
            usage = response.usage
            counts = token_usage(getattr(usage, "prompt_tokens", 0), getattr(usage, "completion_tokens", 0))
        except (AttributeError, IndexError, TypeError, ValueError):
            raise TransientLLMError("openai: malformed response body (no choices)") from None
        return text, counts

    def preflight_target(self) -> PreflightTarget:
        """GET {base_url}/models with the key and headers of every call (either client): free, and a
        refused key is a 401 there."""
        url = f"{openai_base_url(self.config).rstrip('/')}/models"
        assert self.route is not None  # set in __init__
        return PreflightTarget(url, self._wire_headers, self.config.api_key_env, self.route.client)

    async def aclose(self) -> None:
        """Close the HTTP pool."""
        await close_transports(self._lean, self._client)


def _official_client(config: LLMConfig, key: str, headers: dict[str, str]) -> openai.AsyncOpenAI:
    """The official async client, its own retries off (ours are in front) and redirects not followed (the key
    and headers go to no other address)."""
    import openai

    return openai.AsyncOpenAI(
        api_key=key,
        base_url=config.base_url,
        timeout=config.timeout_s,
        max_retries=0,
        default_headers=headers or None,
        http_client=openai.DefaultAsyncHttpxClient(timeout=config.timeout_s, follow_redirects=False),
    )


def openai_base_url(config: LLMConfig) -> str:
    """Where requests go: config.base_url, else $OPENAI_BASE_URL, else OpenAI (as AsyncOpenAI decides)."""
    return config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL


def wire_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The JSON body `chat.completions.create(**kwargs)` sends: `extra_body` merged at the top level."""
    body = {k: v for k, v in kwargs.items() if k != "extra_body"}
    body.update(kwargs.get("extra_body") or {})
    return body


def _lean_reply(data: Any) -> tuple[str, Usage]:
    """The text and token counts of a decoded `chat.completion` document (the official reply's checks)."""
    try:
        text = data["choices"][0]["message"]["content"] or ""
        usage = data.get("usage") or {}
        counts = token_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        raise TransientLLMError("openai: malformed response body (no choices)") from None
    if not isinstance(text, str):
        raise TransientLLMError("openai: malformed response body (content is not text)")
    return text, counts


def _error_message(body: Any) -> str:
    """The `error.message` of an OpenAI-style error document."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        return str(inner.get("message", "")) if isinstance(inner, dict) else str(inner)
    return ""


def _message_of(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        return str(inner.get("message", "")) if isinstance(inner, dict) else str(inner)
    return ""
