"""`usersimcrs import` on exports shaped like the real ones: intent-less acts, repeated IDs, and
judge files whose records all carry one foreign conversation ID in dialogue order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from usersimcrs.cli import main
from usersimcrs.core.jsonl import iter_jsonl


def _dialogue(cid: str, text: str = "hello", *, agent: str = "KBRD", null_acts: int = 0) -> dict:
    agent_acts = [{"intent": None, "slot_values": []} for _ in range(null_acts)]
    return {
        "conversation_id": cid,
        "agent": {"id": agent, "type": "AGENT"},
        "user": {"id": "sim", "type": "USER"},
        "conversation": [
            {
                "participant": "USER",
                "utterance": text,
                "dialogue_acts": [{"intent": "DISCLOSE", "slot_values": [["GENRE", "drama"]]}],
            },
            {"participant": "AGENT", "utterance": f"re: {text}", "dialogue_acts": agent_acts},
        ],
    }


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def _import(*args) -> int:
    return main(["import", *map(str, args)])


def _report(run_dir: Path) -> dict:
    return json.loads((run_dir / "import_report.json").read_text())


def test_null_and_empty_intents_import_with_acts_dropped_and_counted(tmp_path, capsys):
    data = [_dialogue("a", null_acts=2), _dialogue("b", null_acts=1)]
    data[1]["conversation"][1]["dialogue_acts"].append({"intent": "", "slot_values": [["TITLE", "Heat"]]})
    source = _write(tmp_path / "export.json", data)
    run_dir = tmp_path / "run"
    assert _import(source, "-o", run_dir) == 0
    line = capsys.readouterr().out
    assert line.count("\n") == 1
    assert "2 of 2 dialogues imported" in line and "4 of 6 dialogue acts dropped (no intent)" in line
    report = _report(run_dir)
    assert report["acts"]["dropped_null_intent"] == 3 and report["acts"]["dropped_empty_intent"] == 1
    assert report["acts"]["slots_dropped"] == 1
    dialogues = list(iter_jsonl(run_dir / "dialogues.jsonl"))
    assert [u["text"] for u in dialogues[1]["utterances"]] == ["hello", "re: hello"]
    assert [len(u["dialogue_acts"]) for d in dialogues for u in d["utterances"]] == [1, 0, 1, 0]


@pytest.fixture
def repeated(tmp_path) -> Path:
    """IDs t1 (three times: an exact copy, then different content) and t2 once."""
    return _write(
        tmp_path / "export.json", [_dialogue("t1"), _dialogue("t1"), _dialogue("t2"), _dialogue("t1", "other")]
    )


def test_repeated_ids_are_renamed_in_file_order_and_exact_copies_reported(repeated, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert _import(repeated, "-o", run_dir) == 0
    assert "2 dialogues with a repeated ID renamed (1 exact duplicates, 1 differing)" in capsys.readouterr().out
    dialogues = list(iter_jsonl(run_dir / "dialogues.jsonl"))
    assert [d["conversation_id"] for d in dialogues] == ["t1", "t1~2", "t2", "t1~3"]
    assert dialogues[3]["metadata"]["source_conversation_id"] == "t1"
    dup = _report(run_dir)["duplicates"]
    assert (dup["repeated_ids"], dup["exact"], dup["differing"]) == (1, 1, 1)
    assert [(r["old"], r["new"], r["position"], r["exact_duplicate"]) for r in dup["renamed"]] == [
        ("t1", "t1~2", 1, True),
        ("t1", "t1~3", 3, False),
    ]


def test_rename_passes_over_a_suffix_the_file_already_uses(tmp_path, capsys):
    source = _write(tmp_path / "export.json", [_dialogue("x"), _dialogue("x~2"), _dialogue("x", "again")])
    assert _import(source, "-o", tmp_path / "run") == 0
    assert [d["conversation_id"] for d in iter_jsonl(tmp_path / "run" / "dialogues.jsonl")] == ["x", "x~2", "x~3"]


def test_repeated_ids_skip_drops_later_occurrences_and_counts_them(repeated, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert _import(repeated, "-o", run_dir, "--on-duplicate", "skip") == 0
    line = capsys.readouterr().out
    assert "2 of 4 dialogues imported" in line and "2 dialogues with a repeated ID skipped" in line
    assert [d["conversation_id"] for d in iter_jsonl(run_dir / "dialogues.jsonl")] == ["t1", "t2"]
    skipped = _report(run_dir)["duplicates"]["skipped"]
    assert [(s["position"], s["exact_duplicate"]) for s in skipped] == [(1, True), (3, False)]


def test_repeated_ids_fail_is_one_line_naming_file_and_id(repeated, tmp_path, capsys):
    assert _import(repeated, "-o", tmp_path / "run", "--on-duplicate", "fail") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(repeated) in err and "'t1'" in err
    assert not (tmp_path / "run").exists()


def _anchor_judge(ids: list[str], aspects=("fluency", "relevance"), agent="KBRD") -> dict:
    """The anchor's result layout: one list per aspect, records in dialogue order."""
    return {
        agent: {
            a: [{"conversation_id": cid, "score": 1 + i % 5, "score_explanation": f"r{i}"} for i, cid in enumerate(ids)]
            for a in aspects
        }
    }


@pytest.fixture
def foreign(tmp_path) -> tuple[Path, Path]:
    """Three dialogues; every judge record names one ID that no dialogue has."""
    dialogues = _write(tmp_path / "export.json", [_dialogue("d1"), _dialogue("d2"), _dialogue("d3")])
    judge = _write(tmp_path / "judge.json", _anchor_judge(["20240101-120000"] * 3))
    return dialogues, judge


def test_foreign_id_judgments_fail_loudly_by_default_and_keep_the_old_run(foreign, tmp_path, capsys):
    dialogues, judge = foreign
    run_dir = tmp_path / "run"
    assert _import(dialogues, "-o", run_dir) == 0
    before = (run_dir / "dialogues.jsonl").read_bytes()
    capsys.readouterr()
    assert _import(dialogues, "-o", run_dir, "--judgments", judge, "--overwrite") == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "6 judgment records read, 0 joined, 6 dropped" in err and "--join-by position" in err
    assert (run_dir / "dialogues.jsonl").read_bytes() == before  # nothing already written was lost
    assert not (run_dir / "judgments.jsonl").exists()


def test_foreign_id_judgments_join_by_position_with_provenance(foreign, tmp_path, capsys):
    dialogues, judge = foreign
    run_dir = tmp_path / "run"
    assert _import(dialogues, "-o", run_dir, "--judgments", judge, "--join-by", "position") == 0
    assert "judgments: 6 read, 6 joined (by position), 0 dropped" in capsys.readouterr().out
    judgments = list(iter_jsonl(run_dir / "judgments.jsonl"))
    fluency = [j for j in judgments if j["name"] == "fluency"]
    assert [(j["conversation_id"], j["rationale"]) for j in fluency] == [("d1", "r0"), ("d2", "r1"), ("d3", "r2")]
    assert {(j["join"], j["source_conversation_id"]) for j in judgments} == {("position", "20240101-120000")}
    lists = _report(run_dir)["judgments"]["lists"]
    assert {(x["aspect"], x["join"], x["joined"]) for x in lists} == {
        ("fluency", "position", 3),
        ("relevance", "position", 3),
    }


def test_position_join_refuses_a_count_mismatch(foreign, tmp_path, capsys):
    dialogues, _ = foreign
    judge = _write(tmp_path / "short.json", _anchor_judge(["20240101-120000"] * 2))
    assert _import(dialogues, "-o", tmp_path / "run", "--judgments", judge, "--join-by", "position") == 1
    err = capsys.readouterr().err
    assert "4 judgment records read, 0 joined, 4 dropped" in err and "count" in err
    assert not (tmp_path / "run").exists()


def test_allow_unjoined_imports_and_still_counts_the_dropped(foreign, tmp_path, capsys):
    dialogues, judge = foreign
    run_dir = tmp_path / "run"
    assert _import(dialogues, "-o", run_dir, "--judgments", judge, "--allow-unjoined") == 0
    assert "judgments: 6 read, 0 joined (by none), 6 dropped" in capsys.readouterr().out
    report = _report(run_dir)["judgments"]
    assert (report["records_read"], report["joined"], report["dropped"], report["join_by"]) == (6, 0, 6, "id")
    assert not (run_dir / "judgments.jsonl").exists()


def test_position_join_refuses_records_that_name_another_dialogue(tmp_path, capsys):
    dialogues = _write(tmp_path / "export.json", [_dialogue("d1"), _dialogue("d2")])
    judge = _write(tmp_path / "judge.json", _anchor_judge(["d2", "zz"], aspects=("fluency",)))
    assert _import(dialogues, "-o", tmp_path / "run", "--judgments", judge, "--join-by", "position") == 1
    assert "2 position_conflicts_with_id" in capsys.readouterr().err


def test_repeated_ids_join_judgments_in_occurrence_order(repeated, tmp_path, capsys):
    judge = _write(tmp_path / "judge.json", _anchor_judge(["t1", "t1", "t2", "t1"], aspects=("fluency",)))
    run_dir = tmp_path / "run"
    assert _import(repeated, "-o", run_dir, "--judgments", judge) == 0
    pairs = [(j["conversation_id"], j["rationale"]) for j in iter_jsonl(run_dir / "judgments.jsonl")]
    assert pairs == [("t1", "r0"), ("t1~2", "r1"), ("t2", "r2"), ("t1~3", "r3")]
    # skipping the copies leaves their judgments without a dialogue: refused unless allowed
    assert _import(repeated, "-o", run_dir, "--judgments", judge, "--on-duplicate", "skip", "--overwrite") == 1
    assert "2 duplicate_skipped" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["moviebot_annotated_dialogues.json", "iard_annotated_gold_first50.json"])
def test_real_dialoguekit_exports_import_whole(shared_data, tmp_path, capsys, name):
    source = shared_data / "dialoguekit" / name
    raw = json.loads(source.read_text())
    assert _import(source, "-o", tmp_path / "run") == 0
    assert f"{len(raw)} of {len(raw)} dialogues imported" in capsys.readouterr().out
    report = _report(tmp_path / "run")
    assert report["acts"]["read"] == sum(len(u.get("dialogue_acts") or []) for d in raw for u in d["conversation"])
