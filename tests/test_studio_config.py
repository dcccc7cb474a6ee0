"""The study YAML is checked like every config (one line naming the file and key), the command names the
extra it needs, and the example study exports without a server into what meta-eval reads."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import yaml

from tests.studio_support import ROOT, full_tasks, write_study
from usersimcrs.cli import main

EXAMPLE = ROOT / "configs" / "studio_example.yaml"


def _error(capsys, *argv: str) -> str:
    assert main(["studio", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def _study(tmp_path: Path, **changes) -> Path:
    path = write_study(tmp_path, tasks={"chat": {}})
    data = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        node = data
        *parents, last = key.split(".")
        for part in parents:
            node = node[part]
        node[last] = value
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"tasks.chat.colour": "red"}, "unknown key 'tasks.chat.colour'"),
        ({"tasks.chat.crs": ["pop", "nope"]}, "key 'tasks.chat.crs': unknown CRS 'nope'"),
        ({"tasks.battle": {"crs": ["pop"]}}, "key 'tasks.battle.crs': a battle needs at least two CRSs"),
        ({"tasks.chat.max_turns": 0}, "key 'tasks.chat.max_turns'"),
        ({"tasks": {}}, "key 'tasks': name at least one of chat, battle, annotate, turing"),
        ({"crs": [{"name": "pop", "type": "popularity", "k": 0}]}, "crs[0] (pop): key 'crs.k'"),
        ({"crs": [{"name": "pop"}]}, "missing key 'crs[0].type'"),
        ({"crs": [{"name": "pop", "type": "nosuchcrs"}]}, "nosuchcrs"),
        ({"tasks.annotate": {"source": "missing/folder"}}, "key 'tasks.annotate.source': no such folder"),
        ({"limits": {"message_chars": -1}}, "key 'limits.message_chars'"),
    ],
)
def test_a_bad_study_file_stops_with_one_line_naming_the_file_and_key(tmp_path, capsys, changes, expected):
    path = _study(tmp_path, **changes)
    err = _error(capsys, str(path), "--export", str(tmp_path / "out"))
    assert str(path) in err and expected in err


def test_gold_answers_must_name_a_dialogue_criterion_on_its_scale(tmp_path, capsys):
    tasks = full_tasks(tmp_path)
    tasks["annotate"]["gold"][0]["answers"] = {"efficiency": 3}
    path = write_study(tmp_path, tasks=tasks)
    err = _error(capsys, str(path), "--export", str(tmp_path / "out"))
    assert "key 'tasks.annotate.gold[0].answers.efficiency': 3 is not one of [0, 1]" in err
    tasks["annotate"]["gold"][0]["answers"] = {"relevance": 1}
    path = write_study(tmp_path, tasks=tasks)
    assert "not a dialogue-level criterion" in _error(capsys, str(path), "--export", str(tmp_path / "out"))


def test_serving_without_the_studio_extra_names_the_extra(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    err = _error(capsys, str(_study(tmp_path)))
    assert "needs the 'studio' extra" in err and "pip install 'usersimcrs[studio]'" in err


def test_export_of_a_study_never_served_is_empty_and_says_so(tmp_path, capsys):
    path = _study(tmp_path)
    assert main(["studio", str(path), "--export", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "0 participants (0 completed); 0 conversations exported" in out
    assert "no study records yet (serve the study first)" in out
    assert not (tmp_path / "study").exists()  # the export only reads the study folder


@pytest.mark.slow
def test_the_example_study_runs_and_exports_without_a_server(tmp_path, capsys):
    pytest.importorskip("starlette", reason="the 'studio' extra is not installed")
    from tests.studio_support import Studio
    from usersimcrs.studio.generate import ensure_annotation_source

    config = tmp_path / "configs" / EXAMPLE.name
    shutil.copytree(EXAMPLE.parent / "data", tmp_path / "configs" / "data")
    data = yaml.safe_load(EXAMPLE.read_text())
    data["output"] = str(tmp_path / "study")
    for section in ("items", "ratings"):  # the shared sample when present, as from configs/
        data[section]["path"] = str((EXAMPLE.parent / data[section]["path"]).resolve())
    config.write_text(yaml.safe_dump(data))
    from usersimcrs.studio.config import load_study

    ensure_annotation_source(load_study(config))
    studio = Studio(config)
    try:
        rng = random.Random(5)
        for _ in range(3):
            studio.join().complete(rng, messages=1, score="0")  # "0" everywhere passes the example's gold check
    finally:
        studio.close()
    assert main(["studio", str(config), "--export", str(tmp_path / "export")]) == 0
    out = capsys.readouterr().out
    assert "8 participants (3 completed)" in out  # the example issues 5 personal links; 3 came by the open link
    assert "9 conversations exported" in out and "3 votes" in out
    assert "annotations: 9 of 9 conversations; gold checks 3/3 passed" in out
    assert "Krippendorff's alpha" in out and "| dialogue_overall | dialogue |" in out
