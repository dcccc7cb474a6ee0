"""The one call site every LLM request goes through: cache, concurrency cap, timeout, retries,
structured-output parsing and usage accounting, in front of a raw backend.

What a backend returns passes the secret scrubber here, on the way in (`core/secrets.py`): the
reply text and every failure reason, before anything is parsed, cached, recorded or logged, so a
server that echoes the API key or a header puts it in no file.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from usersimcrs.core.retry import RetryableFailure, RetryPolicy
from usersimcrs.core.secrets import Secrets
from usersimcrs.core.text_repair import clean_text, is_clean_json, repair_text, repair_value
from usersimcrs.core.usage import Usage
from usersimcrs.errors import LLMError, UserError
from usersimcrs.llm.base import LLM, ChatRequest, LLMResult, Message, RequestLLM
from usersimcrs.llm.cache import CachedReply, ResponseCache, cache_key, is_cacheable
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, shorten
from usersimcrs.llm.loops import PerLoop
from usersimcrs.llm.structured import StructuredOutputError, parse_or_close
from usersimcrs.llm.usage import UsageTracker

log = logging.getLogger("usersimcrs.llm")


@dataclass
class BackendSlot:
    """A raw backend shared by every component with the same resolved config, with its cap."""

    backend: LLM
    config: LLMConfig
    _semaphore: PerLoop[asyncio.Semaphore] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # a backend may serve fewer requests at once than configured (the embedded model: one);
        # queueing here (not at its lock) keeps waiting time out of the per-call timeout
        limit = max(1, self.config.max_concurrency)
        own_limit = getattr(self.backend, "max_parallel_calls", None)  # duck-typed plug-ins may lack it
        if own_limit:
            limit = min(limit, own_limit)
        self._semaphore = PerLoop(lambda: asyncio.Semaphore(limit))

    @property
    def semaphore(self) -> asyncio.Semaphore:
        """The concurrency cap of this backend in the running event loop."""
        return self._semaphore.get()

    @property
    def model_key(self) -> str:
        """`backend:model`, the key of the per-model usage slice."""
        return f"{self.backend.backend}:{self.backend.model}"


def coerce_messages(messages: list[Message] | list[dict[str, str]]) -> list[Message]:
    """Messages as `Message` models (callers may pass plain dicts)."""
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]


class _LazyKey:
    """The request's cache key, computed on first use (a call with the cache off and no retry never needs it)."""

    __slots__ = ("_make", "_value")

    def __init__(self, make: Callable[[], str]) -> None:
        self._make = make
        self._value: str | None = None

    @property
    def value(self) -> str:
        if self._value is None:
            self._value = self._make()
        return self._value


@dataclass
class _Attempts:
    """What the retry loop learned: the last failure, the last text that would not parse, counts."""

    counts: Usage
    failure: str | None = None
    unparsed_text: str | None = None
    parse_error: str | None = None
    spent: Usage = field(default_factory=Usage)


class ManagedLLM(RequestLLM):
    """An LLM bound to a component; every call is cached, capped, timed out, retried and counted."""

    def __init__(
        self, slot: BackendSlot, config: LLMConfig, component: str, tracker: UsageTracker, cache: ResponseCache | None
    ) -> None:
        self.slot = slot
        self.config = config
        self.component = component
        self.tracker = tracker
        self.cache = cache
        self.backend = slot.backend.backend
        self.model = slot.backend.model
        self.policy = RetryPolicy(attempts=max(0, config.retries) + 1, base_s=config.backoff_s, cap_s=config.max_wait_s)
        self.secrets = Secrets.from_config(config)

    async def respond(self, request: ChatRequest, component: str) -> LLMResult:
        """Complete a chat; with a schema, `parsed` is the validated JSON or None with `parse_error`."""
        who = component if component != "default" else self.component
        request = replace(request, messages=coerce_messages(request.messages))
        key = _LazyKey(
            lambda: cache_key(
                backend=self.backend,
                model=self.model,
                base_url=self.config.base_url,
                messages=request.messages,
                temperature=request.temperature,
                max_tokens=request.max_tokens,
                seed=request.seed,
                schema=request.schema,
            )
        )
        cache = self.cache if self.cache is not None and is_cacheable(request.temperature, request.seed) else None
        if cache is not None:
            hit = cache.get(key.value)
            if hit is not None:
                self.tracker.record(who, self.slot.model_key, Usage(cache_hits=1))
                return LLMResult(
                    text=hit.text,
                    parsed=hit.parsed,
                    truncated=hit.truncated,
                    usage=hit.usage,
                    cached=True,
                    model=self.model,
                    backend=self.backend,
                )
        self.tracker.record_prompt(who, self.slot.model_key, request.messages)  # prefix-reuse figure (hashes only)
        state = _Attempts(counts=Usage(calls=1))
        started = time.perf_counter()
        try:
            result = await self._attempt_loop(key, request, state)
            state.counts.errors += int(result.parse_error is not None)
        except LLMError:
            state.counts.errors += 1
            raise
        finally:
            self.tracker.record(who, self.slot.model_key, state.counts)
        result.latency_s = time.perf_counter() - started
        result = self._cleaned(result)
        if cache is not None and result.parse_error is None:
            cache.put(
                key.value,
                CachedReply(
                    text=result.text,
                    parsed=result.parsed,
                    truncated=result.truncated,
                    usage=result.usage,
                    model=self.model,
                    backend=self.backend,
                ),
            )
        return result

    async def _attempt_loop(self, key: _LazyKey, request: ChatRequest, state: _Attempts) -> LLMResult:
        config = self.config
        temperature, max_tokens, seed, schema = request.temperature, request.max_tokens, request.seed, request.schema
        policy = self.policy
        rngs: list[random.Random] = []  # seeded from the request key, made only if a retry waits

        def rng() -> random.Random:
            if not rngs:
                rngs.append(random.Random(int(key.value[:16], 16)))
            return rngs[0]

        def on_retry(number: int, failure: RetryableFailure, delay: float) -> None:
            log.info(
                "llm %s retry %d/%d in %.2fs: %s", self.slot.model_key, number - 1, policy.attempts - 1, delay, failure
            )

        async def attempt(number: int) -> LLMResult:
            if number > 1:
                state.counts.retries += 1
            call = request
            if state.parse_error is not None:  # resample rather than repeat an unparseable answer
                call = replace(
                    request,
                    temperature=max(temperature, config.parse_retry_temperature),
                    seed=(seed if seed is not None else int(key.value[:8], 16)) + number - 1,
                )
            try:
                raw = await self._one_call(call)
            except TransientLLMError as exc:
                state.failure = exc.reason
                raise RetryableFailure(exc.reason, exc.retry_after_s) from None
            except PermanentLLMError:
                raise
            except LLMError as exc:
                state.failure = shorten(str(exc))
                raise RetryableFailure(state.failure) from None
            state.spent = state.spent + raw.usage
            state.counts.prompt_tokens += raw.usage.prompt_tokens
            state.counts.completion_tokens += raw.usage.completion_tokens
            if not raw.text.strip():
                state.failure = f"{self.backend}: empty completion"
                if schema is not None:
                    state.parse_error, state.unparsed_text = "empty completion", raw.text
                raise RetryableFailure(state.failure)
            if schema is None:
                return LLMResult(text=raw.text, usage=state.spent, model=self.model, backend=self.backend)
            try:
                # an answer that used its whole token cap is closed, not retried: the same cap would cut it again
                parsed, truncated = parse_or_close(raw.text, schema, cut_off=raw.usage.completion_tokens >= max_tokens)
            except StructuredOutputError as exc:
                state.parse_error, state.unparsed_text = str(exc), raw.text
                state.failure = f"{self.backend}: unparseable structured output ({exc})"
                raise RetryableFailure(state.failure, retry_after_s=0.0) from None  # nothing to wait for
            return LLMResult(
                text=raw.text,
                parsed=parsed,
                truncated=truncated,
                usage=state.spent,
                model=self.model,
                backend=self.backend,
            )

        try:
            return await policy.run(attempt, rng=rng, on_retry=on_retry)
        except RetryableFailure:
            pass
        if schema is not None and state.unparsed_text is not None:
            return LLMResult(
                text=state.unparsed_text,
                parsed=None,
                usage=state.spent,
                model=self.model,
                backend=self.backend,
                parse_error=shorten(f"{state.parse_error} (after {policy.attempts} attempts)"),
            )
        failure = f"{state.failure or self.backend + ': no answer'} (after {policy.attempts} attempts)"
        raise LLMError(self._clean_reason(shorten(failure)))

    async def _one_call(self, request: ChatRequest) -> LLMResult:
        """One raw backend call under the per-backend cap and the per-call timeout; reply and failure scrubbed."""
        scrub = self._clean_reason
        async with self.slot.semaphore:
            try:
                async with asyncio.timeout(self.config.timeout_s):  # no extra task per call, unlike wait_for
                    result = await self.slot.backend.complete(
                        request.messages,
                        temperature=request.temperature,
                        max_tokens=request.max_tokens,
                        seed=request.seed,
                        schema=request.schema,
                    )
            except TimeoutError:
                raise TransientLLMError(f"{self.backend}: no answer within {self.config.timeout_s:g}s") from None
            except TransientLLMError as exc:
                raise TransientLLMError(scrub(exc.reason), exc.retry_after_s) from None
            except PermanentLLMError as exc:
                raise PermanentLLMError(scrub(exc.reason)) from None
            except LLMError as exc:
                raise LLMError(scrub(str(exc))) from None
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - an unexpected library failure is retried, then reported
                raise TransientLLMError(f"{self.backend}: unexpected {type(exc).__name__}") from None
        if self.secrets:
            result.text = self.secrets.scrub(result.text)
        return result

    def _clean_reason(self, reason: str) -> str:
        """A failure reason as it may be recorded: secrets masked, lone surrogates replaced."""
        return self.secrets.scrub(repair_text(reason)[0])

    def _cleaned(self, result: LLMResult) -> LLMResult:
        """The reply made storable (lone surrogates, NaN, deep nesting repaired and counted in the usage
        summary) and scrubbed of secrets, before it is cached or handed to the caller."""
        text, parsed = result.text, result.parsed
        if not (isinstance(text, str) and clean_text(text) and is_clean_json(parsed)):  # else nothing to repair
            text, repairs = repair_value(text)
            parsed, repairs = repair_value(parsed, repairs)
            if repairs:
                self.tracker.record_repairs(dict(repairs))
                log.info("llm %s: repaired its reply before use (%s)", self.slot.model_key, dict(repairs))
        result.text = self.secrets.scrub(text) if self.secrets else text
        result.parsed = self.secrets.scrub_value(parsed)
        if result.parse_error is not None:
            result.parse_error = self._clean_reason(result.parse_error)
        return result
