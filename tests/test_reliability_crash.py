"""Crash safety: SIGKILL at seeded random points, resume, and get the uninterrupted run's records.

Also: the LLM response cache survives SIGKILL in the middle of writes (SQLite WAL, one commit
per reply): every reply acknowledged before the kill is readable afterwards.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from usersimcrs.config import load_run_config
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.runner import run
from usersimcrs.llm.cache import CACHE_FILE, CachedReply, ResponseCache
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = 60
KILL_SEED = 20261122


def _config(path: Path, llm_url: str, cache_dir: Path) -> Path:
    data = {
        "name": "crash",
        "seed": 5,
        "conversations": CONVERSATIONS,
        "concurrency": 4,
        "max_turns": 5,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "llm": {"backend": "openai", "model": "test-model", "base_url": llm_url, "cache_dir": str(cache_dir)},
        "simulator": {"type": "llm_single", "max_tokens": 48},
        "crs": {"type": "retrieval"},
        "progress": False,
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _count(run_dir: Path) -> int:
    path = run_dir / "dialogues.jsonl"
    return sum(1 for _ in iter_jsonl(path)) if path.exists() else 0


def _texts(run_dir: Path) -> dict[str, tuple]:
    """conversation ID -> (status, end reason, utterance texts, recommended item IDs)."""
    return {
        r["conversation_id"]: (
            r["status"],
            r["end_reason"],
            tuple(u["text"] for u in r["utterances"]),
            tuple(tuple(i.get("id") for i in u["items"]) for u in r["utterances"]),
        )
        for r in iter_jsonl(run_dir / "dialogues.jsonl")
    }


def _start(config: Path, out: Path, resume: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "usersimcrs", "run", str(config), "--output", str(out)] + (
        ["--resume"] if resume else []
    )
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_three_sigkills_then_resume_equal_an_uninterrupted_run(tmp_path):
    rng = random.Random(KILL_SEED)
    with LLMServer(latency_ms=15) as server:
        reference = load_run_config(_config(tmp_path / "ref.yaml", server.openai_url, tmp_path / "ref-cache"))
        run(reference, tmp_path / "reference")
        config = _config(tmp_path / "run.yaml", server.openai_url, tmp_path / "cache")
        out = tmp_path / "killed"
        kills = []
        for attempt in range(3):
            proc = _start(config, out, resume=attempt > 0)
            threshold = _count(out) + rng.randint(3, 10)
            deadline = time.time() + 120
            while proc.poll() is None and _count(out) < threshold and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.15))  # a seeded random point, possibly mid-write
            assert proc.poll() is None, "the run finished before it could be killed"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills.append(_count(out))
        assert kills == sorted(kills) and kills[-1] < CONVERSATIONS
        final = _start(config, out, resume=True)
        _, err = final.communicate(timeout=180)
        assert final.returncode == 0, err.decode()
    killed, expected = _texts(out), _texts(tmp_path / "reference")
    assert len(killed) == CONVERSATIONS and sum(1 for _ in iter_jsonl(out / "dialogues.jsonl")) == CONVERSATIONS
    assert killed == expected  # same IDs, statuses, texts and recommended items
    manifest = RunFolder(out).read_manifest()
    assert manifest["status"] == "completed" and manifest["timings"]["sessions"] == 4
    with sqlite3.connect(tmp_path / "cache" / CACHE_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("SELECT COUNT(*) FROM replies").fetchone()[0] > 0


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from usersimcrs.core.usage import Usage
    from usersimcrs.llm.cache import CachedReply, ResponseCache
    cache = ResponseCache(Path(sys.argv[1]))
    i = 0
    while True:
        cache.put(f"key-{i}", CachedReply(text="reply " * 50 + str(i), usage=Usage(prompt_tokens=i), model="m", backend="b"))
        print(i, flush=True)
        i += 1
    """
)


def test_llm_cache_survives_sigkill_during_writes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    acknowledged = -1
    assert proc.stdout is not None
    for line in proc.stdout:
        acknowledged = int(line)
        if acknowledged >= 300:
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    cache = ResponseCache(tmp_path)
    try:
        assert len(cache) >= acknowledged + 1
        for i in range(acknowledged + 1):
            hit = cache.get(f"key-{i}")
            assert hit is not None and hit.text.endswith(str(i)) and hit.usage.prompt_tokens == i
        cache.put("after", CachedReply(text="still writable"))
        assert cache.get("after").text == "still writable"
    finally:
        cache.close()
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
