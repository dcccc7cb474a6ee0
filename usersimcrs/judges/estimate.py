"""Tokenizer-free token estimates for `--dry-run`: characters / chars-per-token plus expected output.

The constants were calibrated against the token counts the embedded model (Gemma 3 270M)
reported on a real judging run (see docs/judges.md); other tokenizers land within a similar
range for English text and JSON.
"""

from __future__ import annotations

import math
from typing import Iterable

from usersimcrs.judges.base import PlannedCall
from usersimcrs.llm.base import Message

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 4
COMPLETION_FILL = 0.5


def prompt_tokens(messages: Iterable[Message]) -> int:
    """Estimated prompt tokens of a chat: characters / CHARS_PER_TOKEN plus a per-message overhead."""
    total = 0
    for message in messages:
        total += math.ceil(len(message.content) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS
    return total


def expected_completion_tokens(max_tokens: int, text_chars: int) -> int:
    """Expected reply length: a JSON object whose free text fills about COMPLETION_FILL of its cap."""
    body = math.ceil(text_chars * COMPLETION_FILL / CHARS_PER_TOKEN) + 12
    return min(max_tokens, body)


def estimate(calls: Iterable[PlannedCall]) -> dict[str, int]:
    """Calls and estimated prompt/completion/total tokens of a plan."""
    calls = list(calls)
    prompt = sum(prompt_tokens(c.messages) for c in calls)
    completion = sum(c.expected_completion_tokens for c in calls)
    return {
        "calls": len(calls),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
