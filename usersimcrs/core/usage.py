"""What LLM work cost, in one record (`Usage`) used by a call's result, the usage tracker's slices
and every judgment, and the pure helpers that add usage summaries (the manifest's plain dicts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict

COUNTERS = ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "errors")
"""The fields of `Usage`, which are also the counter names of every usage summary on disk."""

UsageSummary: TypeAlias = dict[str, Any]
"""A usage summary as the manifest stores it: the `COUNTERS` at the top, the same per slice in nested
mappings (`by_component`, with `prompt_chars`, `prefix_reused_chars`, `prefix_reuse`; `by_model`; a
judging's `by_judge`, `statuses`, ...) and `repaired` counts by kind. A plain dict, since summaries are
added leaf by leaf (`add_summaries`) and older manifests carry keys of their time."""


class Usage(BaseModel):
    """Requests that reached a backend (`calls`; cache hits excluded), requests answered from the
    response cache (`cache_hits`), tokens, retries and errors. One call's `LLMResult.usage` carries
    its tokens only; sums (tracker slices, a judgment's attempts) fill the other counters too."""

    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    errors: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens (not stored: the on-disk fields are `COUNTERS`)."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        """The sum of this and `other`, as a new object (neither operand changes)."""
        out = self.model_copy()
        out += other
        return out

    def __iadd__(self, other: Usage) -> Usage:
        """Add `other` into this one in place (the per-call hot path of the tracker: plain int
        fields, so the field dict is updated directly, without validation)."""
        mine, theirs = self.__dict__, other.__dict__
        for name in COUNTERS:
            mine[name] += theirs[name]
        return self


def upgrade_legacy_usage(data: Any) -> Any:
    """`data` (a usage dict, or a summary nesting them) with the judge usage of releases before the
    single `Usage` rewritten: `cached_calls` becomes `cache_hits`, and `calls`, which then counted
    cache hits too, becomes the backend calls only. Anything else is returned as is."""
    if not isinstance(data, Mapping):
        return data
    out = {key: upgrade_legacy_usage(value) for key, value in data.items()}
    if "cached_calls" in out:
        cached = out.pop("cached_calls") or 0
        if "cache_hits" not in out:
            out["cache_hits"] = cached
            out["calls"] = max(0, (out.get("calls") or 0) - cached)
    return out


def prefix_share(counts: Mapping[str, Any]) -> float | None:
    """Reused prompt characters / prompt characters of a summary slice (None when nothing was sent)."""
    total = counts.get("prompt_chars") or 0
    return round((counts.get("prefix_reused_chars") or 0) / total, 4) if total else None


def with_prefix_reuse(summary: Mapping[str, Any]) -> dict[str, Any]:
    """`summary` (or any slice of it) with `prefix_reuse` recomputed from its character counts,
    recursively (a ratio does not add up, so it is derived again after every sum)."""
    out = {k: with_prefix_reuse(v) if isinstance(v, Mapping) else v for k, v in summary.items()}
    if "prompt_chars" in out:
        out["prefix_reuse"] = prefix_share(out)
    return out


def _add_leaves(a: Any, b: Any) -> Any:
    """Numbers added leaf by leaf through nested dicts; any other value is `b`'s unless it is None."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        a, b = a or {}, b or {}
        return {key: _add_leaves(a.get(key), b.get(key)) for key in {**a, **b}}
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a + b
    return b if b is not None else a


def add_summaries(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> UsageSummary:
    """The sum of two usage summaries as the manifest stores them (counters, nested `by_component`,
    `by_model`, `by_judge`, status counts, ...): numbers are added and every `prefix_reuse` ratio
    is recomputed from the summed characters. Used wherever a run or a judging adds to what is on disk."""
    return with_prefix_reuse(_add_leaves(dict(a or {}), dict(b or {})))
