"""`usersimcrs annotate information-need`: one need per dialogue, targets resolved to items, provenance."""

from __future__ import annotations

import json

import pytest

from tests.test_convert_helpers import reload, run_convert
from usersimcrs.cli import main
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.testing.llm_server import LLMServer

REPLY = {
    "constraints": [
        {"slot": "GENRE", "value": "comedy"},
        {"slot": "GENRE", "value": "drama"},
        {"slot": "ACTOR", "value": " "},
    ],
    "requests": ["YEAR", "YEAR"],
    "targets": ["police academy (1984)", "A Film Nobody Made"],
}


def _reply(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    return "no idea" if "Nightmare on Elm Street" in prompt else json.dumps(REPLY)


@pytest.fixture
def converted(shared_data, tmp_path):
    raw = shared_data / "raw" / "redial"
    out = tmp_path / "converted"
    lines = (raw / "test_data_first25.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run_convert("redial", [small, raw / "movies_with_mentions.csv"], out)
    return out


def test_needs_with_provenance_and_resolved_targets(converted):
    with LLMServer(replies=_reply) as server:
        code = main(
            [
                "annotate",
                "information-need",
                str(converted),
                "--llm-backend",
                "ollama",
                "--base-url",
                server.ollama_url,
                "--model",
                "test-model",
                "--limit",
                "3",
            ]
        )
        assert code == 0
        assert {r.protocol for r in server.chat_requests} == {"ollama"}
    report = json.loads((converted / "annotation_report.information-need.json").read_text(encoding="utf-8"))
    dialogues = reload(converted)["dialogues"]
    # dialogue 20041 mentions A Nightmare on Elm Street: its reply is unusable and is reported
    assert report["units"] == 3 and report["failed"] == 1 and report["annotated"] == 2
    assert report["failures"][0]["conversation_id"] == "20041"
    need = dialogues[0].metadata["information_need"]
    assert need["constraints"] == {"GENRE": "comedy"}  # first value per slot; blank values dropped
    assert need["requests"] == ["YEAR"]
    police, unknown = need["targets"]  # the catalogue also has an undated "Police Academy": the year decides
    assert police["id"] == "151656" and police["title"] == "Police Academy (1984)"  # resolved against items.csv
    assert unknown == {
        "id": None,
        "title": "A Film Nobody Made",
        "score": None,
        "raw": None,
        "resolution": "unresolved",
    }
    assert dialogues[0].metadata["annotation_provenance"] == {
        "task": "information-need",
        "model": "test-model",
        "backend": "ollama",
        "prompt": "information_need",
        "prompt_version": 1,
    }
    assert "information_need" not in dialogues[1].metadata and "information_need" not in dialogues[3].metadata
    # the dataset's own needs stay as they were; the LLM's go to their own file
    assert json.loads((converted / "information_needs.jsonl").read_text().splitlines()[0])["need"]["constraints"] == {
        "similar_to": "Super Troopers (2001)"
    }
    records = list(iter_jsonl(converted / "information_needs.llm.jsonl"))
    assert [r["conversation_id"] for r in records] == ["20001", "20047"]
    assert records[0]["provenance"]["prompt_version"] == 1


def test_llm_needs_load_as_profiles(converted):
    population = pytest.importorskip("usersimcrs.user_model.population")
    from usersimcrs.config import ProfilesConfig

    with LLMServer(replies=lambda request: json.dumps(REPLY)) as server:
        assert (
            main(
                [
                    "annotate",
                    "information-need",
                    str(converted),
                    "--llm-backend",
                    "openai",
                    "--base-url",
                    server.openai_url,
                    "--model",
                    "test-model",
                ]
            )
            == 0
        )
    items = ItemCollection.from_csv(converted / "items.csv", id_column="id", title_column="title")
    source = population.FileProfiles(
        ProfilesConfig(source="file", path=str(converted / "information_needs.llm.jsonl")), items
    )
    profile = source.profile(0, None)
    assert profile.need.targets[0].id == "151656" and profile.need.constraints == {"GENRE": "comedy"}
