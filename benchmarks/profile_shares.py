"""Shares of a py-spy profile per component, for docs/benchmarks.md ("Where the time went")::

    py-spy record -r 250 --format raw -o prof.txt -- python -m benchmarks.high_concurrency --concurrency 128 --client lean
    python -m benchmarks.profile_shares prof.txt

Each sample (a whole stack) goes to the first component whose marker occurs anywhere in it, in the
order below; start-up (imports, data loading) is counted but left out of the shares.
"""

from __future__ import annotations

import sys
from collections import Counter

STARTUP = "start-up (imports, data load)"
COMPONENTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (STARTUP, ("_find_and_load", "build_context", "load_items", "load_ratings")),
    ("connection set-up worker threads", ("concurrent/futures/thread.py",)),
    ("openai SDK call path", ("openai/",)),
    ("ollama SDK call path", ("ollama/",)),
    ("CRS transport", ("crs_connectors/transport.py", "httpx/", "httpcore/")),  # before the client it shares
    ("LLM client (lean_http, http_client)", ("lean_http.py", "http_client.py", "aiohttp/")),
    ("difflib", ("difflib",)),
    ("title resolution", ("item_parsing.py", "core/items.py")),
    ("profile generation", ("user_model/", "profile")),
    ("LLM layer (retries, cache, structured output)", ("llm/managed.py", "llm/structured.py", "llm/cache.py")),
    ("simulator (prompt, parsing)", ("simulators/",)),
    ("records / JSONL", ("jsonl", "recorder", "dialogue.py")),
    ("event loop and sockets (unattributed)", ("uvloop", "asyncio/", "engine/loop.py")),
)


def shares(lines: list[str]) -> tuple[Counter[str], int]:
    """Samples per component and the number of samples outside start-up."""
    counts: Counter[str] = Counter()
    for line in lines:
        stack, _, number = line.rstrip().rpartition(" ")
        if not number.isdigit():
            continue
        name = next((name for name, markers in COMPONENTS if any(m in stack for m in markers)), "other")
        counts[name] += int(number)
    return counts, sum(counts.values()) - counts[STARTUP]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0], encoding="utf-8") as handle:
        counts, run_total = shares(handle.readlines())
    print(f"{run_total} samples outside start-up")
    for name, number in counts.most_common():
        share = "" if name == STARTUP else f"{number / max(1, run_total):7.1%}"
        print(f"{name:48s} {number:7d} {share}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
