"""A full disk during `run`, `metrics`, `judge` and `import`: one line, nothing lost, no leftovers, then resume.

Each command writes into a small tmpfs (mounted here; needs root, skipped otherwise) that fills up
while it runs. It must stop within seconds with exit 74 and one `error:` line naming the file;
every line already in the folder must be whole and equal to the records of an undisturbed run;
no 0-byte, `.tmp` or staged file and no lock file may stay. After the tmpfs is enlarged the same
operation (`run --resume`; the others simply again) must give exactly the undisturbed run's records.
The failing commands run as processes (their exit code and output are the point); the undisturbed
references and the repeats after enlarging use the same operations through the Python API.

The run is the LLM user (OpenAI protocol, local test server) against the generic JSON CRS over
HTTP (local test server) with concurrency 16: the set-up under which `usersimcrs run` used to
hang in `asyncio.Runner.close` on a full disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from usersimcrs.config import load_run_config
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.runner import run
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.pipeline.export import export_run
from usersimcrs.pipeline.imports import import_run
from usersimcrs.pipeline.judge import JudgeRequest, judge
from usersimcrs.pipeline.score import score
from usersimcrs.testing.crs_servers import GenericJSONApp, LocalCRSServer
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = 240
STOP_WITHIN_S = 10.0
STORAGE_EXIT = 74


def _can_mount() -> str | None:
    """None when tmpfs can be mounted here, else why not."""
    if os.name != "posix" or sys.platform != "linux":
        return "tmpfs mounts are Linux-only"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None:
        return "no mount command"
    return None


pytestmark = pytest.mark.skipif(_can_mount() is not None, reason=str(_can_mount()))


class Tmpfs:
    """A tmpfs mounted at `path`, resizable, unmounted at the end."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")

    def used(self) -> int:
        stat = os.statvfs(self.path)
        return (stat.f_blocks - stat.f_bfree) * stat.f_frsize

    def resize(self, size: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def leave_room(self, room: int) -> None:
        """Shrink (or grow) the tmpfs to what it holds now plus `room` bytes."""
        self.resize(self.used() + room)

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def tmpfs(tmp_path):
    mounted = Tmpfs(tmp_path / "mnt", 64 * 1024 * 1024)
    yield mounted
    mounted.close()


@pytest.fixture(scope="module")
def servers():
    with LLMServer(seed=11) as llm, LocalCRSServer(GenericJSONApp()) as crs:
        yield llm, crs


def _config(path: Path, llm_url: str, crs_url: str) -> Path:
    data = {
        "name": "fulldisk",
        "seed": 7,
        "conversations": CONVERSATIONS,
        "concurrency": 16,
        "max_turns": 4,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "llm": {"backend": "openai", "model": "test-model", "base_url": llm_url, "cache": False},
        "simulator": {"type": "llm_single", "max_tokens": 32},
        "crs": {
            "type": "http",
            "url": crs_url + "api/chat",
            "request_template": {"session": "{conversation_id}", "text": "{message}", "history": "{history}"},
            "text_path": "reply.text",
            "items_path": "reply.recommendations[*]",
            "item_id_field": "movie_id",
            "item_title_field": "name",
        },
        "progress": False,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _cli(*args: str, timeout: float = 120) -> tuple[int, str, str, float]:
    """(exit code, stdout, stderr, seconds at exit since the epoch) of one `usersimcrs` process."""
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    return done.returncode, done.stdout, done.stderr, time.time()


def _records(path: Path) -> dict[str, dict]:
    """Every line of a JSONL file by conversation ID; each line must be whole and IDs unique."""
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} ends in a torn line"
    out: dict[str, dict] = {}
    for line in raw.splitlines():
        record = json.loads(line)
        assert record["conversation_id"] not in out, f"{record['conversation_id']} twice in {path}"
        out[record["conversation_id"]] = record
    return out


def _comparable(record: dict) -> tuple:
    """What must equal an undisturbed run's record (timings and latencies differ by nature)."""
    return (
        record["status"],
        record.get("end_reason"),
        tuple(u["text"] for u in record["utterances"]),
        tuple(tuple(i.get("id") for i in u.get("items", [])) for u in record["utterances"]),
    )


def _judgment_key(record: dict) -> tuple:
    return (record["conversation_id"], record["judge"], record["name"])


def _judgments(path: Path) -> dict[tuple, tuple]:
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} ends in a torn line"
    out = {}
    for line in raw.splitlines():
        record = json.loads(line)
        assert _judgment_key(record) not in out
        out[_judgment_key(record)] = (record["value"], record["status"])
    return out


def _leftovers(folder: Path) -> list[str]:
    """Empty files, temporary or staged files and lock files left in `folder` (recursively)."""
    bad = []
    for path in folder.rglob("*"):
        if path.is_file() and (
            path.stat().st_size == 0 or path.name.endswith((".tmp", ".staged")) or path.name == ".usersimcrs.lock"
        ):
            bad.append(str(path.relative_to(folder)))
    return bad


def _one_error_line(stderr: str, names: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{stderr}"
    assert lines[0].startswith("error: ") and names in lines[0] and "no space left" in lines[0], lines[0]
    assert "Traceback" not in stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory, servers):
    """The undisturbed run (and its judging) on an ordinary disk."""
    llm, crs = servers
    base = tmp_path_factory.mktemp("reference")
    config = _config(base / "run.yaml", llm.openai_url, crs.url)
    run(load_run_config(config), base / "run")
    return config, base / "run"


def test_run_on_a_full_disk_stops_at_once_keeps_whole_lines_and_resumes_exactly(tmpfs, reference):
    config, undisturbed = reference
    expected = {cid: _comparable(r) for cid, r in _records(RunFolder(undisturbed).dialogues_path).items()}
    assert len(expected) == CONVERSATIONS
    tmpfs.resize(256 * 1024)  # about a third of the run fits
    run_dir = tmpfs.path / "run"
    code, out, err, ended = _cli("run", str(config), "--output", str(run_dir), timeout=60)
    folder = RunFolder(run_dir)
    assert code == STORAGE_EXIT, (out, err)
    _one_error_line(err, str(run_dir))  # the dialogues or the profiles file, whichever write failed
    last_write = max(p.stat().st_mtime for p in (folder.dialogues_path, folder.profiles_path))
    assert ended - last_write < STOP_WITHIN_S  # from the failed write (its cut-back) to the exit
    kept = _records(folder.dialogues_path)
    assert 0 < len(kept) < CONVERSATIONS
    assert {cid: _comparable(r) for cid, r in kept.items()} == {cid: expected[cid] for cid in kept}
    assert _leftovers(run_dir) == []

    tmpfs.resize(16 * 1024 * 1024)
    run(load_run_config(config), run_dir, resume=True)
    resumed = _records(folder.dialogues_path)
    assert {cid: _comparable(r) for cid, r in resumed.items()} == expected
    assert folder.read_manifest()["dialogues"]["completed"] + folder.read_manifest()["dialogues"]["failed"] == (
        CONVERSATIONS
    )
    assert _leftovers(run_dir) == []


def test_metrics_on_a_full_disk_leave_no_partial_table_and_succeed_after(tmpfs, reference):
    _, undisturbed = reference
    expected_dir = undisturbed.parent / "metrics_reference"
    shutil.copytree(undisturbed, expected_dir, dirs_exist_ok=True)
    score(expected_dir, MetricsConfig(options={"satisfaction": False}))  # what `metrics --no-satisfaction` writes
    run_dir = tmpfs.path / "run"
    shutil.copytree(undisturbed, run_dir)
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    tmpfs.leave_room(4096)
    code, out, err, _ = _cli("metrics", str(run_dir), "--no-satisfaction", timeout=60)
    assert code == STORAGE_EXIT, (out, err)
    _one_error_line(err, str(run_dir))
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before  # no table, nothing else touched
    assert _leftovers(run_dir) == []

    tmpfs.resize(16 * 1024 * 1024)
    score(run_dir, MetricsConfig(options={"satisfaction": False}))
    for path in RunFolder(expected_dir).metrics_paths:
        assert (run_dir / path.name).read_bytes() == path.read_bytes()
    assert _leftovers(run_dir) == []


def test_judge_on_a_full_disk_keeps_whole_judgments_and_completes_after(tmpfs, reference, servers):
    _, undisturbed = reference
    expected_dir = undisturbed.parent / "judge_reference"
    shutil.copytree(undisturbed, expected_dir, dirs_exist_ok=True)
    options = ("--judge", "quality", "--criteria", "recommendation_relevance", "--concurrency", "16")
    request = JudgeRequest(judge="quality", criteria=["recommendation_relevance"], concurrency=16)
    judge(expected_dir, request)
    expected = _judgments(RunFolder(expected_dir).judgments_path)
    assert len(expected) >= CONVERSATIONS // 2

    run_dir = tmpfs.path / "run"
    shutil.copytree(undisturbed, run_dir)
    manifest = RunFolder(run_dir).manifest_path.read_bytes()
    tmpfs.leave_room(24 * 1024)
    code, out, err, _ = _cli("judge", str(run_dir), *options, timeout=60)
    assert code == STORAGE_EXIT, (out, err)
    _one_error_line(err, str(run_dir))
    partial = _judgments(RunFolder(run_dir).judgments_path)
    assert 0 < len(partial) < len(expected)
    assert {k: expected[k] for k in partial} == partial
    assert RunFolder(run_dir).manifest_path.read_bytes() == manifest  # the old manifest, whole
    assert _leftovers(run_dir) == []

    tmpfs.resize(16 * 1024 * 1024)
    judge(run_dir, request)
    assert _judgments(RunFolder(run_dir).judgments_path) == expected
    assert _leftovers(run_dir) == []


def test_import_on_a_full_disk_leaves_nothing_and_succeeds_after(tmpfs, reference):
    _, undisturbed = reference
    export = undisturbed.parent / "export.json"
    export_run(undisturbed, export)
    expected_dir = undisturbed.parent / "import_reference"
    import_run(export, expected_dir, overwrite=True)
    expected = {cid: _comparable(r) for cid, r in _records(RunFolder(expected_dir).dialogues_path).items()}

    tmpfs.leave_room(128 * 1024)  # less than the import needs
    run_dir = tmpfs.path / "imported"
    code, out, err, _ = _cli("import", str(export), "--output", str(run_dir), timeout=60)
    assert code == STORAGE_EXIT, (out, err)
    _one_error_line(err, str(run_dir))
    assert not run_dir.exists() or _leftovers(run_dir) == [] and not any(run_dir.iterdir())

    tmpfs.resize(16 * 1024 * 1024)
    import_run(export, run_dir)
    assert {cid: _comparable(r) for cid, r in _records(RunFolder(run_dir).dialogues_path).items()} == expected
    assert _leftovers(run_dir) == []
