"""A progress bar for long runs and judge runs: done, failed, LLM tokens and retries, ETA (quiet when
not a terminal)."""

from __future__ import annotations

import sys
from typing import Any


class RunProgress:
    """Wraps rich's progress bar; a no-op when disabled or stderr is not a terminal.

    `label` names what is counted (simulated conversations by default; e.g. "judge quality").
    """

    def __init__(
        self, total: int, done: int = 0, *, enabled: bool = True, llms: Any = None, label: str = "conversations"
    ) -> None:
        self.total = total
        self.label = label
        self.done = done
        self.failed = 0
        self.llms = llms
        self.enabled = enabled and sys.stderr.isatty()
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> RunProgress:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn(f"[bold]{self.label}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                transient=False,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("run", total=self.total, completed=self.done, stats="")
        return self

    def advance(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += int(failed)
        if self._progress is not None:
            self._progress.update(self._task, completed=self.done, stats=self._stats())

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
