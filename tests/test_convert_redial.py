"""ReDial converter on the real sample: counts, quirks, question sets -> feedback and needs, bad input."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import SHARED_DATA
from tests.test_convert_helpers import assert_balanced, assert_same_dialogues, reload, run_convert
from usersimcrs.cli import main
from usersimcrs.core.dialogue import AGENT, USER
from usersimcrs.errors import DataError


@pytest.fixture(scope="module")
def _converted(tmp_path_factory):
    """The real sample converted once for this module (read-only for the tests)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    raw = SHARED_DATA / "raw" / "redial"
    inputs = [
        raw / "test_data_first25.jsonl",
        raw / "train_data_dialogstudio_5.jsonl",
        raw / "movies_with_mentions.csv",
    ]
    out = tmp_path_factory.mktemp("redial") / "out"
    report = run_convert("redial", inputs, out)
    records = [
        json.loads(line) for f in inputs[:2] for line in f.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    return report, reload(out), {r["conversationId"]: r for r in records}


@pytest.fixture
def redial(shared_data, _converted):
    return _converted


def test_counts_ids_and_reload(redial):
    report, out, raw = redial
    assert_balanced(report, ["dialogues", "utterances"])
    assert report["counts_in"]["dialogues"] == 30 and not report["dropped"]
    assert report["counts_out"]["utterances"] == sum(len(r["messages"]) for r in raw.values())
    assert [d.conversation_id for d in out["dialogues"]] == list(raw)
    assert_same_dialogues(out["dialogues"], out["dialoguekit"])
    first = out["dialogues"][0]
    assert [u.utterance_id for u in first.utterances] == [str(m["messageId"]) for m in raw["20001"]["messages"]]
    assert len(out["items"]) == 6924
    assert report["warnings"]["movie_without_year"]["count"] == 614
    assert [n["conversation_id"] for n in out["needs"]] == list(raw)
    assert [p.metadata["conversation_id"] for p in out["profiles"]] == list(raw)


def test_roles_come_from_worker_ids_not_position(redial):
    report, out, raw = redial
    respondent_first = 0
    for dialogue in out["dialogues"]:
        record = raw[dialogue.conversation_id]
        for utt, message in zip(dialogue.utterances, record["messages"]):
            expected = USER if message["senderWorkerId"] == record["initiatorWorkerId"] else AGENT
            assert utt.participant == expected
        respondent_first += record["messages"][0]["senderWorkerId"] == record["respondentWorkerId"]
        assert dialogue.user_id == str(record["initiatorWorkerId"])
    assert respondent_first > 0
    assert out["dialogues"][1].utterances[0].participant == AGENT  # 20041 opens with the recommender
    assert report["warnings"]["recommender_speaks_first"]["count"] == respondent_first


def test_mentions_become_titles_with_item_annotations(redial):
    _, out, raw = redial
    for dialogue in out["dialogues"]:
        for utt in dialogue.utterances:
            assert not re.search(r"@\d+", utt.text)
            for mention in utt.annotation("items", []):
                assert utt.text[mention["start"] : mention["end"]] == mention["title"]
                assert mention["id"] in raw[dialogue.conversation_id]["movieMentions"]
    # "Police Academy  (1984)" (double space in the raw data) is cleaned in text and items
    assert "Police Academy (1984)" in out["dialogues"][0].utterances[1].text
    assert out["items"].get("151656").title == "Police Academy (1984)"
    # the catalogue (CRLF line ends) has names without a year, e.g. "The Mummy " with a trailing space
    assert out["items"].get("76171").title == "The Mummy" and out["items"].get("76171").year is None


def test_targets_and_feedback_from_question_sets(redial):
    _, out, _ = redial
    first = out["dialogues"][0]
    feedback = first.metadata["item_feedback"]
    # recommender says it suggested Lethal Weapon; the seeker's form says it did not: trust the recommender
    assert feedback["101794"]["suggested"] is True
    # seen/liked come from the seeker's own answers (2 = did not say -> None)
    assert feedback["91481"]["seen"] is None and feedback["151656"]["seen"] is False
    need = out["needs"][0]["need"]
    assert {t.id for t in need.targets} == {"151656", "94688"}  # suggested and liked
    assert need.constraints == {"similar_to": "Super Troopers (2001)"}
    profile = out["profiles"][0]
    assert profile.user_id == "956"
    assert not ({t.id for t in need.targets} & set(profile.preferences.items))  # targets do not leak
    assert profile.preferences.items["111776"] == 1.0
    assert {s.item.id for s in profile.seen_items} == {"111776", "134643", "192131"}
    # AGENT turns list what the recommender suggested in that turn
    assert [i.id for i in first.utterances[1].items] == ["151656"]


def test_empty_question_list_means_no_answers(redial):
    report, out, raw = redial
    by_id = {d.conversation_id: d for d in out["dialogues"]}
    assert raw["20131"]["respondentQuestions"] == []
    feedback = by_id["20131"].metadata["item_feedback"]
    assert feedback and all(entry["answered_by"] == ["seeker"] for entry in feedback.values())
    assert raw["405"]["initiatorQuestions"] == [] and raw["405"]["respondentQuestions"] == []
    assert by_id["405"].metadata["item_feedback"] == {}
    need = next(n for n in out["needs"] if n["conversation_id"] == "405")["need"]
    assert need.targets == []
    assert report["warnings"]["questions_empty_list"]["count"] == 5


def _write_truncated(shared_data, tmp_path):
    lines = (shared_data / "raw" / "redial" / "test_data_first25.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "truncated.jsonl"
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2], encoding="utf-8")
    return path


def test_truncated_line_names_file_and_line(shared_data, tmp_path, capsys):
    path = _write_truncated(shared_data, tmp_path)
    from data_converters.run import convert

    with pytest.raises(DataError, match=rf"{re.escape(str(path))}:4: truncated"):
        convert("redial", [path], tmp_path / "out")
    assert main(["convert", "redial", "--input", str(path), "--output", str(tmp_path / "out")]) == 2
    assert f"{path}:4" in capsys.readouterr().err


def test_skip_bad_lists_the_record_and_converts_the_rest(shared_data, tmp_path):
    path = _write_truncated(shared_data, tmp_path)
    bad = tmp_path / "bad.jsonl"
    good = path.read_text(encoding="utf-8").splitlines()[:3]
    broken = json.loads(good[1])
    del broken["messages"]
    bad.write_text("\n".join([good[0], json.dumps(broken), good[2]]) + "\n", encoding="utf-8")
    report = run_convert("redial", [path, bad], tmp_path / "out", "--skip-bad")
    reasons = {d["where"]: d["reason"] for d in report["dropped"]}
    assert "truncated" in reasons[f"{path}:4"]
    assert reasons[f"{bad}:2"] == "missing key 'messages'"
    assert report["counts_in"]["dialogues"] == 7
    assert report["counts_out"]["dialogues"] == 3  # the 2 good lines of bad.jsonl repeat IDs of the first file
    assert_balanced(report, ["dialogues", "utterances"])
    assert sum("duplicate conversationId" in r for r in reasons.values()) == 2
