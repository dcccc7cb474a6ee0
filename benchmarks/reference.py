"""A machine-speed reference measured beside the benchmark figures: the CPU time of a fixed pure-Python
workload, so that CPU ms per LLM call or per conversation taken on different machines (or on one
machine under different load) can be set side by side: divide a figure by the reference of its run.

The workload is 10,000,000 additions in a Python `for` loop (what the toolkit's own CPU is made of:
interpreter dispatch, small objects), timed as five slices of 2,000,000 with `time.process_time`; the
figure is five times the fastest slice, so a burst of another process's work on a shared machine
moves it less than a single timing. On the shared 2-core machine of the issue #22 rounds it read
0.36-0.59 s (the same loop at module level, on globals, takes about three times as long).
"""

from __future__ import annotations

import time

ADDITIONS = 10_000_000
SLICES = 5


def _slice(additions: int) -> float:
    started = time.process_time()
    total = 0
    for i in range(additions):
        total += i
    return time.process_time() - started


def reference_cpu_s(additions: int = ADDITIONS, slices: int = SLICES) -> float:
    """CPU seconds of `additions` pure-Python additions (`slices` times the fastest of `slices` slices)."""
    per_slice = max(1, additions // slices)
    return round(slices * min(_slice(per_slice) for _ in range(slices)), 3)


def describe() -> str:
    """What the reference figure measures, in one phrase (printed and written beside it)."""
    return f"CPU s of {ADDITIONS:,} pure-Python additions (x{SLICES} the fastest of {SLICES} slices)"


def machine_speed(cpu_s_at_start: float) -> dict[str, object]:
    """The reference as a run records it: what it measures, its figure at the start and (now) at the end."""
    return {"reference": describe(), "cpu_s_at_start": cpu_s_at_start, "cpu_s_at_end": reference_cpu_s()}


if __name__ == "__main__":  # pragma: no cover
    print(f"{reference_cpu_s()} ({describe()})")
