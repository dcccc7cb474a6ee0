"""Run configs of the benchmark setups: an LLM user or the agenda user against the in-process BM25 CRS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from usersimcrs.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
ITEMS = ROOT / "configs" / "data" / "tiny_movies.csv"
RATINGS = ROOT / "configs" / "data" / "tiny_ratings.csv"
UNUSED_LLM = "http://127.0.0.1:9/v1"  # agenda runs never call it


def _base(name: str, conversations: int, concurrency: int, seed: int) -> dict[str, Any]:
    return {
        "name": name,
        "seed": seed,
        "conversations": conversations,
        "concurrency": concurrency,
        "max_turns": 8,
        "items": {"path": str(ITEMS), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(RATINGS)},
        "crs": {"type": "retrieval"},
        "progress": False,
    }


CRSS = {"echo": {"type": "benchmarks.plugins:EchoCRS"}, "retrieval": {"type": "retrieval"}}


def llm_user_config(
    base_url: str,
    *,
    conversations: int,
    concurrency: int,
    cache_dir: str | None = None,
    seed: int = 1,
    name: str = "bench-llm",
    crs: str = "echo",
    client: str | None = None,
    crs_url: str | None = None,
) -> RunConfig:
    """The single-prompt LLM user (one LLM call per user turn) against an in-process CRS (echo or BM25),
    or, with `crs_url`, the iEvaLM-protocol test CRS server at that URL (its own process).

    `client` is the HTTP client of the openai backend (`aiohttp` or `official`; None: the config default).
    """
    data = _base(name, conversations, concurrency, seed)
    data["max_turns"] = 4  # with the benchmark server's replies every conversation runs to it: 4 LLM calls each
    data["crs"] = {"type": "crs_arena", "url": crs_url} if crs_url else dict(CRSS[crs])
    data["llm"] = {
        "backend": "openai",
        "model": "test-model",
        "base_url": base_url,
        "max_concurrency": max(64, concurrency),
        "cache": cache_dir is not None,
        "cache_dir": cache_dir,
        "retries": 0,
    }
    if client is not None:
        data["llm"]["client"] = client
    data["simulator"] = {"type": "llm_single", "max_tokens": 48}
    return RunConfig.model_validate(data)


def agenda_config(*, conversations: int, concurrency: int, seed: int = 1, name: str = "bench-agenda") -> RunConfig:
    """The agenda-based user (rule NLU, template NLG: no LLM) against the BM25 CRS."""
    data = _base(name, conversations, concurrency, seed)
    data["llm"] = {"backend": "openai", "model": "unused", "base_url": UNUSED_LLM}
    data["simulator"] = {"type": "agenda"}
    return RunConfig.model_validate(data)
