"""An LLM source that times every call, to split wall time into 'waiting on the LLM' and the rest."""

from __future__ import annotations

import time
from typing import Any

from usersimcrs.llm.base import LLM, LLMResult


class TimedLLM(LLM):
    """Forwards to an LLM and adds the wall time of each call to its source's total."""

    def __init__(self, inner: LLM, source: TimedLLMs) -> None:
        self.inner = inner
        self.source = source
        self.backend = getattr(inner, "backend", "")
        self.model = getattr(inner, "model", "")

    async def complete(self, messages: Any, **kwargs: Any) -> LLMResult:
        started = time.perf_counter()
        try:
            return await self.inner.complete(messages, **kwargs)
        finally:
            self.source.wait_s += time.perf_counter() - started
            self.source.calls += 1


class TimedLLMs:
    """Wraps an LLMProvider: same components, same usage summary, plus summed call time."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.wait_s = 0.0
        self.calls = 0
        self._llms: dict[str, TimedLLM] = {}

    def get(self, component: str) -> TimedLLM:
        if component not in self._llms:
            self._llms[component] = TimedLLM(self.provider.get(component), self)
        return self._llms[component]

    def usage_summary(self) -> dict[str, Any]:
        return self.provider.usage_summary()

    async def aclose(self) -> None:
        await self.provider.aclose()
