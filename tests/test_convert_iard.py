"""IARD converter: intent codes -> dialogue acts (documented mapping), mentions, accepted recommendations."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from data_converters.iard import CODES_FILE
from tests.test_convert_helpers import assert_balanced, assert_same_dialogues, reload, run_convert
from usersimcrs.core.dialogue import AGENT, USER
from usersimcrs.errors import DataError


@pytest.fixture
def iard(shared_data, tmp_path):
    path = shared_data / "raw" / "iard" / "umap2020_IARD_Cai_first15.json"
    report = run_convert("iard", [path], tmp_path / "out")
    return report, reload(tmp_path / "out"), json.loads(path.read_text(encoding="utf-8"))


def test_counts_ids_and_reload(iard):
    report, out, raw = iard
    assert_balanced(report, ["dialogues", "utterances"])
    assert report["counts_out"]["dialogues"] == 15
    assert report["counts_out"]["utterances"] == sum(len(d["dialogue_info"]) for d in raw.values())
    assert [d.conversation_id for d in out["dialogues"]] == list(raw)
    assert_same_dialogues(out["dialogues"], out["dialoguekit"])
    first = out["dialogues"][0]
    assert first.utterances[0].utterance_id == "474:S1" and first.user_id == "1" and first.agent_id == "16"


def test_codes_map_to_documented_intents(iard):
    _, out, raw = iard
    table = yaml.safe_load(CODES_FILE.read_text(encoding="utf-8"))
    for dialogue in out["dialogues"]:
        info = sorted(raw[dialogue.conversation_id]["dialogue_info"].values(), key=lambda u: u["utterance_pos"])
        for utt, src in zip(dialogue.utterances, info):
            role = src["role"]
            assert utt.participant == (USER if role == "seeker" else AGENT)
            assert utt.annotation("iard_codes") == src["sub-intent/action"]
            assert utt.annotation("iard_top_level") == src["top-level intent/action"]
            assert [a.intent for a in utt.dialogue_acts] == [table[role][c]["intent"] for c in src["sub-intent/action"]]
    intents = {(u.participant, a.intent) for d in out["dialogues"] for u in d.utterances for a in u.dialogue_acts}
    codes = {c for d in raw.values() for u in d["dialogue_info"].values() for c in u["sub-intent/action"]}
    # the data's own codes CLQ, RESP and R-ANS become the README's CLA, RES and ANS
    assert {"CLQ", "RESP", "R-ANS"} <= codes
    assert {(AGENT, "CLA"), (AGENT, "RES"), (AGENT, "ANS"), (USER, "OTH"), (AGENT, "REC-S")} <= intents
    assert not {i for _, i in intents} & {"CLQ", "RESP", "R-ANS"}


def test_mentions_titles_and_slots(iard):
    _, out, _ = iard
    second = out["dialogues"][0].utterances[1]
    assert second.text == "Yes, how about It (2017) ?"
    act = second.dialogue_acts[0]
    assert act.intent == "REC-E"
    slot = act.slot_values[0]
    assert (slot.slot, slot.value) == ("TITLE", "It (2017)")
    assert second.text[slot.start : slot.end] == "It (2017)"
    assert [i.id for i in second.items] == ["187028"]
    texts = [u.text for d in out["dialogues"] for u in d.utterances]
    assert not [t for t in texts if re.search(r"@\d", t)]
    assert any("@the big lebowski" in t for t in texts)  # typed by a worker without an ID: kept as written
    # OTH carries no item slots (mapping flag item_slots: false)
    assert out["dialogues"][0].utterances[0].dialogue_acts[0].slot_values == []


def test_accepted_recommendations_become_targets(iard):
    _, out, _ = iard
    needs = {n["conversation_id"]: n["need"] for n in out["needs"]}
    # 474: "I think I will check out The Conjuring" after "The Conjuring ... Annabelle ... Dolls"
    assert [t.title for t in needs["474"].targets] == ["The Conjuring (2013)"]
    # 895: the seeker asked about The River Wild, then accepted
    assert [t.title for t in needs["895"].targets] == ["The River Wild (1994)"]
    by_id = {d.conversation_id: d for d in out["dialogues"]}
    assert by_id["474"].metadata["accepted_positions"] == [13]
    assert by_id["474"].metadata["accepted_recommendations"] == ["The Conjuring"]
    assert all(n.targets for n in needs.values())


def test_malformed_dialogue_is_reported(tmp_path):
    path = tmp_path / "iard.json"
    good = {
        "accepted_recommendation": [],
        "dialogue_info": {
            "S1": {
                "utterance_pos": 1,
                "worker_id": 1,
                "role": "seeker",
                "utterance_text": "hi",
                "top-level intent/action": ["OTH"],
                "sub-intent/action": ["OTH", "XYZ"],
            }
        },
    }
    bad = {"accepted_recommendation": [], "dialogue_info": {"S1": {"utterance_pos": 1, "role": "seeker"}}}
    path.write_text(json.dumps({"1": good, "2": bad}), encoding="utf-8")
    from data_converters.run import convert

    with pytest.raises(DataError, match=r"iard\.json: conversation 2: utterance S1: missing key 'utterance_text'"):
        convert("iard", [path], tmp_path / "out")
    report = run_convert("iard", [path], tmp_path / "out", "--skip-bad")
    assert report["counts_out"]["dialogues"] == 1 and report["dropped"][0]["record_id"] == "2"
    assert report["warnings"]["unknown_code"]["count"] == 1  # an unknown code is kept verbatim and reported
    acts = reload(tmp_path / "out")["dialogues"][0].utterances[0].dialogue_acts
    assert [a.intent for a in acts] == ["OTH", "XYZ"]
    assert_balanced(report, ["dialogues", "utterances"])


def test_dialoguekit_itself_reads_the_output(iard, tmp_path):
    dialogue_reader = pytest.importorskip("dialoguekit.utils.dialogue_reader")
    _, out, raw = iard
    path = tmp_path / "out" / "dialogues.dialoguekit.json"
    loaded = dialogue_reader.json_to_dialogues(str(path))
    assert [d.conversation_id for d in loaded] == list(raw)
    second = loaded[0].utterances[1]
    assert second.utterance_id == "474:R2" and second.text == "Yes, how about It (2017) ?"
    act = second.dialogue_acts[0]
    assert str(act.intent) == "REC-E" and [(s.slot, s.value) for s in act.annotations] == [("TITLE", "It (2017)")]
