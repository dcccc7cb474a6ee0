"""Core data model I/O: DialogueKit JSON round trips (ours and DialogueKit 0.1.1's reader), JSONL."""

from __future__ import annotations

import json

import pytest

from usersimcrs.core import Dialogue, DialogueAct, ItemRef, SlotValue, Utterance
from usersimcrs.core.dialoguekit_io import read_dialoguekit, write_dialoguekit
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl, read_models, repair_torn_tail
from usersimcrs.errors import DataError

DIALOGUEKIT_FILES = [
    "moviebot_annotated_dialogues.json",
    "iard_annotated_gold_first50.json",
    "inspired_annotated_sample.json",
]


def _acts(utt):
    return [(a.intent, [(s.slot, s.value, s.start, s.end) for s in a.slot_values]) for a in utt.dialogue_acts]


@pytest.mark.parametrize("name", DIALOGUEKIT_FILES)
def test_shared_dialoguekit_file_round_trips(shared_data, tmp_path, name):
    source = shared_data / "dialoguekit" / name
    raw = json.loads(source.read_text())
    dialogues = read_dialoguekit(source)
    assert len(dialogues) == len(raw)
    assert sum(len(d.utterances) for d in dialogues) == sum(len(r["conversation"]) for r in raw)
    # slots written as "slots" (INSPIRED sample) are not dropped
    raw_slots = sum(
        len(a.get("slot_values", a.get("slots")) or [])
        for r in raw
        for u in r["conversation"]
        for a in u.get("dialogue_acts", [])
    )
    assert sum(len(a.slot_values) for d in dialogues for u in d.utterances for a in u.dialogue_acts) == raw_slots
    out = tmp_path / "out.json"
    write_dialoguekit(dialogues, out)
    again = read_dialoguekit(out)
    assert again == dialogues
    for before, after in zip(raw, again):
        assert after.conversation_id == str(before["conversation_id"])
        assert after.metadata == before.get("metadata", {})


@pytest.mark.parametrize("name", DIALOGUEKIT_FILES)
def test_written_file_loads_in_dialoguekit_with_ids(shared_data, tmp_path, name):
    from dialoguekit.utils.dialogue_reader import json_to_dialogues

    ours = read_dialoguekit(shared_data / "dialoguekit" / name)
    for dialogue in ours:  # give every utterance an ID so that their survival can be checked
        for i, utt in enumerate(dialogue.utterances):
            utt.utterance_id = utt.utterance_id or f"{dialogue.conversation_id}:{i}"
    out = tmp_path / "out.json"
    write_dialoguekit(ours, out)
    theirs = json_to_dialogues(str(out))
    assert [d.conversation_id for d in theirs] == [d.conversation_id for d in ours]
    for mine, dk in zip(ours, theirs):
        assert [u.utterance_id for u in dk.utterances] == [u.utterance_id for u in mine.utterances]
        for u_mine, u_dk in zip(mine.utterances, dk.utterances):
            assert u_dk.text == u_mine.text
            dk_acts = [
                (str(a.intent), [(s.slot, s.value, s.start, s.end) for s in a.annotations]) for a in u_dk.dialogue_acts
            ]
            assert dk_acts == _acts(u_mine)
        assert {k: v for k, v in dk.metadata.items() if k != "usersimcrs"} == mine.metadata


def test_run_fields_survive_dialoguekit_round_trip(tmp_path):
    d = Dialogue(
        conversation_id="c1", status="failed", error="ConnectorError: HTTP 500", end_reason="error", seed=3, index=1
    )
    d.add(
        Utterance(
            participant="USER",
            text="hi",
            dialogue_acts=[DialogueAct(intent="DISCLOSE", slot_values=[SlotValue(slot="GENRE", value="comedy")])],
        )
    )
    d.add(Utterance(participant="AGENT", text="Heat?", items=[ItemRef(id="6", title="Heat (1995)")], feedback=1))
    write_dialoguekit([d], tmp_path / "x.json")
    assert read_dialoguekit(tmp_path / "x.json") == [d]


def test_other_toolkits_error_metadata_marks_failed(tmp_path):
    path = tmp_path / "anchor.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conversation ID": "a1",
                    "metadata": {"error": "pop from an empty deque"},
                    "conversation": [{"participant": "AGENT", "utterance": "Hi", "utterance ID": "u0"}],
                }
            ]
        )
    )
    (d,) = read_dialoguekit(path)
    assert d.conversation_id == "a1" and d.status == "failed" and "deque" in d.error
    assert d.utterances[0].utterance_id == "u0"


def test_bad_dialoguekit_input_names_the_place(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"conversation_id": "x", "conversation": [{"participant": "BOT", "utterance": "hi"}]}]))
    with pytest.raises(DataError, match=r"bad.json\[0\].conversation\[0\]: participant"):
        read_dialoguekit(path)
    path.write_text("[{")
    with pytest.raises(DataError, match="not valid JSON"):
        read_dialoguekit(path)


def test_jsonl_torn_tail_and_bad_middle_line(tmp_path):
    path = tmp_path / "d.jsonl"
    with JsonlWriter(path) as writer:
        for i in range(3):
            writer.write(Dialogue(conversation_id=f"c{i}"))
    with path.open("ab") as handle:
        handle.write(b'{"conversation_id": "c3", "utter')
    assert [r["conversation_id"] for r in iter_jsonl(path)] == ["c0", "c1", "c2"]
    assert repair_torn_tail(path) > 0
    with JsonlWriter(path) as writer:
        writer.write(Dialogue(conversation_id="c3"))
    assert [d.conversation_id for d in read_models(path, Dialogue)] == ["c0", "c1", "c2", "c3"]
    path.write_text('{"conversation_id": "a"}\nnot json\n{"conversation_id": "b"}\n')
    with pytest.raises(DataError, match=r"d.jsonl:2"):
        list(iter_jsonl(path))


def test_acts_without_intent_are_dropped_counted_and_their_utterances_kept(tmp_path):
    from usersimcrs.core.dialoguekit_io import read_dialoguekit_report

    turns = [
        {
            "participant": "USER",
            "utterance": "a comedy please",
            "dialogue_acts": [{"intent": "DISCLOSE", "slot_values": [["GENRE", "comedy"]]}],
        },
        {
            "participant": "AGENT",
            "utterance": "How about Heat?",
            "dialogue_acts": [{"intent": None, "slot_values": [["TITLE", "Heat"]]}],
        },
        {
            "participant": "AGENT",
            "utterance": "Or Up?",
            "dialogue_acts": [{"intent": "", "slot_values": []}, {"intent": "REVEAL"}],
        },
        {"participant": "AGENT", "utterance": "Anything else?", "dialogue_acts": [{"slot_values": []}]},
    ]
    path = tmp_path / "real.json"
    path.write_text(json.dumps([{"conversation_id": "c1", "conversation": turns}]))
    result = read_dialoguekit_report(path)
    (d,) = result.dialogues
    assert [u.text for u in d.utterances] == [t["utterance"] for t in turns]
    assert [[a.intent for a in u.dialogue_acts] for u in d.utterances] == [["DISCLOSE"], [], ["REVEAL"], []]
    assert result.acts.read == 5
    assert (result.acts.dropped_null_intent, result.acts.dropped_empty_intent) == (2, 1)
    assert result.acts.dropped == 3 and result.acts.slots_dropped == 1 and result.acts.utterances_affected == 3
    assert read_dialoguekit(path) == result.dialogues
    path.write_text(
        json.dumps(
            [
                {
                    "conversation_id": "c1",
                    "conversation": [{"participant": "USER", "utterance": "x", "dialogue_acts": [{"intent": ["A"]}]}],
                }
            ]
        )
    )
    with pytest.raises(DataError, match=r"dialogue_acts\[0\]: intent must be a string"):
        read_dialoguekit(path)
