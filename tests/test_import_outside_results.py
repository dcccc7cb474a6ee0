"""`usersimcrs import` of a DialogueKit export with errors and an anchor-layout judge file, then metrics/export."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from usersimcrs.cli import main
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.jsonl import iter_jsonl


def _utterances(n: int) -> list[dict]:
    turns = []
    for i in range(n):
        who = "USER" if i % 2 == 0 else "AGENT"
        turns.append(
            {
                "participant": who,
                "utterance": f"{who.lower()} says {i}",
                "utterance ID": f"u{i}",
                "dialogue_acts": [{"intent": "DISCLOSE", "slot_values": [["GENRE", "comedy"]]}]
                if who == "USER"
                else [],
            }
        )
    return turns


@pytest.fixture
def outside(tmp_path):
    dialogues = [
        {"conversation ID": "conv-1", "agent": {"id": "KBRD"}, "user": {"id": "sim"}, "conversation": _utterances(6)},
        # the other toolkit crashed here: its export keeps the exception text in metadata.error
        {
            "conversation ID": "conv-2",
            "agent": {"id": "KBRD"},
            "user": {"id": "sim"},
            "metadata": {"error": "IndexError: pop from an empty deque"},
            "conversation": _utterances(2),
        },
        {"conversation_id": "conv-3", "agent": {"id": "KBRD"}, "user": {"id": "sim"}, "conversation": _utterances(8)},
    ]
    judge = {
        "KBRD": {
            "fluency": [
                {"conversation_id": "conv-1", "score": 4, "score_explanation": "reads well"},
                {"conversation_id": "conv-2", "score": 4.8, "score_explanation": "fine"},
                {"conversation_id": "conv-3", "score": 0.0, "score_explanation": ""},  # anchor: unparseable
                {"conversation_id": "conv-9", "score": 3, "score_explanation": "not in the export"},
            ],
            "overall_satisfaction": [{"conversation_id": "conv-1", "score": 3, "score_explanation": "ok"}],
        }
    }
    dialogue_file = tmp_path / "export.json"
    judge_file = tmp_path / "judge.json"
    dialogue_file.write_text(json.dumps(dialogues))
    judge_file.write_text(json.dumps(judge))
    return dialogue_file, judge_file


def test_import_marks_errors_failed_and_joins_anchor_judgments(outside, tmp_path, capsys):
    dialogue_file, judge_file = outside
    run_dir = tmp_path / "run"
    # conv-9 is judged but not in the export: the import refuses to drop that record silently
    assert main(["import", str(dialogue_file), "--output", str(run_dir), "--judgments", str(judge_file)]) == 1
    assert "5 judgment records read, 4 joined, 1 dropped" in capsys.readouterr().err
    assert not run_dir.exists()
    args = ["import", str(dialogue_file), "--output", str(run_dir), "--judgments", str(judge_file), "--allow-unjoined"]
    assert main(args) == 0
    assert "judgments: 5 read, 4 joined (by id), 1 dropped" in capsys.readouterr().out
    report = json.loads((run_dir / "import_report.json").read_text())
    assert report["judgments"]["dropped_by_reason"] == {"no_dialogue_with_id": 1}
    assert report["judgments"]["unmatched_ids"] == ["conv-9"]
    dialogues = list(iter_jsonl(run_dir / "dialogues.jsonl"))
    assert [d["conversation_id"] for d in dialogues] == ["conv-1", "conv-2", "conv-3"]
    assert [d["status"] for d in dialogues] == ["ok", "failed", "ok"]
    assert "pop from an empty deque" in dialogues[1]["error"]
    assert dialogues[0]["utterances"][1]["utterance_id"] == "u1"  # IDs survive
    judgments = list(iter_jsonl(run_dir / "judgments.jsonl"))
    by_key = {(j["conversation_id"], j["name"]): j for j in judgments}
    assert set(by_key) == {
        ("conv-1", "fluency"),
        ("conv-2", "fluency"),
        ("conv-3", "fluency"),
        ("conv-1", "overall_satisfaction"),
    }
    assert {j["join"] for j in judgments} == {"id"}
    assert by_key[("conv-1", "fluency")]["value"] == 4.0 and by_key[("conv-1", "fluency")]["rationale"] == "reads well"
    assert by_key[("conv-3", "fluency")]["value"] is None
    assert (
        by_key[("conv-3", "fluency")]["status"] == "parse_error" and by_key[("conv-3", "fluency")]["raw_value"] == 0.0
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["crs"]["type"] == "KBRD" and manifest["dialogues"]["failed"] == 1

    # the validity gate audits the imported run: 1 of 3 failed, conv-3's judgment did not parse
    code = main(["metrics", str(run_dir), "--max-failure-rate", "0.2", "--no-satisfaction"])
    assert code == 1
    assert "error rate 33.3% exceeds" in capsys.readouterr().err
    table = pd.read_csv(run_dir / "metrics.csv").set_index("conversation_id")
    assert table.loc["conv-2", "error"] and not table.loc["conv-2", "valid"]
    assert table.loc["conv-3", "judge_parse_failure"] and not table.loc["conv-1", "judge_parse_failure"]
    # the anchor's own exception ("pop from an empty deque") is no CRS failure: excluded, with its reason
    assert table.loc["conv-2", "excluded"] and table.loc["conv-2", "failure_side"] == "toolkit"
    assert table.loc["conv-2", "exclusion"].startswith("toolkit_error") and pd.isna(table.loc["conv-2", "utterances"])
    summary = pd.read_csv(run_dir / "metrics_summary.csv").set_index(["subset", "metric"])
    assert summary.loc[("all", "utterances"), "mean"] == pytest.approx((6 + 8) / 2)
    assert summary.loc[("all", "utterances"), "n"] == 2
    assert summary.loc[("valid", "utterances"), "mean"] == pytest.approx(7)
    assert main(["metrics", str(run_dir), "--max-failure-rate", "0.5", "--no-satisfaction"]) == 0


def test_import_refuses_to_overwrite_and_rejects_bad_judge_files(outside, tmp_path, capsys):
    dialogue_file, judge_file = outside
    run_dir = tmp_path / "run"
    assert main(["import", str(dialogue_file), "--output", str(run_dir)]) == 0
    assert main(["import", str(dialogue_file), "--output", str(run_dir)]) == 2
    assert "already holds a run" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"KBRD": {"fluency": [{"score": 3}]}}))
    assert main(["import", str(dialogue_file), "--output", str(run_dir), "--overwrite", "--judgments", str(bad)]) == 2
    assert "KBRD.fluency[0]: needs a conversation_id" in capsys.readouterr().err


def test_export_round_trips_ids_through_dialoguekit(outside, tmp_path):
    dialogue_file, _ = outside
    run_dir = tmp_path / "run"
    main(["import", str(dialogue_file), "--output", str(run_dir)])
    out = tmp_path / "again.json"
    assert main(["export", str(run_dir), "--format", "dialoguekit", "--output", str(out)]) == 0
    again = read_dialoguekit(out)
    assert [d.conversation_id for d in again] == ["conv-1", "conv-2", "conv-3"]
    assert [d.status for d in again] == ["ok", "failed", "ok"]
    assert again[0].utterances[0].dialogue_acts[0].slot_values[0].value == "comedy"
    jsonl = tmp_path / "again.jsonl"
    assert main(["export", str(run_dir), "--format", "jsonl", "--output", str(jsonl), "--only-ok"]) == 0
    assert [r["conversation_id"] for r in iter_jsonl(jsonl)] == ["conv-1", "conv-3"]
