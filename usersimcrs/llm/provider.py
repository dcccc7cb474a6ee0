"""Hands out one managed LLM per component (simulator, nlu, nlg, judge, ...) from one run's config.

A component may override any LLMConfig field (`components: {judge: {model: ...}}`): that is how a
run mixes models per role or builds a mixture of evaluators. Components whose resolved configs are
equal share one backend instance (so the embedded model is loaded once) and one concurrency cap.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from usersimcrs.core.usage import UsageSummary
from usersimcrs.core.validation import describe_validation_error
from usersimcrs.errors import ConfigError
from usersimcrs.llm.backends import build_backend
from usersimcrs.llm.backends.auto_select import resolve_auto
from usersimcrs.llm.cache import ResponseCache, default_cache_dir
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.managed import BackendSlot, ManagedLLM
from usersimcrs.llm.usage import UsageTracker

log = logging.getLogger("usersimcrs.llm")


class LLMProvider:
    """Builds, shares and closes the LLMs of a run; sums their usage."""

    def __init__(
        self,
        config: LLMConfig,
        components: dict[str, dict[str, Any]] | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.config = config
        self.components = dict(components or {})
        self.cache_dir = cache_dir
        self.tracker = UsageTracker()
        self._slots: dict[str, BackendSlot] = {}
        self._caches: dict[Path, ResponseCache] = {}
        self._llms: dict[str, ManagedLLM] = {}
        self._auto_choices: dict[str, LLMConfig] = {}

    def component_config(self, component: str) -> LLMConfig:
        """The default config with this component's overrides applied (backend still possibly 'auto')."""
        override = self.components.get(component)
        try:
            return self.config.merged(override)
        except ValidationError as exc:
            raise ConfigError(
                describe_validation_error(exc, source=None, prefix=f"llm_components.{component}", model=LLMConfig)
            ) from None

    def resolved_config(self, component: str) -> LLMConfig:
        """The component's config with 'auto' replaced by the chosen backend (probed once per config)."""
        config = self.component_config(component)
        fingerprint = config.model_dump_json()
        if fingerprint not in self._auto_choices:
            self._auto_choices[fingerprint] = resolve_auto(config)
        return self._auto_choices[fingerprint]

    def get(self, component: str = "default") -> ManagedLLM:
        """The LLM for `component` (built on first use, then reused)."""
        if component not in self._llms:
            config = self.resolved_config(component)
            slot = self._slot(config)
            self._llms[component] = ManagedLLM(slot, config, component, self.tracker, self._cache(config))
            log.info("llm for %s: %s", component, slot.model_key)
        return self._llms[component]

    def backend_name(self, component: str = "default") -> str:
        """The backend actually used for `component` (what 'auto' chose)."""
        return self.get(component).backend

    def usage_summary(self) -> UsageSummary:
        """Calls, cache hits, tokens, retries and errors: overall, by component and by model."""
        return self.tracker.summary()

    def models(self) -> dict[str, str]:
        """component -> `backend:model` of every LLM handed out so far (for the manifest)."""
        return {name: llm.slot.model_key for name, llm in sorted(self._llms.items())}

    def http_routes(self) -> dict[str, dict[str, str]]:
        """component -> URL, client and why, for every HTTP LLM handed out so far (for the manifest)."""
        routes = {name: llm.slot.backend.route for name, llm in sorted(self._llms.items())}
        return {name: route.record() for name, route in routes.items() if route is not None}

    async def aclose(self) -> None:
        """Close every backend and cache."""
        for slot in self._slots.values():
            await slot.backend.aclose()
        for cache in self._caches.values():
            cache.close()
        self._slots.clear()
        self._caches.clear()
        self._llms.clear()

    def _slot(self, config: LLMConfig) -> BackendSlot:
        fingerprint = config.model_dump_json(exclude={"cache", "cache_dir"})
        if fingerprint not in self._slots:
            self._slots[fingerprint] = BackendSlot(build_backend(config), config)
        return self._slots[fingerprint]

    def _cache(self, config: LLMConfig) -> ResponseCache | None:
        if not config.cache:
            return None
        folder = default_cache_dir(self.cache_dir or config.cache_dir).resolve()
        if folder not in self._caches:
            self._caches[folder] = ResponseCache(folder)
        return self._caches[folder]
