"""Failure classification: which statuses retry, Retry-After parsing, secret scrubbing, backoff."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from usersimcrs.core.retry import RetryPolicy, parse_retry_after
from usersimcrs.errors import ConfigError
from usersimcrs.llm import LLMConfig, LLMProvider
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, status_error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, TransientLLMError),
        (500, TransientLLMError),
        (503, TransientLLMError),
        (408, TransientLLMError),
        (400, PermanentLLMError),
        (401, PermanentLLMError),
        (404, PermanentLLMError),
    ],
)
def test_status_classification(status, kind):
    assert isinstance(status_error("openai", status, "msg", None, []), kind)


def test_reasons_are_scrubbed_of_secrets_and_kept_short():
    error = status_error(
        "openai", 401, "Incorrect API key provided: sk-abcdef123456 " + "x" * 500, None, ["sk-abcdef123456"]
    )
    assert "sk-abcdef123456" not in str(error) and "***" in str(error)
    assert len(str(error)) <= 200 and str(error).startswith("openai: HTTP 401")


def test_retry_after_header_forms():
    assert parse_retry_after("3") == 3.0 and parse_retry_after("0.5") == 0.5
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= parse_retry_after(later) <= 31


def test_backoff_grows_is_capped_and_reproducible():
    policy = RetryPolicy(attempts=6, base_s=0.5, cap_s=4.0)
    delays = [policy.delay(a, random.Random(1)) for a in (1, 2, 3, 4, 5)]
    assert delays == [policy.delay(a, random.Random(1)) for a in (1, 2, 3, 4, 5)]
    assert 0.25 <= delays[0] <= 0.5 and 0.5 <= delays[1] <= 1.0 and 2.0 <= delays[4] <= 4.0
    assert policy.delay(1, random.Random(1), 2.5) == 2.5
    assert policy.delay(1, random.Random(1), 60.0) == 4.0


def test_bad_component_override_names_the_key():
    provider = LLMProvider(LLMConfig(), {"judge": {"modle": "x"}})
    with pytest.raises(ConfigError, match=r"^unknown key 'llm_components\.judge\.modle' \(did you mean 'model'\?\)$"):
        provider.get("judge")
