"""Token and call accounting per component (simulator, nlu, nlg, judge, ...) and per model."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

COUNTERS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "errors")


class UsageCounts(BaseModel):
    """Counters of one slice: backend calls (cache hits excluded), hits, tokens, retries, errors."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    errors: int = 0

    def add(self, other: UsageCounts) -> None:
        """Add `other`'s counts into this one (plain int fields, so the field dict is updated directly)."""
        mine, theirs = self.__dict__, other.__dict__
        for name in COUNTERS:
            mine[name] += theirs[name]


class UsageTracker:
    """Sums UsageCounts overall, by component and by model (`backend:model`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = UsageCounts()
        self._by_component: dict[str, UsageCounts] = {}
        self._by_model: dict[str, UsageCounts] = {}

    def record(self, component: str, model_key: str, counts: UsageCounts) -> None:
        """Add the counts of one request to the three slices."""
        with self._lock:
            self._total.add(counts)
            self._by_component.setdefault(component, UsageCounts()).add(counts)
            self._by_model.setdefault(model_key, UsageCounts()).add(counts)

    def summary(self) -> dict[str, Any]:
        """`{calls, cache_hits, prompt_tokens, completion_tokens, retries, errors, by_component, by_model}`."""
        with self._lock:
            return {
                **self._total.model_dump(),
                "by_component": {k: v.model_dump() for k, v in sorted(self._by_component.items())},
                "by_model": {k: v.model_dump() for k, v in sorted(self._by_model.items())},
            }
