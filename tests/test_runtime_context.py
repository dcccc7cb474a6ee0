"""Run resources have a lifecycle: what a run opened (HTTP pool, LLMs, recorder files) is closed at its end."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from usersimcrs.config import RunConfig
from usersimcrs.engine.runner import run
from usersimcrs.runtime import RunContext

ROOT = Path(__file__).resolve().parents[1]


def _open_files() -> set[str]:
    folder = Path("/proc/self/fd")
    if not folder.is_dir():
        pytest.skip("needs /proc to list open files")
    out = set()
    for entry in folder.iterdir():
        try:
            out.add(os.readlink(entry))
        except OSError:
            pass
    return out


def test_recorder_files_are_closed_when_the_run_ends(tmp_path):
    record = tmp_path / "exchanges.jsonl"
    config = RunConfig.model_validate(
        {
            "name": "rec",
            "conversations": 3,
            "progress": False,
            "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|"}},
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "simulator": {"type": "agenda", "nlu": "rules", "nlg": "template"},
            "crs": {"type": "popularity", "record_to": str(record)},
        }
    )
    run(config, tmp_path / "run")
    assert record.exists() and record.read_text().count("\n") >= 3
    assert str(record) not in _open_files()


def test_context_closes_in_reverse_order_sync_and_async_callbacks():
    asyncio.run(_closes_in_reverse_order())


async def _closes_in_reverse_order() -> None:
    closed: list[str] = []

    async def closing_async() -> None:
        closed.append("async")

    context = RunContext()
    context.on_close(lambda: closed.append("sync"))
    context.on_close(closing_async)
    await context.aclose()
    await context.aclose()
    assert closed == ["async", "sync"]


def test_a_resumed_run_recomputes_prefix_reuse_instead_of_adding_ratios():
    from usersimcrs.core.usage import add_summaries

    first = {
        "calls": 4,
        "by_component": {"simulator": {"prompt_chars": 1000, "prefix_reused_chars": 700, "prefix_reuse": 0.7}},
    }
    second = {
        "calls": 2,
        "by_component": {"simulator": {"prompt_chars": 500, "prefix_reused_chars": 400, "prefix_reuse": 0.8}},
    }
    summed = add_summaries(first, second)
    assert summed["calls"] == 6
    assert summed["by_component"]["simulator"]["prefix_reuse"] == round(1100 / 1500, 4)
