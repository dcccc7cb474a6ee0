"""The public API: simulate with Python objects, score, report, load_run; also inside a running loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import usersimcrs as us
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ITEMS = str(ROOT / "configs/data/tiny_movies.csv")
RATINGS = str(ROOT / "configs/data/tiny_ratings.csv")
AGENDA = {"type": "agenda", "nlu": "rules", "nlg": "template"}


class EchoTitles:
    """A CRS object: recommends the first two items of the collection, counts its conversations."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    async def open(self, conversation_id: str) -> None:
        self.opened.append(conversation_id)

    async def reply(self, history, user_utterance):
        return {"text": "Try Toy Story (1995).", "items": [{"title": "Toy Story (1995)"}]}


def test_simulate_with_a_crs_object_writes_a_run_folder_like_the_cli(tmp_path):
    crs = EchoTitles()
    run = us.simulate(
        crs=crs, simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=6, output=tmp_path / "run", max_turns=4
    )
    assert isinstance(run, us.Run)
    assert len(run.dialogues) == 6 and len(set(crs.opened)) == 6
    assert {d.status for d in run.dialogues} == {"ok"}
    agent = next(u for u in run.dialogues[0].utterances if u.participant == "AGENT")
    assert agent.items[0].title == "Toy Story (1995)" and agent.items[0].id is not None  # resolved in the collection
    assert run.manifest.status == "completed" and run.manifest.crs.startswith("python:")
    again = us.load_run(tmp_path / "run")
    assert [d.conversation_id for d in again.dialogues] == [d.conversation_id for d in run.dialogues]


def test_a_crs_function_a_user_function_and_an_item_collection(tmp_path):
    seen: list[str] = []

    async def crs(history, user_utterance):
        seen.append(user_utterance.text if user_utterance else "")
        return {"text": f"echo {len(history.utterances)}", "items": []}

    def user(dialogue):
        turns = len(dialogue.user_turns)
        return None if turns >= 2 else f"turn {turns}"

    items = us.ItemCollection.from_csv(ITEMS, delimiters={"genres": "|"})
    run = us.simulate(crs=crs, simulator=user, items=items, conversations=3, output=tmp_path / "fn")
    texts = [[u.text for u in d.utterances] for d in run.dialogues]
    assert texts[0] == ["turn 0", "echo 0", "turn 1", "echo 2"]
    assert {d.end_reason for d in run.dialogues} == {"user_stop"}
    assert seen.count("turn 0") == 3


def test_registry_names_and_a_connector_class_work_too(tmp_path):
    from crs_connectors.baselines.popularity import PopularityCRS

    by_name = us.simulate(
        crs="popularity", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=4, output=tmp_path / "a"
    )
    by_class = us.simulate(
        crs=PopularityCRS, simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=4, output=tmp_path / "b"
    )

    def turns(run: us.Run) -> list[list[tuple[str, str]]]:
        return [[(u.participant, u.text) for u in d.utterances] for d in sorted(run.dialogues, key=lambda d: d.index)]

    assert turns(by_name) == turns(by_class)
    assert by_name.manifest.crs == "popularity"


def test_score_gives_summary_with_n_and_writes_metrics(tmp_path):
    run = us.simulate(
        crs="retrieval", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=5, output=tmp_path / "r"
    )
    scores = us.score(run)
    assert {"metric", "n", "mean"} <= set(scores.summary.columns)
    assert scores.mean("turns") is not None
    assert (run.path / "metrics.csv").exists()
    assert json.loads((run.path / "manifest.json").read_text())["metrics"]["gate"] in ("passed", "failed")
    assert us.write_report(run).exists()


def test_bad_arguments_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError) as info:
        us.simulate(crs=42, simulator=AGENDA, items=ITEMS, conversations=1, output=tmp_path / "x")
    assert "crs:" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError) as info:
        us.simulate(crs="no_such_crs", simulator=AGENDA, items=ITEMS, conversations=1, output=tmp_path / "y")
    assert "unknown" in str(info.value) and "no_such_crs" in str(info.value)


def test_the_api_works_inside_a_running_event_loop(tmp_path):
    async def notebook_cell():
        loop_before = asyncio.get_running_loop()
        run = us.simulate(
            crs="popularity", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=3, output=tmp_path / "nb"
        )  # the synchronous call, as a notebook user writes it
        awaited = await us.simulate_async(
            crs="popularity", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=3, output=tmp_path / "nb2"
        )
        assert asyncio.get_running_loop() is loop_before
        return run, awaited

    run, awaited = asyncio.run(notebook_cell())
    assert len(run.dialogues) == 3 and len(awaited.dialogues) == 3
    assert [len(d.utterances) for d in run.dialogues] == [len(d.utterances) for d in awaited.dialogues]


def test_default_output_does_not_overwrite_an_existing_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = us.simulate(crs="popularity", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=2, name="same")
    second = us.simulate(crs="popularity", simulator=AGENDA, items=ITEMS, ratings=RATINGS, conversations=2, name="same")
    assert first.path != second.path
    assert len(list(iter_jsonl(first.path / "dialogues.jsonl"))) == 2


def test_the_example_script_runs_through_the_public_api_with_a_judge(tmp_path):
    """examples/custom_crs.py: a custom in-process CRS, 50 agenda conversations, metrics and a judge
    against the project's local OpenAI-protocol server."""
    import subprocess
    import sys

    from usersimcrs.testing.llm_server import LLMServer

    output = tmp_path / "example"
    with LLMServer() as server:
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples/custom_crs.py"),
                "--items",
                ITEMS,
                "--ratings",
                RATINGS,
                "--output",
                str(output),
                "--judge-url",
                server.openai_url,
                "--judge-model",
                "judge-model",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        calls = len(server.chat_requests)
    assert done.returncode == 0, done.stderr
    run = us.load_run(output)
    assert len(run.dialogues) == 50 and (output / "metrics.csv").exists() and (output / "report.html").exists()
    judged = {j["conversation_id"] for j in run.judgments if j["status"] == "ok"}
    assert judged and calls >= len(judged)
    assert {j["model"] for j in run.judgments} == {"openai:judge-model"}
    assert "judgments written" in done.stdout


def test_public_names_survive_importing_every_subpackage():
    """A public name must not be shadowed by a subpackage of the same name once that is imported."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(us.__path__):
        if not module.name.startswith("_"):  # __main__ would run the command line
            importlib.import_module(f"usersimcrs.{module.name}")
    for name in us.__all__:
        value = getattr(us, name)
        assert not type(value).__name__ == "module", name
