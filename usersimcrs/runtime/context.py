"""Resources shared by every conversation of a run: items, ratings, LLMs, the HTTP pool, built indexes.

The context owns what it hands out: whatever is registered with `on_close`/`enter_async` (the HTTP
pool, the LLM backends, a recorder's file) is released by `aclose()` when the run ends, in reverse
order, even when a run fails half-way.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncContextManager, Awaitable, Callable, Hashable, Protocol, TypeVar

from usersimcrs.core.items import ItemCollection
from usersimcrs.core.profile import Ratings
from usersimcrs.core.secrets import Secrets
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.usage import UsageSummary
from usersimcrs.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

    from usersimcrs.llm.base import LLM

T = TypeVar("T")


class LLMSource(Protocol):
    """Hands out an LLM per component (simulator, nlu, nlg, crs, judge, ...) and accounts for them."""

    def get(self, component: str) -> LLM:  # pragma: no cover - interface
        ...

    def usage_summary(self) -> UsageSummary:  # pragma: no cover - interface
        ...

    def models(self) -> dict[str, str]:  # pragma: no cover - interface
        ...

    async def aclose(self) -> None:  # pragma: no cover - interface
        ...


@dataclass
class RunContext:
    """Shared, read-only (after set-up) state of a run; conversation state never lives here."""

    items: ItemCollection | None = None
    ratings: Ratings | None = None
    llms: LLMSource | None = None
    http: httpx.AsyncClient | None = None
    run_dir: Path | None = None
    run_seed: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    cache: dict[str, Any] = field(default_factory=dict)
    secrets: Secrets = field(default_factory=Secrets)  # values of the env vars the config names, masked on the way in
    # read-only resources of the command this run belongs to (a matrix: its cells share the items and indexes)
    resources: SharedResources = field(default_factory=SharedResources)
    _exit: AsyncExitStack = field(default_factory=AsyncExitStack, repr=False)

    def llm(self, component: str) -> LLM:
        """The LLM configured for `component`; a clear error when the run has none."""
        if self.llms is None:
            raise ConfigError(f"component {component!r} needs an LLM but the run has no 'llm' section")
        return self.llms.get(component)

    def require_items(self, who: str) -> ItemCollection:
        """The item collection, or a ConfigError naming the plug-in that needs one."""
        if self.items is None:
            raise ConfigError(f"{who} needs an item collection: add an 'items' section to the run config")
        return self.items

    def data_path(self, name: str) -> Path | None:
        """The file the config's `data:` section names `name` (None when it names none)."""
        value = self.data.get(name)
        return Path(value) if isinstance(value, (str, Path)) else None

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A lazily built, run-wide read-only resource (e.g. a BM25 index or mined templates)."""
        if key not in self.cache:
            self.cache[key] = factory()
        value: T = self.cache[key]
        return value

    def derived(self, source: object, key: Hashable, factory: Callable[[], T]) -> T:
        """A read-only resource built from `source` (e.g. `self.items`) and what `key` names, nothing else: built
        once per command, so the cells of a matrix that share an item collection share its BM25 index too."""
        return self.resources.derived(source, key, factory)

    def on_close(self, callback: Callable[[], Awaitable[Any]] | Callable[[], Any]) -> None:
        """Call `callback` (sync or async) when the run ends; callbacks run in reverse order."""

        async def call() -> None:
            result = callback()
            if hasattr(result, "__await__"):
                await result

        self._exit.push_async_callback(call)

    async def enter_async(self, manager: AsyncContextManager[T]) -> T:
        """Enter an async context manager for the rest of the run (exited by `aclose`)."""
        return await self._exit.enter_async_context(manager)

    async def aclose(self) -> None:
        """Release everything registered, newest first; safe to call twice."""
        await self._exit.aclose()
