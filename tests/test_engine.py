"""Engine: concurrency, stable IDs and seeds, failure isolation, timeouts, resume, config errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from usersimcrs.config import load_run_config
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.ids import conversation_id
from usersimcrs.engine.runner import run

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, **over) -> Path:
    data = {
        "name": "t",
        "seed": 7,
        "conversations": 20,
        "concurrency": 4,
        "max_turns": 10,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "simulator": {"type": "tests.engine_plugins:CountingUser", "turns": 3},
        "crs": {"type": "tests.engine_plugins:EchoCRS"},
        "progress": False,
    }
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _records(run_dir: Path) -> list[dict]:
    return list(iter_jsonl(run_dir / "dialogues.jsonl"))


def _without_timings(rec: dict) -> dict:
    rec = json.loads(json.dumps(rec))
    rec.pop("timings", None)
    for utt in rec["utterances"]:
        utt.pop("latency_s", None)
    return rec


def test_run_writes_every_conversation_once_with_stable_ids(tmp_path):
    config = load_run_config(_config(tmp_path))
    summary = run(config, tmp_path / "a")
    records = _records(tmp_path / "a")
    assert summary.completed == 20 and summary.failed == 0
    ids = [r["conversation_id"] for r in records]
    assert sorted(ids) == sorted(conversation_id("t", 7, i) for i in range(20))
    assert all(r["end_reason"] == "agenda_done" and r["status"] == "ok" for r in records)
    # opening user turn + 2 more user turns, each answered by the CRS
    assert all(len(r["utterances"]) == 3 * 2 for r in records)
    manifest = RunFolder(tmp_path / "a").read_manifest()
    assert manifest["dialogues"] == {
        "completed": 20,
        "failed": 0,
        "ambiguous_items": 0,
        "conversations_with_fallback": 0,
        "user_turns": {"labelled": 0, "model": 0, "repaired": 0, "fallback": 0, "template": 0},  # no LLM user
    }
    assert manifest["status"] == "completed" and manifest["config_hash"]


def test_same_seed_same_conversations_regardless_of_concurrency(tmp_path):
    run(load_run_config(_config(tmp_path, concurrency=1)), tmp_path / "a")
    run(load_run_config(_config(tmp_path, concurrency=8)), tmp_path / "b")
    a = sorted((_without_timings(r) for r in _records(tmp_path / "a")), key=lambda r: r["index"])
    b = sorted((_without_timings(r) for r in _records(tmp_path / "b")), key=lambda r: r["index"])
    assert a == b
    other = load_run_config(_config(tmp_path, seed=8))
    run(other, tmp_path / "c")
    c = sorted((_without_timings(r) for r in _records(tmp_path / "c")), key=lambda r: r["index"])
    assert [r["utterances"][0]["text"] for r in c] != [r["utterances"][0]["text"] for r in a]


def test_failure_in_one_conversation_is_recorded_and_the_run_goes_on(tmp_path):
    config = load_run_config(_config(tmp_path, crs={"fail_every": 5}))
    summary = run(config, tmp_path / "a")
    records = _records(tmp_path / "a")
    failed = [r for r in records if r["status"] == "failed"]
    assert summary.failed == len(failed) == 4  # indices 1, 6, 11, 16
    assert all(r["error"] == "ConnectorError: HTTP 500" for r in failed)
    assert all(len(r["utterances"]) >= 2 for r in failed)  # turns before the fault are kept
    assert len(records) == 20


def test_conversation_timeout_marks_only_that_conversation(tmp_path):
    config = load_run_config(_config(tmp_path, conversations=6, conversation_timeout_s=0.5, crs={"hang_every": 4}))
    started = time.perf_counter()
    run(config, tmp_path / "a")
    assert time.perf_counter() - started < 10
    records = {r["index"]: r for r in _records(tmp_path / "a")}
    assert records[2]["status"] == "failed" and records[2]["error"].startswith("timeout")
    assert all(records[i]["status"] == "ok" for i in (0, 1, 3, 4, 5))


def test_existing_output_needs_resume_or_overwrite(tmp_path):
    from usersimcrs.errors import UserError

    config = load_run_config(_config(tmp_path, conversations=3))
    run(config, tmp_path / "a")
    with pytest.raises(UserError, match="--resume"):
        run(config, tmp_path / "a")
    summary = run(config, tmp_path / "a", resume=True)
    assert summary.skipped == 3 and summary.completed == 0
    assert len(_records(tmp_path / "a")) == 3


def test_resume_discards_a_torn_last_line(tmp_path):
    config = load_run_config(_config(tmp_path, conversations=5))
    run(config, tmp_path / "a")
    path = tmp_path / "a" / "dialogues.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    assert len(_records(tmp_path / "a")) == 3  # the reader ignores the torn tail
    run(config, tmp_path / "a", resume=True)
    records = _records(tmp_path / "a")
    assert len(records) == 5 and len({r["conversation_id"] for r in records}) == 5


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "usersimcrs", *args], cwd=ROOT, capture_output=True, text=True, **kw)


def test_misspelled_key_exits_nonzero_with_one_line(tmp_path):
    path = _config(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["max_turn"] = 3
    path.write_text(yaml.safe_dump(data))
    out = _cli("run", str(path), "--output", str(tmp_path / "o"))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "max_turn" in lines[0] and str(path) in lines[0]


def test_misspelled_plugin_key_names_the_section(tmp_path):
    path = _config(tmp_path, simulator={"turnz": 2})
    out = _cli("run", str(path), "--output", str(tmp_path / "o"))
    assert out.returncode != 0 and "simulator.turnz" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_kill_9_then_resume_gives_exactly_all_conversations(tmp_path):
    path = _config(tmp_path, conversations=40, concurrency=2, crs={"delay_s": 0.05})
    out_dir = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "usersimcrs", "run", str(path), "--output", str(out_dir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        if len(_records(out_dir)) >= 8 if (out_dir / "dialogues.jsonl").exists() else False:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(_records(out_dir))
    assert 8 <= partial < 40
    out = _cli("run", str(path), "--output", str(out_dir), "--resume")
    assert out.returncode == 0, out.stderr
    records = _records(out_dir)
    ids = [r["conversation_id"] for r in records]
    assert len(ids) == 40 and len(set(ids)) == 40
    assert RunFolder(out_dir).read_manifest()["dialogues"]["completed"] == 40


def test_resume_reruns_failed_conversations_and_keep_failed_skips_them(tmp_path):
    config = load_run_config(_config(tmp_path, crs={"fail_every": 5}))
    run(config, tmp_path / "a")
    path = tmp_path / "a" / "dialogues.jsonl"
    before = path.read_bytes().splitlines(keepends=True)
    ok_lines = [line for line in before if json.loads(line)["status"] == "ok"]
    kept = run(config, tmp_path / "a", resume=True, keep_failed=True)
    assert (kept.skipped, kept.retried, kept.completed, kept.failed) == (20, 0, 0, 0)
    assert path.read_bytes().splitlines(keepends=True) == before  # untouched
    again = run(config, tmp_path / "a", resume=True)
    assert (again.skipped, again.retried, again.failed) == (16, 4, 4)  # EchoCRS fails them again
    after = path.read_bytes().splitlines(keepends=True)
    assert after[:16] == ok_lines  # ok lines kept byte for byte, in order
    ids = [json.loads(line)["conversation_id"] for line in after]
    assert len(ids) == 20 and len(set(ids)) == 20
    assert not (tmp_path / "a" / "dialogues.jsonl.tmp").exists()


def test_drop_failed_rewrites_atomically_without_failed_lines_or_torn_tail(tmp_path):
    folder = RunFolder(tmp_path)
    path = folder.dialogues_path
    lines = [
        json.dumps({"conversation_id": c, "status": s}).encode() + b"\n"
        for c, s in [("a", "ok"), ("b", "failed"), ("c", "ok"), ("a", "ok")]
    ]
    path.write_bytes(b"".join(lines) + b'{"conversation_id": "d", "sta')
    inode = path.stat().st_ino
    assert folder.drop_failed() == {"b"}
    assert path.read_bytes() == lines[0] + lines[2]
    assert path.stat().st_ino != inode  # replaced, not edited in place
