"""CRSArena-Dial converter: human conversations -> one run folder per CRS, labels as references, votes kept."""

from __future__ import annotations

import json

import pytest

from usersimcrs.analysis.compare import discover_cells
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import read_models
from usersimcrs.core.votes import read_votes
from usersimcrs.errors import DataError


def _arena(tmp_path, dialogues, votes_csv=None):
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    (raw / "dial.json").write_text(json.dumps(dialogues), encoding="utf-8")
    inputs = [str(raw / "dial.json")]
    if votes_csv is not None:
        (raw / "votes.csv").write_text(votes_csv, encoding="utf-8")
        inputs.append(str(raw / "votes.csv"))
    return inputs


def _dialogue(crs, user, sentiment):
    return {
        "conversation ID": f"{crs}_{user}",
        "agent": {"id": crs, "type": "AGENT"},
        "user": {"id": user, "type": "USER"},
        "conversation": [
            {"participant": "USER", "utterance": "hi", "utterance ID": "u0"},
            {"participant": "AGENT", "utterance": "hello", "utterance ID": "u1"},
        ],
        "metadata": {"sentiment": sentiment},
    }


def test_cells_references_and_votes(tmp_path):
    dialogues = [_dialogue("a", "u1", "satisfied"), _dialogue("b", "u1", "frustrated"), _dialogue("a", "u2", "meh")]
    votes = (
        "session_id,user_id,crs1,crs2,vote,feedback\n"
        "s1,u1,a,b,a,\n"  # both conversations present
        "s2,u2,a,b,tie,\n"  # only a_u2 present
        "s3,u9,b,a,b,nice\n"
    )  # neither present
    out = tmp_path / "out"
    assert main(["convert", "crsarena-dial", "--input", *_arena(tmp_path, dialogues, votes), "--output", str(out)]) == 0
    cells = discover_cells(out)
    assert [(c.simulator, c.crs, c.dataset) for c in cells] == [("human", "a", "crsarena"), ("human", "b", "crsarena")]
    cell_a = read_models(out / "cells" / "human__a__crsarena" / "dialogues.jsonl", Dialogue)
    assert [d.metadata.get("reference") for d in cell_a] == [{"satisfaction_label": "satisfied", "satisfied": 1}, None]
    manifest = json.loads((out / "cells" / "human__b__crsarena" / "manifest.json").read_text())
    assert manifest["config"]["simulator"]["type"] == "human" and manifest["dialogues"]["completed"] == 1
    recorded = read_votes(out / "votes.jsonl")
    assert [(v.outcome, v.winner, v.in_corpus_a, v.in_corpus_b) for v in recorded] == [
        ("a", "a", True, True),
        ("tie", None, True, False),
        ("a", "b", False, False),
    ]
    assert recorded[2].conversation_a == "b_u9"
    report = json.loads((out / "conversion_report.json").read_text())
    assert report["counts_out"]["votes_both_conversations"] == 1
    assert report["counts_out"]["votes_one_conversation"] == 1
    assert report["counts_out"]["votes_no_conversation"] == 1
    assert report["warnings"]["no_satisfaction_label"]["count"] == 1


def test_reconversion_removes_stale_cells(tmp_path):
    out = tmp_path / "out"
    main(
        [
            "convert",
            "crsarena-dial",
            "--input",
            *_arena(tmp_path, [_dialogue("old", "u1", "satisfied")]),
            "--output",
            str(out),
        ]
    )
    main(
        [
            "convert",
            "crsarena-dial",
            "--input",
            *_arena(tmp_path, [_dialogue("new", "u1", "satisfied")]),
            "--output",
            str(out),
        ]
    )
    assert [c.crs for c in discover_cells(out)] == ["new"]
    assert not (out / "cells" / "human__old__crsarena").exists()


def test_bad_vote_is_one_line_error(tmp_path, capsys):
    votes = "session_id,user_id,crs1,crs2,vote,feedback\ns1,u1,a,b,c,\n"
    code = main(
        [
            "convert",
            "crsarena-dial",
            "--input",
            *_arena(tmp_path, [_dialogue("a", "u1", "satisfied")], votes),
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert "votes.csv:2" in capsys.readouterr().err


def test_needs_a_dialogue_file_and_each_part_once(tmp_path):
    from data_converters.run import convert

    inputs = _arena(tmp_path, [_dialogue("a", "u1", "satisfied")], "session_id,user_id,crs1,crs2,vote,feedback\n")
    with pytest.raises(DataError, match="dial.json given more than once"):
        convert("crsarena_dial", inputs + inputs[:1], tmp_path / "out")
    with pytest.raises(DataError, match="DialogueKit .json file"):
        convert("crsarena_dial", inputs[1:], tmp_path / "out")


def _split(raw, tmp_path):
    """The real slice as CRSArena-Dial ships: an open and a closed part of conversations and of votes,
    with one conversation and one vote in both parts (the same record twice)."""
    source = json.loads((raw / "crs_arena_dial_open_first2_per_crs.json").read_text(encoding="utf-8"))
    header, *rows = (raw / "votes_open_first25.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "crs_arena_dial_open.json").write_text(json.dumps(source[:10]), encoding="utf-8")
    (parts / "crs_arena_dial_closed.json").write_text(json.dumps(source[9:]), encoding="utf-8")
    (parts / "votes_open.csv").write_text(header + "".join(rows[:15]), encoding="utf-8")
    (parts / "votes_closed.csv").write_text(header + "".join(rows[14:]), encoding="utf-8")
    names = ("crs_arena_dial_open.json", "crs_arena_dial_closed.json", "votes_open.csv", "votes_closed.csv")
    return source, [str(parts / n) for n in names]


def test_real_parts_merge_and_are_counted_per_part(shared_data, tmp_path, capsys):
    raw = shared_data / "raw" / "crsarena_dial"
    source, inputs = _split(raw, tmp_path)
    whole, merged = tmp_path / "whole", tmp_path / "merged"
    slice_files = [str(raw / "crs_arena_dial_open_first2_per_crs.json"), str(raw / "votes_open_first25.csv")]
    assert main(["convert", "crsarena-dial", "--output", str(whole), "--input", *slice_files]) == 0
    capsys.readouterr()
    assert main(["convert", "crsarena-dial", "--output", str(merged), "--input", *inputs]) == 0
    out = capsys.readouterr().out
    assert "crs_arena_dial_closed.json: dialogues 9, repeated 1, kept 8" in out
    assert "votes_closed.csv: votes 11, repeated 1, kept 10" in out
    # the merged parts give exactly the conversations and votes of the whole slice, each once
    for name in ("dialogues.jsonl", "votes.jsonl"):
        got = [json.loads(line) for line in (merged / name).read_text().splitlines()]
        want = [json.loads(line) for line in (whole / name).read_text().splitlines()]
        key = "conversation_id" if name == "dialogues.jsonl" else "session_id"
        assert sorted(x[key] for x in got) == sorted(x[key] for x in want)
    assert [c.crs for c in discover_cells(merged)] == [c.crs for c in discover_cells(whole)]
    report = json.loads((merged / "conversion_report.json").read_text())
    assert report["parts"] == {
        "crs_arena_dial_open.json": {"dialogues": 10, "kept": 10},
        "crs_arena_dial_closed.json": {"dialogues": 9, "repeated": 1, "kept": 8},
        "votes_open.csv": {"votes": 15, "kept": 15},
        "votes_closed.csv": {"votes": 11, "repeated": 1, "kept": 10},
    }
    assert report["counts_in"]["dialogues"] == 19 and report["counts_out"]["dialogues"] == len(source) == 18
    assert report["counts_dropped"] == {"dialogues": 1, "utterances": len(source[9]["conversation"]), "votes": 1}
    assert [d["where"].rsplit("/", 1)[-1] for d in report["dropped"]] == [
        "crs_arena_dial_closed.json[0]",
        "votes_closed.csv:2",
    ]
    parts = {d.conversation_id: d.metadata["part"] for d in read_models(merged / "dialogues.jsonl", Dialogue)}
    assert parts[source[9]["conversation ID"]] == "crs_arena_dial_open.json"
    assert parts[source[10]["conversation ID"]] == "crs_arena_dial_closed.json"


def test_a_different_conversation_under_a_kept_id_is_a_bad_record(tmp_path, capsys):
    first = _arena(tmp_path, [_dialogue("a", "u1", "satisfied")])
    other = _dialogue("a", "u1", "frustrated")
    (tmp_path / "raw" / "closed.json").write_text(json.dumps([other]), encoding="utf-8")
    inputs = [*first, str(tmp_path / "raw" / "closed.json")]
    out = tmp_path / "out"
    assert main(["convert", "crsarena-dial", "--input", *inputs, "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert (
        "closed.json[0]: repeated conversation ID 'a_u1': a different conversation than" in err
        and "dial.json[0]" in err
    )
    assert main(["convert", "crsarena-dial", "--input", *inputs, "--output", str(out), "--skip-bad"]) == 0
    kept = read_models(out / "dialogues.jsonl", Dialogue)
    assert [d.metadata["sentiment"] for d in kept] == ["satisfied"]
    assert json.loads((out / "conversion_report.json").read_text())["parts"]["closed.json"] == {
        "dialogues": 1,
        "dropped": 1,
    }


def test_real_slice(shared_data, tmp_path):
    raw = shared_data / "raw" / "crsarena_dial"
    out = tmp_path / "arena"
    assert (
        main(
            [
                "convert",
                "crsarena-dial",
                "--input",
                str(raw / "crs_arena_dial_open_first2_per_crs.json"),
                str(raw / "votes_open_first25.csv"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    source = json.loads((raw / "crs_arena_dial_open_first2_per_crs.json").read_text(encoding="utf-8"))
    cells = discover_cells(out)
    assert len(cells) == len({d["agent"]["id"] for d in source})
    converted = [d for c in cells for d in read_models(c.run_dir / "dialogues.jsonl", Dialogue)]
    assert sorted(d.conversation_id for d in converted) == sorted(d["conversation ID"] for d in source)
    by_id = {d["conversation ID"]: d["metadata"]["sentiment"] for d in source}
    assert all(d.metadata["reference"]["satisfaction_label"] == by_id[d.conversation_id] for d in converted)
    votes = read_votes(out / "votes.jsonl")
    report = json.loads((out / "conversion_report.json").read_text())
    assert len(votes) == report["counts_in"]["votes"]
    ids = {d.conversation_id for d in converted}
    both = sum(v.conversation_a in ids and v.conversation_b in ids for v in votes)
    assert report["counts_out"]["votes_both_conversations"] == both
    assert sum(
        report["counts_out"][k] for k in ("votes_both_conversations", "votes_one_conversation", "votes_no_conversation")
    ) == len(votes)


def test_votes_not_utf8_is_one_line(tmp_path, capsys):
    inputs = _arena(tmp_path, [_dialogue("a", "u1", "satisfied")], "x")
    (tmp_path / "raw" / "votes.csv").write_bytes(b"session_id,user_id,crs1,crs2,vote\n\xff\xfe,u1,a,b,a\n")
    assert main(["convert", "crsarena-dial", "--input", *inputs, "--output", str(tmp_path / "out")]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    with pytest.raises(DataError, match="not UTF-8"):
        read_votes(tmp_path / "raw" / "votes.csv")
