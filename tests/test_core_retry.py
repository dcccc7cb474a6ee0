"""The shared retry policy (LLM calls and CRS connectors): counts, waits, seeding, what is not retried."""

from __future__ import annotations

import asyncio
import random

import pytest

from usersimcrs.core.env_headers import headers_from_env
from usersimcrs.core.retry import RetryableFailure, RetryPolicy
from usersimcrs.errors import ConfigError


def run_policy(policy: RetryPolicy, outcomes: list, seed: int = 3):
    """Run `policy` over scripted outcomes (an exception to raise or a value to return); record calls and waits."""
    calls: list[int] = []
    waits: list[float] = []
    rngs: list[random.Random] = []

    async def attempt(number: int):
        calls.append(number)
        outcome = outcomes[number - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def rng() -> random.Random:
        if not rngs:
            rngs.append(random.Random(seed))
        return rngs[0]

    async def main():
        return await policy.run(attempt, rng=rng, on_retry=lambda n, failure, delay: waits.append(delay))

    return asyncio.run(main()), calls, waits, rngs


def test_a_first_success_draws_no_wait_and_no_rng():
    result, calls, waits, rngs = run_policy(RetryPolicy(3, 0.001, 0.01), ["ok"])
    assert (result, calls, waits, rngs) == ("ok", [1], [], [])


def test_retryable_failures_are_retried_until_success():
    failures = [RetryableFailure("HTTP 503"), RetryableFailure("timeout")]
    result, calls, waits, _ = run_policy(RetryPolicy(4, 0.001, 0.01), [*failures, "ok"])
    assert result == "ok" and calls == [1, 2, 3] and len(waits) == 2


def test_the_last_failure_is_raised_when_attempts_run_out():
    outcomes = [RetryableFailure(f"fail {n}") for n in (1, 2, 3)]
    with pytest.raises(RetryableFailure, match="^fail 3$"):
        run_policy(RetryPolicy(3, 0.001, 0.01), outcomes)


def test_other_errors_are_not_retried():
    with pytest.raises(ValueError):
        run_policy(RetryPolicy(5, 0.001, 0.01), [ValueError("bad request")])


def test_retry_after_is_honoured_up_to_the_cap():
    _, _, waits, _ = run_policy(
        RetryPolicy(3, 0.001, 0.05), [RetryableFailure("429", 0.02), RetryableFailure("429", 9.0), "ok"]
    )
    assert waits == [0.02, 0.05]


def test_waits_are_reproducible_for_the_same_seed_and_differ_across_seeds():
    outcomes = [RetryableFailure("x"), RetryableFailure("x"), RetryableFailure("x"), "ok"]
    policy = RetryPolicy(4, 0.001, 0.01)
    first = run_policy(policy, outcomes, seed=1)[2]
    assert first == run_policy(policy, outcomes, seed=1)[2]
    assert first != run_policy(policy, outcomes, seed=2)[2]


def test_headers_from_env_reads_values_and_names_a_missing_variable(monkeypatch):
    monkeypatch.setenv("USERSIMCRS_TEST_TOKEN", "secret")
    assert headers_from_env({"X-Token": "USERSIMCRS_TEST_TOKEN"}, section="crs") == {"X-Token": "secret"}
    monkeypatch.delenv("USERSIMCRS_TEST_NOT_SET", raising=False)
    with pytest.raises(ConfigError, match=r"^crs\.headers_env\.X-Other: environment variable USERSIMCRS_TEST_NOT_SET"):
        headers_from_env({"X-Other": "USERSIMCRS_TEST_NOT_SET"}, section="crs")
