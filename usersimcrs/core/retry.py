"""The one retry policy of the toolkit (LLM calls and CRS connectors): a fixed number of attempts,
exponential backoff with jitter drawn from a seeded RNG (so a rerun waits the same), and a
server's Retry-After honoured up to the cap. The loop is tenacity's; the first attempt runs
before any retry machinery is built, so a call that succeeds pays nothing for it."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_base

T = TypeVar("T")


class RetryableFailure(Exception):
    """A failed attempt worth retrying; `reason` is the short text recorded when attempts run out."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); None if absent."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` in all (>= 1); retry k waits base_s * 2**(k-1), half of it jittered, at most cap_s."""

    attempts: int
    base_s: float
    cap_s: float

    def delay(self, retry: int, rng: random.Random, retry_after_s: float | None = None) -> float:
        """Seconds before retry `retry` (1-based): the server's Retry-After (capped) or seeded backoff."""
        if retry_after_s is not None:  # 0 retries at once (a resample after an unparseable answer)
            return min(self.cap_s, retry_after_s)
        exponential = min(self.cap_s, self.base_s * (2 ** (retry - 1)))
        return exponential / 2 + rng.uniform(0, exponential / 2)

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T]],
        *,
        rng: Callable[[], random.Random],
        on_retry: Callable[[int, RetryableFailure, float], None] | None = None,
    ) -> T:
        """`await attempt(n)` for n = 1, 2, ... until one returns; a RetryableFailure is retried after
        a wait, anything else propagates, and the last RetryableFailure is raised when attempts run out.
        `rng()` is called only when a wait is drawn; `on_retry(next_n, failure, delay)` before each wait."""
        try:
            return await attempt(1)
        except RetryableFailure as exc:
            if self.attempts <= 1:
                raise
            first = exc
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.attempts),
            wait=_SeededWait(self, rng),
            retry=retry_if_exception_type(RetryableFailure),
            before_sleep=_announce(on_retry) if on_retry else None,
            reraise=True,
        )
        async for state in retrying:
            with state:
                number = state.retry_state.attempt_number
                if number == 1:
                    raise first  # replayed so tenacity draws the wait after it
                result = await attempt(number)
        return result


class _SeededWait(wait_base):
    """tenacity wait strategy: the policy's delay, jitter from the caller's seeded RNG."""

    def __init__(self, policy: RetryPolicy, rng: Callable[[], random.Random]) -> None:
        self.policy = policy
        self.rng = rng

    def __call__(self, retry_state: RetryCallState) -> float:
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(failure, "retry_after_s", None)
        return self.policy.delay(retry_state.attempt_number, self.rng(), retry_after)


def _announce(on_retry: Callable[[int, RetryableFailure, float], None]) -> Callable[[RetryCallState], None]:
    def before_sleep(retry_state: RetryCallState) -> None:
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        delay = retry_state.next_action.sleep if retry_state.next_action else 0.0
        if isinstance(failure, RetryableFailure):  # only retryable failures are retried
            on_retry(retry_state.attempt_number + 1, failure, delay)

    return before_sleep
