"""OpenDialKG converter: chat vs. actions, KG paths -> annotations and items, domain filter, ratings."""

from __future__ import annotations

import csv
import json

import pytest

from tests.test_convert_helpers import assert_balanced, assert_same_dialogues, reload, run_convert
from usersimcrs.core.dialogue import AGENT
from usersimcrs.errors import DataError


@pytest.fixture
def raw(shared_data):
    return shared_data / "raw" / "opendialkg"


def _chats(rows):
    return [[m for m in json.loads(r["Messages"]) if m["type"] == "chat"] for r in rows]


def test_all_domains_counts_and_reload(raw, tmp_path):
    inputs = [raw / "dialogstudio_original_examples.json", raw / "opendialkg_sample_reserialized.csv"]
    report = run_convert("opendialkg", inputs, tmp_path / "out", "--domain", "all")
    out = reload(tmp_path / "out")
    rows = json.loads(inputs[0].read_text(encoding="utf-8"))
    chats = _chats(rows)
    assert_balanced(report, ["dialogues", "utterances"])
    assert report["counts_out"]["dialogues"] == 10 and report["counts_out"]["utterances"] == 2 * sum(map(len, chats))
    assert_same_dialogues(out["dialogues"], out["dialoguekit"])
    json_part, csv_part = out["dialogues"][:5], out["dialogues"][5:]
    assert [d.conversation_id for d in json_part] == [f"dialogstudio_original_examples-{i}" for i in range(5)]
    # the CSV re-serialisation of the same rows converts to the same dialogues
    assert [[u.text for u in d.utterances] for d in json_part] == [[u.text for u in d.utterances] for d in csv_part]
    for dialogue, chat in zip(json_part, chats):
        assert [u.text for u in dialogue.utterances] == [m["message"] for m in chat]
    assert [d.metadata["domain"] for d in json_part] == ["movie", "book", "book", "music", "book"]
    # meta-thread messages are kept aside, not as utterances
    assert [m["text"] for m in json_part[4].metadata["meta_messages"]] == ["I need a little more time please", "sure"]
    assert json_part[1].metadata["assistant_rating"] == {"dialog_rating": 3, "other_agent_rating": 3}


def test_movie_filter_drops_other_domains_with_reasons(raw, tmp_path):
    report = run_convert("opendialkg", [raw / "dialogstudio_original_examples.json"], tmp_path / "out")
    out = reload(tmp_path / "out")
    assert [d.conversation_id for d in out["dialogues"]] == ["dialogstudio_original_examples-0"]
    assert sorted(d["reason"] for d in report["dropped"]) == [
        "domain book (filter: movie)",
        "domain book (filter: movie)",
        "domain book (filter: movie)",
        "domain music (filter: movie)",
    ]
    assert_balanced(report, ["dialogues", "utterances"])


def test_kg_paths_become_annotations_entities_and_items(raw, tmp_path):
    run_convert("opendialkg", [raw / "opendialkg_sample_reserialized.csv"], tmp_path / "out")
    out = reload(tmp_path / "out")
    dialogue = out["dialogues"][0]
    second = dialogue.utterances[1]  # "Sure do! Robert Downey Jr. is a favorite."
    path = second.annotation("kg_path")
    assert path["triples"] == [["Iron Man", "starred_actors", "Robert Downey Jr."]]
    assert path["text"] == "Iron Man is starring Robert Downey Jr."
    assert second.annotation("entities") == ["Iron Man", "Robert Downey Jr."]
    assert second.participant == AGENT and [i.id for i in second.items] == ["Iron Man"]
    items = out["items"]
    assert set(items.ids()) == {"Iron Man", "Zodiac (Crime Fiction Film)", "End of Watch"}
    # inverse relations (~starred_actors) are turned around: the film is the item, the actor its value
    assert items.get("Zodiac (Crime Fiction Film)").values("actors") == ["Robert Downey Jr.", "Jake Gyllenhaal"]
    assert items.get("End of Watch").values("genres") == ["Thriller"]
    assert items.get("End of Watch").values("writers") == ["David Ayer"]
    # the user named Iron Man first: a constraint, not a target
    need = out["needs"][0]["need"]
    assert need.constraints == {"similar_to": "Iron Man"} and need.targets == []


def test_bad_messages_json_names_the_line(raw, tmp_path):
    src = raw / "opendialkg_sample_reserialized.csv"
    with src.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[1]["Messages"] = rows[1]["Messages"][:50]
    path = tmp_path / "bad.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    from data_converters.run import convert

    with pytest.raises(DataError, match=r"bad\.csv:3: column 'Messages': not valid JSON"):
        convert(
            "opendialkg",
            [path],
            tmp_path / "out",
        )
    report = run_convert("opendialkg", [path], tmp_path / "out", "--skip-bad", "--domain", "all")
    assert report["counts_out"]["dialogues"] == 4 and len(report["dropped"]) == 1
    assert_balanced(report, ["dialogues"])


def test_missing_messages_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("User Rating,Assistant Rating\n{},{}\n", encoding="utf-8")
    from data_converters.run import convert

    with pytest.raises(DataError, match="missing column 'Messages'"):
        convert("opendialkg", [path], tmp_path / "out")
