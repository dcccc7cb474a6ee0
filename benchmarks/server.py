"""The benchmark servers (fixed-latency LLM server, iEvaLM-protocol CRS) as subprocesses, so their
work never shares the GIL with the toolkit; each URL knows its process, whose CPU time the
benchmarks report beside the toolkit's (the servers share the machine's cores with it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from usersimcrs.testing.llm_server import COUNTERS_PATH, RESET_PATH


class ServedURL(str):
    """A server's base URL that also knows the server's process (for its CPU time)."""

    pid: int

    def __new__(cls, url: str, pid: int) -> ServedURL:
        made = super().__new__(cls, url)
        made.pid = pid
        return made

    def cpu_s(self) -> float | None:
        """The server process's CPU time so far (user + system, all threads); None where /proc is missing."""
        return process_cpu_s(self.pid)


def parse_cpus(text: str) -> frozenset[int]:
    """CPU numbers from a list such as ``0,1`` or ``2-7`` or ``2-4,6`` (as taskset writes them); a ValueError
    naming the list when it is malformed or names CPUs this process may not run on."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            low, dash, high = part.strip().partition("-")
            first, last = int(low), int(high) if dash else int(low)
            if last < first:
                raise ValueError(part)
            cpus.update(range(first, last + 1))
    except ValueError:
        raise ValueError(f"CPU list {text!r}: write CPU numbers and ranges, e.g. 0,1 or 2-7") from None
    available = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set()
    if not cpus or not cpus <= available:
        raise ValueError(f"CPU list {text!r}: not all of them are available here (available: {sorted(available)})")
    return frozenset(cpus)


def listed_cpus(cpus: frozenset[int] | None) -> list[int] | str:
    """CPUs as results record them: sorted, or that they were not pinned."""
    return sorted(cpus) if cpus is not None else "any (shared)"


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` from /proc (Linux); None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def llm_server(
    latency_ms: float,
    *,
    jitter_ms: float = 0.0,
    seed: int = 0,
    fixed_booleans: bool = True,
    cpus: frozenset[int] | None = None,
) -> Iterator[ServedURL]:
    """Start `python -m usersimcrs.testing.llm_server` on 127.0.0.1; yields its OpenAI base URL (`.../v1`).

    `fixed_booleans` (the fixed-length workload): its JSON replies never set a boolean, so an LLM user
    never asks to end and every conversation runs to `max_turns`. With booleans varied by the prompt's
    digest, conversation lengths moved with any prompt edit, and B1 at C=32 read 0.884 or 0.91 on the
    same code (docs/benchmarks.md). The real workload varies them and fixes the length with `min_turns`.
    """
    command = [
        sys.executable, "-m", "usersimcrs.testing.llm_server",
        "--host", "127.0.0.1", "--port", "0",
        "--latency-ms", str(latency_ms), "--jitter-ms", str(jitter_ms), "--seed", str(seed),
    ]  # fmt: skip
    if fixed_booleans:
        command += ["--booleans", "false"]
    with served(command, "LLM", cpus) as url:
        yield ServedURL(f"{url}/v1", url.pid)


@contextmanager
def crs_server(protocol: str = "ievalm", *options: str, cpus: frozenset[int] | None = None) -> Iterator[ServedURL]:
    """Start `python -m usersimcrs.testing.crs_servers <protocol> [options]` on 127.0.0.1; yields its base URL."""
    command = [sys.executable, "-m", "usersimcrs.testing.crs_servers", protocol, "--port", "0", *options]
    with served(command, "CRS", cpus) as url:
        yield url


def llm_counters(openai_url: str) -> dict:
    """The LLM test server's counters (chat requests, when the first one arrived)."""
    with urllib.request.urlopen(openai_url.removesuffix("/v1") + COUNTERS_PATH, timeout=10) as answer:
        return json.loads(answer.read())


def reset_llm_counters(openai_url: str) -> None:
    """Forget the LLM test server's log and counters (the next chat request is the 'first' again)."""
    request = urllib.request.Request(openai_url.removesuffix("/v1") + RESET_PATH, data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()


@contextmanager
def served(command: list[str], what: str, cpus: frozenset[int] | None = None) -> Iterator[ServedURL]:
    """Run `command` until the block ends; yields the URL its first output line ends with. `cpus`: the
    CPUs it may run on (set before it starts, so all its threads keep to them); None: any."""
    pin = None if cpus is None else (lambda: os.sched_setaffinity(0, cpus))
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=pin,
    )
    try:
        url = (process.stdout.readline() if process.stdout else "").strip().rsplit(" ", 1)[-1]
        if not url.startswith("http"):
            raise RuntimeError(f"the benchmark {what} server did not start")
        yield ServedURL(url, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
