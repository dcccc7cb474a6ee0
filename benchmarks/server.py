"""The benchmark servers (fixed-latency LLM server, iEvaLM-protocol CRS) as subprocesses, so their
work never shares the GIL with the toolkit."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def llm_server(latency_ms: float, *, jitter_ms: float = 0.0, seed: int = 0) -> Iterator[str]:
    """Start `python -m usersimcrs.testing.llm_server` on 127.0.0.1; yields its OpenAI base URL (`.../v1`).

    Its JSON replies never set a boolean, so an LLM user never asks to end and every conversation
    runs to `max_turns`: the same number of calls each. With booleans varied by the prompt's digest,
    conversation lengths (and so the ramp-down at a run's end) moved with any prompt edit, and B1 at
    C=32 read 0.884 or 0.91 on the same code (docs/benchmarks.md).
    """
    command = [
        sys.executable, "-m", "usersimcrs.testing.llm_server",
        "--host", "127.0.0.1", "--port", "0",
        "--latency-ms", str(latency_ms), "--jitter-ms", str(jitter_ms), "--seed", str(seed),
        "--booleans", "false",
    ]  # fmt: skip
    with served(command, "LLM") as url:
        yield f"{url}/v1"


@contextmanager
def crs_server(protocol: str = "ievalm") -> Iterator[str]:
    """Start `python -m usersimcrs.testing.crs_servers <protocol>` on 127.0.0.1; yields its base URL."""
    with served([sys.executable, "-m", "usersimcrs.testing.crs_servers", protocol, "--port", "0"], "CRS") as url:
        yield url


@contextmanager
def served(command: list[str], what: str) -> Iterator[str]:
    """Run `command` until the block ends; yields the URL its first output line ends with."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        url = (process.stdout.readline() if process.stdout else "").strip().rsplit(" ", 1)[-1]
        if not url.startswith("http"):
            raise RuntimeError(f"the benchmark {what} server did not start")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
