"""Token and call accounting per component (simulator, nlu, nlg, judge, ...) and per model, and
how much of each prompt repeats a prefix already sent to the same model (what a prefix cache saves)."""

from __future__ import annotations

import threading
from typing import Any, Iterable

from usersimcrs.core.usage import Usage, UsageSummary, prefix_share
from usersimcrs.llm.base import Message

PREFIX_COUNTERS = ("prompt_chars", "prefix_reused_chars")
PREFIX_BLOCK_CHARS = 128
"""Granularity of the prefix counter: prompts are compared in blocks of this many characters (as
serving stacks cache key-value blocks of a fixed number of tokens), so a shared prefix is counted
up to its last whole block."""
MAX_PREFIX_BLOCKS = 200_000
"""Block hashes kept per model before the set starts over (bounds memory on very long runs)."""


def prompt_text(messages: Iterable[Message]) -> str:
    """The characters of a chat prompt as a server sees them in order: role marker, then content."""
    return "".join(f"\x1e{m.role}\x1f{m.content}" for m in messages)


def block_hashes(text: str, block: int = PREFIX_BLOCK_CHARS) -> list[int]:
    """Hashes of `text`'s whole leading blocks (UTF-8 bytes): entry i identifies the prefix of i+1 blocks.

    A chain of Python's own 64-bit hashes (entry i hashes entry i-1 with block i): about a fifth of the
    CPU of a running blake2b copied at every block, on every prompt a run sends. The values are
    salted per process, which is all the counter needs: it compares prefixes within one process."""
    data = text.encode("utf-8", "surrogatepass")
    running = 0
    out: list[int] = []
    for start in range(0, len(data) - block + 1, block):
        running = hash((running, data[start : start + block]))
        out.append(running)
    return out


class PrefixCounter:
    """Per model: the block-prefix hashes already sent; per call: how many characters repeat one.

    Keeps hashes only (8 bytes per block), never prompts; a call costs one pass of hashing over
    its prompt (tens of microseconds for a judge prompt).
    """

    def __init__(self, block: int = PREFIX_BLOCK_CHARS, max_blocks: int = MAX_PREFIX_BLOCKS) -> None:
        self.block = block
        self.max_blocks = max_blocks
        self._seen: dict[str, set[int]] = {}

    def observe(self, model_key: str, text: str) -> tuple[int, int]:
        """(prompt characters, characters of the longest block prefix sent to `model_key` before)."""
        hashes = block_hashes(text, self.block)
        seen = self._seen.setdefault(model_key, set())
        reused = 0
        for digest in hashes:
            if digest not in seen:
                break
            reused += 1
        if len(seen) + len(hashes) > self.max_blocks:
            seen.clear()
        seen.update(hashes)
        return len(text), min(len(text), reused * self.block)


def _slice_of(slices: dict[str, Usage], key: str) -> Usage:
    """The running `Usage` of `key` in `slices`, made on first use (no throwaway object per call)."""
    found = slices.get(key)
    if found is None:
        found = slices[key] = Usage()
    return found


class UsageTracker:
    """Sums Usage overall, by component and by model (`backend:model`), and the prompt-prefix
    reuse per component (prefixes are shared across components of the same model, as in a server's cache)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._total = Usage()
        self._by_component: dict[str, Usage] = {}
        self._by_model: dict[str, Usage] = {}
        self._prefix = PrefixCounter()
        self._chars: dict[str, list[int]] = {}  # component -> [prompt_chars, prefix_reused_chars]
        self._repairs: dict[str, int] = {}  # repairs of hostile reply values (lone surrogates, ...), by kind

    def record(self, component: str, model_key: str, counts: Usage) -> None:
        """Add the counts of one request to the three slices."""
        with self._lock:
            self._total += counts
            by_component = _slice_of(self._by_component, component)
            by_component += counts
            by_model = _slice_of(self._by_model, model_key)
            by_model += counts

    def record_prompt(self, component: str, model_key: str, messages: list[Message]) -> None:
        """Count one prompt sent to the backend (not a response-cache hit) for the prefix-reuse figure."""
        text = prompt_text(messages)
        with self._lock:
            total, reused = self._prefix.observe(model_key, text)
            chars = self._chars.setdefault(component, [0, 0])
            chars[0] += total
            chars[1] += reused

    def record_repairs(self, counts: dict[str, int]) -> None:
        """Count what was repaired in a reply before it was used (see `core/text_repair.py`)."""
        with self._lock:
            for kind, n in counts.items():
                self._repairs[kind] = self._repairs.get(kind, 0) + n

    def _slice(self, component: str, counts: Usage) -> dict[str, Any]:
        total, reused = self._chars.get(component, (0, 0))
        out = {**counts.model_dump(), "prompt_chars": total, "prefix_reused_chars": reused}
        out["prefix_reuse"] = prefix_share(out)
        return out

    def summary(self) -> UsageSummary:
        """`{calls, cache_hits, prompt_tokens, completion_tokens, retries, errors, by_component, by_model}`;
        each component also has `prompt_chars`, `prefix_reused_chars` and `prefix_reuse` (their ratio).
        `repaired` (only when a reply needed it) counts the hostile values repaired, by kind."""
        with self._lock:
            summary = {
                **self._total.model_dump(),
                "by_component": {k: self._slice(k, v) for k, v in sorted(self._by_component.items())},
                "by_model": {k: v.model_dump() for k, v in sorted(self._by_model.items())},
            }
            if self._repairs:
                summary["repaired"] = dict(sorted(self._repairs.items()))
            return summary
