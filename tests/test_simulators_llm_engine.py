"""The four LLM simulator types through the real engine, a real local LLM server and the built-in CRS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.llm_sim_support import movie_items
from usersimcrs.config import RunConfig
from usersimcrs.core.run_folder import load_run

llm_server = pytest.importorskip("usersimcrs.testing.llm_server")
runner = pytest.importorskip("usersimcrs.engine.runner")


def scripted(body: dict) -> str:
    """Answers derived from the request: a fresh utterance per turn, decisions by schema."""
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
    props = schema.get("properties", {})
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if "rating" in props:
        return json.dumps({"rating": 1})
    if "items" in props:
        return json.dumps({"items": [{"number": 1, "verdict": "like", "reason": "fits my taste"}]})
    if "utterance" in props:
        return json.dumps({"utterance": f"Something with crime and tension, idea {turn}?", "end": False})
    if "end" in props:  # the stopping prompt carries the labelled history in one message
        said = sum(line.startswith("USER:") for line in body["messages"][-1]["content"].splitlines())
        return json.dumps({"end": said >= 3})
    return "ok"


def write_data(folder: Path) -> tuple[dict, dict]:
    items = movie_items()
    mapping = items.to_csv(folder / "items.csv")
    ratings = folder / "ratings.csv"
    rows = ["userId,movieId,rating,timestamp"]
    for user, scores in {
        "1": {"1": 5, "5": 4.5, "7": 4.5, "2": 1, "4": 3},
        "2": {"2": 5, "6": 5, "8": 4.5, "3": 1},
    }.items():
        rows += [f"{user},{item},{rating},0" for item, rating in scores.items()]
    ratings.write_text("\n".join(rows) + "\n")
    return {"path": str(folder / "items.csv"), **mapping}, {"path": str(ratings)}


def run_config(name: str, section: dict, items: dict, ratings: dict, server, **keys) -> RunConfig:  # type: ignore[no-untyped-def]
    """A run of `section` against the built-in retrieval CRS, its LLM the local test server (`keys`: seed, ...)."""
    return RunConfig.model_validate(
        {
            "name": name,
            "concurrency": 2,
            "items": items,
            "ratings": ratings,
            "profiles": {"constraint_slots": ["genres"], "holdout": 0.5},
            "llm": server.config("openai", cache=False).model_dump(),
            "simulator": section,
            "crs": {"type": "retrieval", "k": 3},
            "progress": False,
            **keys,
        }
    )


SIMULATORS = {
    "llm_single": ({"type": "llm_single", "min_turns": 1}, {"max_turns"}),
    "llm_dual": ({"type": "llm_dual", "min_turns": 1}, {"user_stop"}),
    "target_free": ({"type": "target_free", "max_turns": 3}, {"max_turns_simulator"}),
    "target_biased": ({"type": "target_biased"}, {"target_hit", "max_rounds_no_hit"}),
}


@pytest.mark.parametrize("kind", list(SIMULATORS))
def test_five_conversations_through_the_engine(kind, tmp_path):
    section, reasons = SIMULATORS[kind]
    items, ratings = write_data(tmp_path)
    with llm_server.LLMServer(scripted) as server:
        outputs = []
        for attempt in range(2):
            config = run_config(f"t-{kind}", section, items, ratings, server, seed=5, conversations=5, max_turns=6)
            summary = runner.run(config, tmp_path / f"run{attempt}")
            assert summary.completed == 5 and summary.failed == 0
            lines = (tmp_path / f"run{attempt}" / "dialogues.jsonl").read_text().splitlines()
            outputs.append(sorted(lines))
    dialogues = [json.loads(line) for line in outputs[0]]
    profiles = {d.conversation_id: d.profile for d in load_run(tmp_path / "run0").dialogues}
    assert all(d["status"] == "ok" for d in dialogues)
    assert {d["end_reason"] for d in dialogues} <= reasons, {d["end_reason"] for d in dialogues}
    for d in dialogues:
        users = [u for u in d["utterances"] if u["participant"] == "USER"]
        assert users and all(u["text"].strip() for u in users)
        if kind == "target_biased":
            titles = [t.title.split(" (")[0].lower() for t in profiles[d["conversation_id"]].need.targets]
            assert not any(title in u["text"].lower() for title in titles for u in users)
            assert "persuasiveness" in d["metadata"]
        if kind == "target_free":
            assert all("reflected_preferences" in u["metadata"] for u in users[1:])
    strip = [[{k: v for k, v in json.loads(line).items() if k != "timings"} for line in out] for out in outputs]
    for run in strip:
        for d in run:
            for u in d["utterances"]:
                u.pop("latency_s", None)
    assert strip[0] == strip[1]  # same seed, same dialogues
