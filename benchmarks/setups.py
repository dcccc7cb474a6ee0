"""Run configs of the benchmark setups: an LLM user or the agenda user against the in-process BM25 CRS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from usersimcrs.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
ITEMS = ROOT / "configs" / "data" / "tiny_movies.csv"
RATINGS = ROOT / "configs" / "data" / "tiny_ratings.csv"
UNUSED_LLM = "http://127.0.0.1:9/v1"  # agenda runs never call it
LATENCY_S = 0.05  # the LLM test server's latency in the B scenarios


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

    `client` is the HTTP client of the openai backend (`lean` or `official`; None: the config default).
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


# --------------------------------------------------------------------------- the real workload (issue #22)

MOVIELENS = ROOT.parent / "shared" / "data" / "items" / "movielens-25m-sample"
MOVIELENS_ITEMS = MOVIELENS / "movies_w_keywords.csv"
MOVIELENS_RATINGS = MOVIELENS / "ratings.csv"
REAL_TURNS = 6  # LLM calls per conversation, whatever the server's booleans (min_turns = max_turns)
# how the real iEvaLM server named its titles against the MovieLens collection: 46% not in it
REAL_CRS_OPTIONS = ("--http10", "--every-turn", "--variant-share", "0.2", "--missing-share", "0.4")


def real_catalogue() -> dict[str, Any]:
    """The real workload's items and ratings: the 13,816-movie MovieLens-25M sample in ../shared/data,
    else (marked `fallback: true` in every result) the bundled 40-movie sample."""
    if MOVIELENS_ITEMS.is_file() and MOVIELENS_RATINGS.is_file():
        return {"items": str(MOVIELENS_ITEMS), "ratings": str(MOVIELENS_RATINGS), "fallback": False}
    return {"items": str(ITEMS), "ratings": str(RATINGS), "fallback": True}


def real_crs_options() -> tuple[str, ...]:
    """The iEvaLM test server of the real workload: HTTP/1.0 (a new connection per turn), a reply with
    recommendations every turn, from the run's own catalogue, 20% spelling variants, 40% unknown titles."""
    return ("--catalog", real_catalogue()["items"], *REAL_CRS_OPTIONS)


def real_workload_config(
    llm_url: str,
    crs_url: str,
    *,
    conversations: int,
    concurrency: int,
    client: str | None = None,
    name: str = "bench-real",
    seed: int = 1,
) -> RunConfig:
    """The workload a researcher runs: the single-prompt LLM user (6 LLM calls per conversation,
    whatever the server's booleans) against the iEvaLM-protocol CRS server over HTTP, on the
    MovieLens sample (profiles from its 20 users' 3,739 ratings, titles resolved against 13,816 items)."""
    catalogue = real_catalogue()
    data = _base(name, conversations, concurrency, seed)
    data["max_turns"] = REAL_TURNS
    data["items"] = {"path": catalogue["items"], "delimiters": {"genres": "|", "keywords": "|"}}
    data["ratings"] = {"path": catalogue["ratings"]}
    data["crs"] = {"type": "crs_arena", "url": crs_url}
    data["llm"] = {
        "backend": "openai",
        "model": "test-model",
        "base_url": llm_url,
        "max_concurrency": max(64, concurrency),
        "cache": False,
        "retries": 0,
    }
    if client is not None:
        data["llm"]["client"] = client
    data["simulator"] = {"type": "llm_single", "max_tokens": 48, "min_turns": REAL_TURNS}
    return RunConfig.model_validate(data)
