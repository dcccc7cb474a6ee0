"""Ray executor cases, run by tests/test_ray_executor.py in a pytest process of their own.

The Ray driver lives in the process that calls `ray.init`; if the local Ray node dies, Ray ends that
process at once. Running these cases in a child keeps such a crash from ending the whole suite
unreported: the parent test fails with the child's output and the tail of the Ray logs.
"""

from __future__ import annotations

import json
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
