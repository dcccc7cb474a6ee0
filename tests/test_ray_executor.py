"""The Ray executor: chunking, and the Ray cases (same conversations as the local executor, resume,
plug-in config errors) run in a pytest process of their own so a Ray node crash cannot end the suite."""

from __future__ import annotations

import importlib.util
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
    assert "6 passed" in child.stdout, report


def _config_file(tmp_path: Path, **changes) -> Path:
    import yaml

    data = {
        "name": "node",
        "conversations": 2,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|"}},
        "simulator": {"type": "tests.engine_plugins:CountingUser"},
        "crs": {"type": "tests.engine_plugins:EchoCRS"},
        "progress": False,
        **changes,
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_node_checks_its_data_files_against_the_drivers_record(tmp_path):
    """What each Ray task runs before its chunk, here without a cluster: the same files pass; another
    content, a missing file, or a fallback read in the named file's place fail with the node and the file."""
    import shutil

    from usersimcrs.config import load_run_config
    from usersimcrs.engine.ray_executor import DataMismatch, check_node_data
    from usersimcrs.engine.runner import data_files, with_hashes

    items = tmp_path / "movies.csv"
    shutil.copy(ROOT / "configs/data/tiny_movies.csv", items)
    fallback = {"fallback_path": str(ROOT / "configs/data/tiny_movies.csv"), "use_fallback": True}
    config = load_run_config(_config_file(tmp_path, items={"path": str(items), **fallback}))
    recorded = with_hashes(data_files(config))  # what the driver wrote in the manifest
    assert recorded["items"]["used"] == "path" and len(recorded["items"]["sha256"]) == 64
    check_node_data(config, recorded, "node-a")  # the same data: nothing to say
    items.write_text(items.read_text() + "999,Added Later (2024),Drama\n")
    with pytest.raises(DataMismatch, match=rf"^Ray node node-a: items file {items}: other content on this node "):
        check_node_data(config, recorded, "node-a")
    items.unlink()  # the node lacks the file: it would read the fallback, silently, before the check
    with pytest.raises(DataMismatch, match=r"this node would read .*tiny_movies\.csv \(fallback_path\) instead"):
        check_node_data(config, recorded, "node-a")
    no_fallback = load_run_config(_config_file(tmp_path, items={"path": str(items)}))
    with pytest.raises(
        DataMismatch, match=r"^Ray node node-b: items file .*: not found on this node; every node needs"
    ):
        check_node_data(no_fallback, recorded, "node-b")


def test_a_ray_client_address_without_its_extra_is_one_line(tmp_path, capsys):
    pytest.importorskip("ray", reason="the [ray] extra is not installed")
    if importlib.util.find_spec("grpc") is not None:
        pytest.skip("the ray-client extra is installed here")
    from usersimcrs.cli import main

    config = _config_file(tmp_path, executor="ray", ray_address="ray://127.0.0.1:9")
    assert main(["run", str(config), "-o", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: ray_address ray://127.0.0.1:9: a ray:// address joins through Ray Client, which needs "
        "pip install 'usersimcrs[ray-client]'"
    )
