"""One writer at a time, and no conversation counted twice.

- Two `usersimcrs run` on one folder (and a `--resume` started while the first runs): the second
  stops at once with one line naming the first one's PID; the folder ends with every ID once.
- The lock is the kernel's: a writer killed with SIGKILL leaves no lock behind.
- A dialogues file with repeated conversation IDs is refused by `metrics`, `report`, `judge` and
  `meta-eval` with the count (one line on the command line); `--dedupe` (`dedupe=True`) keeps the
  first line of each ID and the figures count each once.
"""

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

from usersimcrs.config import RunConfig
from usersimcrs.core.folder_lock import LOCK_FILE, FolderBusy, FolderLock
from usersimcrs.core.run_folder import DuplicateConversations, RunFolder, load_run
from usersimcrs.engine.runner import run
from usersimcrs.llm.config import LLMConfig
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.pipeline.judge import JudgeRequest, judge
from usersimcrs.pipeline.meta_eval import meta_eval
from usersimcrs.pipeline.report import report
from usersimcrs.pipeline.score import score
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
BUSY_EXIT = 75
ITEMS = {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}}
RATINGS = {"path": str(ROOT / "configs/data/tiny_ratings.csv")}


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "usersimcrs", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _slow_run_config(path: Path, llm_url: str, conversations: int = 24) -> Path:
    data = {
        "name": "twowriters",
        "seed": 3,
        "conversations": conversations,
        "concurrency": 2,
        "max_turns": 3,
        "items": ITEMS,
        "ratings": RATINGS,
        "llm": {"backend": "openai", "model": "test-model", "base_url": llm_url, "cache": False},
        "simulator": {"type": "llm_single", "max_tokens": 24},
        "crs": {"type": "retrieval"},
        "progress": False,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "usersimcrs", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lock(folder: Path, process: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not (folder / LOCK_FILE).exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the first writer never took the lock"
        time.sleep(0.02)


def _refused(result: subprocess.CompletedProcess, pid: int, seconds: float) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == BUSY_EXIT, (result.stdout, result.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"PID {pid}" in lines[0], result.stderr
    assert seconds < 10  # at once: interpreter start-up and imports, no waiting for the holder


def test_a_second_run_or_resume_on_a_busy_folder_stops_at_once_naming_the_holder(tmp_path):
    out = tmp_path / "run"
    with LLMServer(latency_ms=400, seed=2) as llm:  # slow while the others try, then fast
        config = _slow_run_config(tmp_path / "run.yaml", llm.openai_url)
        first = _start("run", str(config), "--output", str(out))
        try:
            _wait_for_lock(out, first)
            for extra in ((), ("--resume",)):
                started = time.monotonic()
                second = _cli("run", str(config), "--output", str(out), *extra)
                _refused(second, first.pid, time.monotonic() - started)
            started = time.monotonic()
            metrics = _cli("metrics", str(out), "--no-satisfaction")
            _refused(metrics, first.pid, time.monotonic() - started)
            assert first.poll() is None  # the holder was still running throughout
            llm.latency_ms = 0
            stdout, stderr = first.communicate(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
        assert first.returncode == 0, stderr
    folder = RunFolder(out)
    ids = folder.conversation_ids()
    assert len(ids) == len(set(ids)) == 24
    assert folder.read_manifest()["dialogues"]["completed"] + folder.read_manifest()["dialogues"]["failed"] == 24
    assert not (out / LOCK_FILE).exists()  # the holder removes it when done


def test_a_killed_writer_leaves_no_lock_behind(tmp_path):
    out = tmp_path / "run"
    with LLMServer(latency_ms=100, seed=2) as llm:
        config = _slow_run_config(tmp_path / "run.yaml", llm.openai_url)
        first = _start("run", str(config), "--output", str(out))
        _wait_for_lock(out, first)
        time.sleep(0.5)
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        llm.latency_ms = 0
        assert (out / LOCK_FILE).exists()  # the file stays, the lock does not
        resumed = _cli("run", str(config), "--output", str(out), "--resume", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    ids = RunFolder(out).conversation_ids()
    assert len(ids) == len(set(ids)) == 24


def test_the_lock_is_reentrant_in_a_process_and_exclusive_between_processes(tmp_path):
    holder = FolderLock(tmp_path / "f", "test holder")
    with holder, FolderLock(tmp_path / "f", "nested"):  # the same process may nest (matrix run -> matrix report)
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from usersimcrs.core.folder_lock import FolderLock, FolderBusy\n"
                "try:\n    FolderLock(sys.argv[1]).acquire()\nexcept FolderBusy as exc:\n    print(exc)\n"
                "    sys.exit(75)\n",
                str(tmp_path / "f"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert probe.returncode == 75, probe.stderr
        assert f"PID {os.getpid()}: test holder" in probe.stdout
    with FolderLock(tmp_path / "f"):  # released: taken again
        pass
    with pytest.raises(FolderBusy):
        with FolderLock(tmp_path / "g"):
            busy = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys,time; from usersimcrs.core.folder_lock import FolderLock\n"
                    "l = FolderLock(sys.argv[1]); l.acquire(); print('held', flush=True); time.sleep(30)",
                    str(tmp_path / "h"),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert busy.stdout is not None and busy.stdout.readline().strip() == "held"
                FolderLock(tmp_path / "h").acquire()
            finally:
                busy.kill()
                busy.wait()


# ------------------------------------------------------------------ repeated conversation IDs


@pytest.fixture(scope="module")
def doubled(tmp_path_factory):
    """A run folder of 12 conversations whose dialogues file holds every line twice (two writers' result)."""
    base = tmp_path_factory.mktemp("doubled")
    config = RunConfig.model_validate(
        {
            "name": "doubled",
            "seed": 1,
            "conversations": 12,
            "concurrency": 4,
            "max_turns": 3,
            "items": ITEMS,
            "ratings": RATINGS,
            "simulator": {"type": "agenda", "nlu": "rules", "nlg": "template"},
            "crs": {"type": "retrieval"},
            "progress": False,
        }
    )
    run(config, base / "run")
    path = RunFolder(base / "run").dialogues_path
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines + lines))
    return base / "run"


def test_repeated_ids_are_refused_with_the_count(doubled, tmp_path):
    before = {p.name: p.read_bytes() for p in doubled.iterdir() if p.is_file()}
    result = _cli("metrics", str(doubled), "--no-satisfaction")  # the command line: one line, exit 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert len(lines) == 1 and "12 conversation ID(s) occur on more than one line (12 repeated line(s)" in lines[0]
    assert "--dedupe" in lines[0]
    refusals = {  # the same refusal from every reader the issue names (the CLI prints it as above)
        "metrics": lambda: score(doubled),
        "report": lambda: report(doubled),
        "judge": lambda: judge(doubled, JudgeRequest(judge="quality"), llm=LLMConfig(backend="openai")),
        "meta-eval": lambda: meta_eval(doubled, ["turns"], tmp_path / "meta"),
    }
    for name, call in refusals.items():
        with pytest.raises(DuplicateConversations) as raised:
            call()
        assert raised.value.repeated_ids == 12 and raised.value.extra_lines == 12, name
    assert {p.name: p.read_bytes() for p in doubled.iterdir() if p.is_file()} == before  # nothing written


def test_dedupe_counts_each_conversation_once(doubled, tmp_path):
    copy = tmp_path / "run"
    copy.mkdir()
    for path in doubled.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    scores = score(copy, MetricsConfig(options={"satisfaction": False}), dedupe=True)
    assert len(scores.conversations) == 12 and scores.run.dropped_duplicates == 12
    table = RunFolder(copy).metrics_paths[0].read_text().splitlines()
    assert len(table) == 1 + 12
    with pytest.raises(DuplicateConversations):
        _ = load_run(copy).dialogues
    assert len(load_run(copy, duplicates="first").dialogues) == 12


def test_resume_after_two_writers_rewrites_the_file_with_each_id_once(doubled, tmp_path):
    """A run whose file got every line twice (before the lock existed) is repaired by `--resume`."""
    copy = tmp_path / "run"
    copy.mkdir()
    for path in doubled.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    manifest = json.loads(RunFolder(copy).manifest_path.read_text())
    config = RunConfig.model_validate(manifest["config"])
    run(config, copy, resume=True)
    ids = RunFolder(copy).conversation_ids()
    assert len(ids) == len(set(ids)) == 12
    assert (
        RunFolder(copy).read_manifest()["dialogues"]["completed"]
        + RunFolder(copy).read_manifest()["dialogues"]["failed"]
        == 12
    )
