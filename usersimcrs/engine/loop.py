"""Starts the event loop of a run: uvloop when asked for (or, with `auto`, when installed), else asyncio."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
import time
from collections.abc import Collection
from contextlib import contextmanager
from typing import Any, Callable, Coroutine, Iterator, Literal, TypeVar

from usersimcrs.errors import ConfigError

T = TypeVar("T")
LoopKind = Literal["auto", "asyncio", "uvloop"]
SHUTDOWN_GRACE_S = 5.0
"""How long cancelled tasks get to finish when a run stops (after an error, at the end of the loop)."""
log = logging.getLogger(__name__)


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
    """Run `coro` to completion on a fresh loop of `kind` (like asyncio.run, with a loop choice).

    Unlike `asyncio.run`, shutting the loop down is bounded: tasks still running when `coro` ends
    (after an error, say) are cancelled again and again for at most `SHUTDOWN_GRACE_S`, and a task
    that still does not end is abandoned with a log line rather than waited for forever. The first
    Ctrl-C cancels `coro` (KeyboardInterrupt), as with `asyncio.run`.
    """
    try:
        chosen = resolve_loop(kind)
    except ConfigError:
        coro.close()  # never awaited: close it so Python does not warn
        raise
    factory = uvloop_factory() if chosen == "uvloop" else None
    loop = factory() if factory is not None else asyncio.new_event_loop()
    if factory is None:
        asyncio.set_event_loop(loop)  # as asyncio.run does for its own loops
    try:
        main = loop.create_task(coro)
        with _interrupt_cancels(main) as interrupted:
            try:
                return loop.run_until_complete(main)
            except asyncio.CancelledError:
                if interrupted:
                    raise KeyboardInterrupt from None
                raise
    finally:
        try:
            loop.run_until_complete(_settle(SHUTDOWN_GRACE_S))
        finally:
            if factory is None:
                asyncio.set_event_loop(None)
            loop.close()


@contextmanager
def _interrupt_cancels(main: asyncio.Task[Any]) -> Iterator[list[bool]]:
    """While running `main` in the main thread, the first SIGINT cancels it (a second one interrupts at once)."""
    fired: list[bool] = []
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not (
        signal.default_int_handler
    ):
        yield fired
        return

    def on_interrupt(signum: int, frame: Any) -> None:
        if fired or main.done():
            raise KeyboardInterrupt
        fired.append(True)
        main.get_loop().call_soon_threadsafe(main.cancel)

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield fired
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


async def cancel_bounded(tasks: Collection[asyncio.Task[Any]], grace_s: float = SHUTDOWN_GRACE_S) -> int:
    """Cancel `tasks` and wait at most `grace_s` for them to end; returns how many did not.

    A task is cancelled again while it runs (a cancellation can be swallowed, e.g. by `wait_for` in
    Python 3.11 when its inner task finishes at the same moment), so a task that goes on to wait
    for something else is cancelled there too.
    """
    deadline = time.monotonic() + grace_s
    pending = {t for t in tasks if not t.done()}
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            log.warning("%d task(s) did not stop within %.0fs of being cancelled; left behind", len(pending), grace_s)
            break
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=min(0.2, left))
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()  # retrieved, so the loop does not log it as never retrieved
    return len(pending)


async def _settle(grace_s: float) -> None:
    """The loop's shutdown, bounded: cancel leftover tasks, close async generators, stop the executor."""
    started = time.monotonic()
    current = asyncio.current_task()
    await cancel_bounded([t for t in asyncio.all_tasks() if t is not current], grace_s)
    loop = asyncio.get_running_loop()
    for step in (loop.shutdown_asyncgens(), loop.shutdown_default_executor()):
        left = max(0.0, grace_s - (time.monotonic() - started))
        task = asyncio.ensure_future(step)
        await asyncio.wait({task}, timeout=max(left, 0.05))
        if not task.done():
            await cancel_bounded([task], 0.1)
    await cancel_bounded([t for t in asyncio.all_tasks() if t is not current], max(0.1, grace_s / 5))


def run_blocking(coro: Coroutine[Any, Any, T], kind: str = "auto") -> T:
    """Run `coro` to completion from synchronous code, also when an event loop is already running.

    Inside a running loop (a Jupyter cell, an async application) the coroutine runs on a fresh loop
    in a worker thread while the caller waits; elsewhere it runs on a fresh loop in this thread.
    """
    try:
        asyncio.get_running_loop()
        in_loop = True
    except RuntimeError:
        in_loop = False
    if not in_loop:  # run outside the except block: an error of `coro` is not chained to "no running event loop"
        return run_coroutine(coro, kind)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="usersimcrs") as pool:
        return pool.submit(run_coroutine, coro, kind).result()


def current_loop_kind() -> str:
    """'uvloop' or 'asyncio': the kind of the running loop (recorded in the run manifest)."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"


YOUNG_GENERATION = 60_000  # allocations between young collections during a run (CPython's default: 700)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic GC off while a run loads its data (items, ratings), and what is alive then frozen.

    Loaded records hold no reference cycles, so collections only re-scan them: loading the 13.8k-item
    MovieLens sample ran about 110 young and one full collection (40-60 ms of its 0.17-0.27 s), and
    merely pausing the collector moved that into one 40 ms collection just after. Frozen (`gc.freeze`),
    they are never scanned until `thaw` (when the context that loaded them closes, or a run's end in
    `run_heap`); reference counting frees them as ever.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()  # after a loading error nothing is frozen: no context will thaw it
    finally:
        if enabled:
            gc.enable()


def thaw() -> None:
    """Give what `collector_paused` or `run_heap` froze back to the cyclic collector (a long-lived process,
    such as a Ray worker running chunk after chunk, must not keep a loaded context's leftovers frozen)."""
    gc.unfreeze()


@contextmanager
def run_heap() -> Iterator[None]:
    """Cyclic-GC settings for a run, restored when it ends.

    The objects alive at the start (imports, items, ratings) are frozen out of the collector: a full
    collection over them stalled every conversation in flight (80-100 ms seen at C=32), and they
    live for the whole run anyway. The young generation is made larger: at the default threshold a
    run at C=128 spent about 5% of its CPU in some 250 young collections of short-lived request and
    reply objects (docs/benchmarks.md). A young collection scans the conversations in flight (some
    40k objects at C=128: 25-40 ms, every conversation stalled meanwhile); with nearly all else freed
    by reference counting, a 1,024-conversation run of the real workload ran 7-10 of them at 20,000
    (0.13-0.27 s) and one at 60,000 (0.02 s).
    """
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(thresholds[0], YOUNG_GENERATION), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
