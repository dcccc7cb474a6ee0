"""An LLM server nobody listens on, or one that refuses the key, stops `run`, `judge`, `annotate` and
`matrix` before their first call with one line naming the URL (exit 2, nothing written), as a dead
CRS does; the embedded model and LLMs the run never calls are not checked; `--no-preflight` skips it.

The servers are real: a port nobody listens on (127.0.0.1:9) and the repository's local
OpenAI-protocol server (usersimcrs.testing.llm_server)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.config import RunConfig
from usersimcrs.testing.llm_server import LLMServer

DATA = Path(__file__).resolve().parents[1] / "configs" / "data"
DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there


def run_config(folder: Path, base_url: str, **changes) -> Path:
    data = {
        "name": "pre",
        "conversations": 5,
        "max_turns": 3,
        "progress": False,
        "items": {"path": str(DATA / "tiny_movies.csv"), "delimiters": {"genres": "|"}},
        "ratings": {"path": str(DATA / "tiny_ratings.csv")},
        "llm": {"backend": "openai", "base_url": base_url, "model": "test-model", "retries": 0},
        "simulator": {"type": "llm_single"},
        "crs": {"type": "popularity"},
        **changes,
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_run_against_an_llm_nobody_listens_on_stops_in_seconds_writing_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    started = time.monotonic()
    assert main(["run", str(run_config(tmp_path, DEAD)), "-o", str(out)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: LLM server http://127.0.0.1:9/v1/models (openai:test-model, used by simulator): unreachable (Connection refused); "
        "start it or fix its base_url (--no-preflight skips this check)"
    )
    assert not out.exists()


def test_no_preflight_runs_the_conversations_and_records_their_failures(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", str(run_config(tmp_path, DEAD)), "-o", str(out), "--no-preflight"]) == 3
    lines = (out / "dialogues.jsonl").read_text().splitlines()
    assert len(lines) == 5 and all(json.loads(line)["status"] == "failed" for line in lines)


def test_run_against_the_local_server_checks_its_model_list_first(tmp_path):
    with LLMServer() as server:
        assert (
            main(["run", str(run_config(tmp_path, server.openai_url, conversations=2)), "-o", str(tmp_path / "r")]) == 0
        )
        paths = [request.path for request in server.requests]
    assert paths[0] == "/v1/models" and paths.count("/v1/models") == 1 and "/v1/chat/completions" in paths


def test_a_refused_key_stops_the_run_naming_the_variable_not_the_key(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_TEST_KEY", "wrong-key-123")
    with LLMServer(api_key="right-key") as server:
        config = run_config(tmp_path, server.openai_url)
        args = ["run", str(config), "-o", str(tmp_path / "r"), "--set", "llm.api_key_env=PREFLIGHT_TEST_KEY"]
        assert main(args) == 2
        assert not server.chat_requests
    err = capsys.readouterr().err
    assert "HTTP 401: the server refused the credentials (check $PREFLIGHT_TEST_KEY)" in err
    assert "wrong-key-123" not in err and err.count("\n") == 1


def test_only_the_llms_a_run_calls_are_checked_and_the_embedded_model_is_not(tmp_path):
    from usersimcrs.engine.preflight import check_llms

    def config(**changes) -> RunConfig:
        data = yaml.safe_load(run_config(tmp_path, DEAD).read_text())
        return RunConfig.model_validate({**data, **changes})

    # the rule-based agenda user and a baseline CRS call no LLM: the dead server is not their problem
    assert asyncio.run(check_llms(config(simulator={"type": "agenda"}))) == []
    assert asyncio.run(check_llms(config(llm={"backend": "llamacpp"}))) == []  # nothing to reach
    with LLMServer() as server:  # the agenda user's LLM NLU and the LLM CRS each name their component
        components = {"nlu": {"base_url": server.openai_url}, "crs": {"base_url": server.openai_url}}
        agenda = config(simulator={"type": "agenda", "nlu": "llm"}, crs={"type": "llm_crs"}, llm_components=components)
        assert asyncio.run(check_llms(agenda)) == [f"{server.openai_url}/models"]  # one server, checked once


def _quickstart_run(tmp_path: Path) -> Path:
    config = run_config(tmp_path, DEAD, simulator={"type": "agenda"}, conversations=2)
    assert main(["run", str(config), "-o", str(tmp_path / "run")]) == 0
    return tmp_path / "run"


def test_judge_stops_before_its_first_call(tmp_path, capsys):
    run_dir = _quickstart_run(tmp_path)
    capsys.readouterr()
    judge = ["judge", str(run_dir), "--judge", "quality", "--llm-backend", "openai", "--base-url", DEAD, "--model", "m"]
    assert main([*judge, "--dry-run"]) == 0  # a dry run calls nothing, so checks nothing
    capsys.readouterr()
    assert main(judge) == 2
    assert capsys.readouterr().err.startswith(
        "error: LLM server http://127.0.0.1:9/v1/models (openai:m, used by judge."
    )
    assert not (run_dir / "judgments.jsonl").exists()


@pytest.mark.parametrize(
    ("simulator", "judges", "user"),
    [
        ({"name": "llm", "type": "llm_single"}, [], "simulator)"),  # a cell's simulator
        ({"name": "agenda", "type": "agenda"}, [{"judge": "quality"}], "judge."),  # the judges, run after the cells
    ],
)
def test_matrix_stops_before_its_first_cell(tmp_path, capsys, simulator, judges, user):
    matrix = {
        "name": "pre",
        "base": yaml.safe_load(run_config(tmp_path, DEAD).read_text()),
        "simulators": [simulator],
        "crs": [{"name": "pop", "type": "popularity"}],
        "judges": judges,
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(matrix), encoding="utf-8")
    assert main(["matrix", str(path), "-o", str(tmp_path / "m"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"error: LLM server http://127.0.0.1:9/v1/models (openai:test-model, used by {user}" in err
    assert not (tmp_path / "m" / "cells").exists()


def test_annotate_stops_before_its_first_call(tmp_path, capsys):
    folder = tmp_path / "converted"
    folder.mkdir()
    (folder / "dialogues.jsonl").write_text("", encoding="utf-8")
    args = ["annotate", "dialogue-acts", str(folder), "--llm-backend", "openai", "--base-url", DEAD, "--model", "m"]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith(
        "error: LLM server http://127.0.0.1:9/v1/models (openai:m, used by annotate)"
    )
