"""The Ray executor: chunking, and the Ray cases (same conversations as the local executor, resume,
plug-in config errors) run in a pytest process of their own so a Ray node crash cannot end the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from usersimcrs.engine.ray_executor import chunk_size, chunked

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "ray_executor_cases.py"
RAY_LOGS = Path("/tmp/ray/session_latest/logs")


def test_chunks_cover_every_index_once():
    indices = list(range(3, 50))
    size = chunk_size(len(indices), cpus=2, concurrency=4)
    parts = chunked(indices, size)
    assert [i for part in parts for i in part] == indices
    assert all(1 <= len(p) <= size for p in parts) and size >= 4
    assert chunk_size(1000, cpus=2, concurrency=1) == 125


def _ray_log_tail(lines: int = 30) -> str:
    """Warnings, errors and fatal lines of the last local Ray session, to explain a crashed child."""
    found: list[str] = []
    for name in ("raylet.out", "gcs_server.out", *sorted(p.name for p in RAY_LOGS.glob("python-core-driver-*.log"))):
        path = RAY_LOGS / name
        if path.is_file():
            bad = [ln for ln in path.read_text(errors="replace").splitlines() if any(f" {c} " in ln for c in "EFC")]
            found += [f"{name}: {ln}" for ln in bad[-lines:]]
    return "\n".join(found[-lines:]) or "(no Ray log lines)"


def test_ray_cases_pass_in_their_own_process(tmp_path):
    pytest.importorskip("ray", reason="the [ray] extra is not installed")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path), str(CASES)]
    child = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    report = f"exit {child.returncode}\n{child.stdout[-6000:]}\n{child.stderr[-3000:]}"
    if child.returncode != 0:
        pytest.fail(f"Ray cases failed in their own process ({report})\nRay logs:\n{_ray_log_tail()}")
    assert "3 passed" in child.stdout, report
