"""Ray executor cases, run by tests/test_ray_executor.py in a pytest process of their own.

The Ray driver lives in the process that calls `ray.init`; if the local Ray node dies, Ray ends that
process at once. Running these cases in a child keeps such a crash from ending the whole suite
unreported: the parent test fails with the child's output and the tail of the Ray logs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from usersimcrs.config import load_run_config
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.runner import run
from usersimcrs.errors import ConfigError

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local_ray():
    """A small local Ray instance for this module (2 CPUs, no dashboard), stopped afterwards."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _config(tmp_path: Path, name: str, **over) -> Path:
    data = {
        "name": "raytest",
        "seed": 11,
        "conversations": 12,
        "concurrency": 2,
        "max_turns": 10,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "simulator": {"type": "tests.engine_plugins:CountingUser", "turns": 3},
        "crs": {"type": "tests.engine_plugins:EchoCRS", "fail_every": 5},
        "progress": False,
        **over,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _records(run_dir: Path) -> list[dict]:
    """Records sorted by index, without wall-clock timings (the only fields allowed to differ)."""
    out = []
    for rec in iter_jsonl(run_dir / "dialogues.jsonl"):
        rec = json.loads(json.dumps(rec))
        rec.pop("timings", None)
        for utt in rec["utterances"]:
            utt.pop("latency_s", None)
        out.append(rec)
    return sorted(out, key=lambda r: r["index"])


def test_ray_run_gives_the_same_conversations_as_the_local_run(tmp_path, local_ray):
    local = run(load_run_config(_config(tmp_path, "local")), tmp_path / "local")
    remote = run(load_run_config(_config(tmp_path, "ray", executor="ray")), tmp_path / "ray")
    a, b = _records(tmp_path / "local"), _records(tmp_path / "ray")
    assert len(a) == 12 and [r["conversation_id"] for r in a] == [r["conversation_id"] for r in b]
    assert a == b  # same seeds, texts, items, statuses and errors
    assert (remote.completed, remote.failed) == (local.completed, local.failed) == (9, 3)  # indices 1, 6, 11 fail
    manifest = RunFolder(tmp_path / "ray").read_manifest()
    assert manifest["status"] == "completed" and manifest["dialogues"] == {
        "completed": 9,
        "failed": 3,
        "ambiguous_items": 0,
        "conversations_with_fallback": 0,
        "user_turns": {"labelled": 0, "model": 0, "repaired": 0, "fallback": 0, "template": 0},
    }
    assert manifest["config_hash"] == RunFolder(tmp_path / "local").read_manifest()["config_hash"]


def test_ray_run_resumes_a_partial_local_run(tmp_path, local_ray):
    path = _config(tmp_path, "run")
    run(load_run_config(_config(tmp_path, "full")), tmp_path / "full")
    partial = tmp_path / "mixed"
    run(load_run_config(path, overrides=["conversations=5"]), partial)
    # a different conversation count changes the config hash; continue under the full config
    (partial / "manifest.json").unlink()
    summary = run(load_run_config(path, overrides=["executor=ray"]), partial, resume=True)
    assert (
        summary.skipped == 4 and summary.retried == 1 and summary.completed + summary.failed == 8
    )  # index 1 failed: re-run
    assert _records(partial) == _records(tmp_path / "full")


def test_plugin_config_error_in_a_task_surfaces_as_one_clear_error(tmp_path, local_ray):
    config = load_run_config(
        _config(tmp_path, "bad", executor="ray", crs={"type": "tests.engine_plugins:EchoCRS", "delay": 1})
    )
    with pytest.raises(ConfigError, match="crs.delay"):
        run(config, tmp_path / "bad")


def _data_record(config) -> dict:
    from usersimcrs.engine.runner import data_files, with_hashes

    return with_hashes(data_files(config))


def test_a_task_whose_data_differs_from_the_drivers_stops_the_run_naming_node_and_file(tmp_path, local_ray):
    """A node whose items file holds other content (the record says another hash), or that lacks the named
    file and would read the fallback: its chunk fails with one line naming the node and the file."""
    import asyncio
    import socket

    from usersimcrs.engine.ray_executor import DataMismatch, iter_conversations_ray

    async def drain(config, recorded) -> list:
        return [d async for d in iter_conversations_ray(config, range(4), recorded=recorded)]

    config = load_run_config(_config(tmp_path, "data", executor="ray", conversations=4))
    recorded = _data_record(config)
    changed = {**recorded, "items": {**recorded["items"], "sha256": "0" * 64}}
    with pytest.raises(DataMismatch) as info:
        asyncio.run(drain(config, changed))
    message = str(info.value)
    assert message.startswith(f"Ray node {socket.gethostname()}: items file {ROOT / 'configs/data/tiny_movies.csv'}: ")
    assert "other content on this node (sha256 " in message and "\n" not in message
    # the driver read the named file; on the node it is missing and the config allows the fallback
    missing = tmp_path / "movielens" / "movies.csv"
    items = {"path": str(missing), "fallback_path": str(ROOT / "configs/data/tiny_movies.csv"), "use_fallback": True}
    config = load_run_config(_config(tmp_path, "node", executor="ray", conversations=4, items=items))
    driver = {**_data_record(config), "items": {"path": str(missing), "used": "path", "sha256": "1" * 64}}
    with pytest.raises(DataMismatch, match=r"this node would read .*tiny_movies\.csv \(fallback_path\) instead"):
        asyncio.run(drain(config, driver))


def test_a_run_records_the_hash_of_each_data_file_and_a_matching_node_runs(tmp_path, local_ray):
    config = load_run_config(_config(tmp_path, "hashed", executor="ray", conversations=4))
    run(config, tmp_path / "hashed")
    files = RunFolder(tmp_path / "hashed").read_manifest()["data_files"]
    digest = __import__("hashlib").sha256((ROOT / "configs/data/tiny_movies.csv").read_bytes()).hexdigest()
    assert files["items"]["sha256"] == digest and len(_records(tmp_path / "hashed")) == 4


def test_a_chunk_whose_worker_dies_on_every_attempt_is_one_line(tmp_path, local_ray, capsys, caplog):
    from usersimcrs.cli import main

    # two chunks, both lost: the first to fail is the one line, the other's failure is not left unretrieved
    path = _config(
        tmp_path, "crash", executor="ray", conversations=4, crs={"type": "tests.engine_plugins:WorkerKillerCRS"}
    )
    assert main(["run", str(path), "-o", str(tmp_path / "crash")]) == 1
    err = capsys.readouterr().err.strip()
    assert re.match(
        r"error: Ray: the chunk of conversations (0-1|2-3) failed after 3 attempts \(WorkerCrashedError: ", err
    )
    assert "\n" not in err and "Traceback" not in err and "run --resume" in err
    import gc

    gc.collect()  # an unretrieved future's complaint is logged when it is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
