"""Starts the event loop of a run: uvloop when asked for (or, with `auto`, when installed), else asyncio."""

from __future__ import annotations

import asyncio
import gc
from contextlib import contextmanager
from typing import Any, Callable, Coroutine, Iterator, Literal, TypeVar

from usersimcrs.errors import ConfigError

T = TypeVar("T")
LoopKind = Literal["auto", "asyncio", "uvloop"]


def uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop constructor, or None when uvloop is not installed (e.g. on Windows)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def resolve_loop(kind: str) -> str:
    """The loop a run will use for `kind`: 'uvloop' or 'asyncio' (`auto` picks uvloop when installed)."""
    if kind == "asyncio":
        return "asyncio"
    available = uvloop_factory() is not None
    if kind == "uvloop" and not available:
        raise ConfigError("event_loop: uvloop is not installed (pip install uvloop), use 'asyncio' or 'auto'")
    if kind not in ("auto", "uvloop"):
        raise ConfigError(f"event_loop: unknown loop {kind!r}; known: auto, asyncio, uvloop")
    return "uvloop" if available else "asyncio"


def run_coroutine(coro: Coroutine[Any, Any, T], kind: str = "auto") -> T:
    """Run `coro` to completion on a fresh loop of `kind` (like asyncio.run, with a loop choice)."""
    try:
        chosen = resolve_loop(kind)
    except ConfigError:
        coro.close()  # never awaited: close it so Python does not warn
        raise
    factory = uvloop_factory() if chosen == "uvloop" else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


def run_blocking(coro: Coroutine[Any, Any, T], kind: str = "auto") -> T:
    """Run `coro` to completion from synchronous code, also when an event loop is already running.

    Inside a running loop (a Jupyter cell, an async application) the coroutine runs on a fresh loop
    in a worker thread while the caller waits; elsewhere it runs on a fresh loop in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_coroutine(coro, kind)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="usersimcrs") as pool:
        return pool.submit(run_coroutine, coro, kind).result()


def current_loop_kind() -> str:
    """'uvloop' or 'asyncio': the kind of the running loop (recorded in the run manifest)."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


YOUNG_GENERATION = 20_000  # allocations between young collections during a run (CPython's default: 700)


@contextmanager
def run_heap() -> Iterator[None]:
    """Cyclic-GC settings for a run, restored when it ends.

    The objects alive at the start (imports, items, ratings) are frozen out of the collector: a full
    collection over them stalled every conversation in flight (80-100 ms seen at C=32), and they
    live for the whole run anyway. The young generation is made larger: at the default threshold a
    run at C=128 spent about 5% of its CPU in some 250 young collections of short-lived request and
    reply objects (docs/benchmarks.md); with it, five.
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(thresholds[0], YOUNG_GENERATION), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
