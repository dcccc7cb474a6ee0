"""Progress of long runs and judge runs: done, failed, LLM calls, tokens and retries, time left.

On a terminal, a rich progress bar; otherwise (a log file, CI, a notebook's captured stderr, or
several matrix cells at once, whose bars would overwrite each other) a plain line on stderr every
`interval_s` seconds while work goes on, also while no unit finishes (a slow LLM cell whose first
conversation takes minutes), so a long run never looks hung.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import LLMSource

PLAIN_INTERVAL_S = 15.0
"""Seconds between two plain progress lines when stderr is not a terminal (environment variable
USERSIMCRS_PROGRESS_INTERVAL_S overrides it)."""
INTERVAL_ENV = "USERSIMCRS_PROGRESS_INTERVAL_S"


class RunProgress:
    """A progress display for `total` units (`label`: simulated conversations by default, e.g. "judge
    quality" or a matrix cell's name); nothing when disabled. `stream` (default stderr) decides bar or
    plain lines; `plain` asks for plain lines on a terminal too (cells running side by side)."""

    def __init__(
        self,
        total: int,
        done: int = 0,
        *,
        enabled: bool = True,
        llms: LLMSource | None = None,
        label: str = "conversations",
        stream: TextIO | None = None,
        interval_s: float | None = None,
        plain: bool = False,
    ) -> None:
        self.total = total
        self.label = label
        self.done = done
        self.failed = 0
        self.llms = llms
        self.enabled = enabled
        self.stream = stream
        self.interval_s = interval_s if interval_s is not None else plain_interval_s()
        self.plain = plain
        self._progress: Any = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._lines = 0
        self._printed = done
        self._task: Any = None
        self._started = 0.0
        self._first = done
        self._last_line = 0.0

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def __enter__(self) -> RunProgress:
        self._started = self._last_line = time.monotonic()
        if self.enabled and self._out().isatty() and not self.plain:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn(f"[bold]{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                transient=False,
                console=Console(file=self._out()),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("run", total=self.total, completed=self.done, stats="")
        elif self.enabled and self.interval_s > 0:  # a line every interval even while nothing finishes
            self._ticker = threading.Thread(target=self._tick, name=f"progress {self.label}", daemon=True)
            self._ticker.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s / 4):
            if time.monotonic() - self._last_line >= self.interval_s:
                self._print()

    def _print(self) -> None:
        self._last_line = time.monotonic()
        self._lines += 1
        self._printed = self.done
        print(self.line(), file=self._out(), flush=True)

    def advance(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, stats=self._stats())
        elif self.enabled and time.monotonic() - self._last_line >= self.interval_s:
            self._print()

    def line(self) -> str:
        """The plain progress line: `label: done/total, stats, elapsed, estimated time left`."""
        elapsed = time.monotonic() - self._started
        ran = self.done - self._first
        left = (self.total - self.done) * elapsed / ran if ran else None
        eta = f", ~{_duration(left)} left" if left is not None and self.done < self.total else ""
        return f"{self.label}: {self.done}/{self.total} | {self._stats()} | {_duration(elapsed)} elapsed{eta}"

    def _stats(self) -> str:
        text = f"failed {self.failed}"
        if self.llms is not None and hasattr(self.llms, "usage_summary"):
            usage = self.llms.usage_summary()
            tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
            text += f" | llm calls {usage.get('calls', 0)} (cached {usage.get('cache_hits', 0)}, retries {usage.get('retries', 0)}) | tokens {tokens}"
        return text

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
        if self._ticker is not None:
            self._stop.set()
            self._ticker.join()
            if self._lines and self._printed != self.done:  # a long run's plain lines end with its last count
                self._print()


def plain_interval_s() -> float:
    """The plain-line interval: USERSIMCRS_PROGRESS_INTERVAL_S when set to a number, else PLAIN_INTERVAL_S."""
    try:
        return max(0.0, float(os.environ[INTERVAL_ENV]))
    except (KeyError, ValueError):
        return PLAIN_INTERVAL_S


def _duration(seconds: float) -> str:
    """`42s`, `3m05s` or `1h02m`."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
