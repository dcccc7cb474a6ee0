"""`usersimcrs import FILE... --matrix DIR`: many exports as one matrix that meta-eval and fidelity read,
and `meta-eval --human votes` on a matrix whose conversations carry no per-conversation reference."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.import_support import arena_exports, arena_labels_csv, arena_votes
from usersimcrs.cli import main
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.pipeline.meta_eval import meta_eval


def _agents(files: list[Path]) -> list[str]:
    return [json.loads(f.read_text())[0]["agent"]["id"] for f in files]


def test_many_exports_become_one_matrix_that_meta_eval_and_fidelity_read(shared_data, tmp_path, capsys):
    files = arena_exports(shared_data, tmp_path / "exports")
    matrix = tmp_path / "matrix"
    assert main(["import", *map(str, files), "--matrix", str(matrix)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(files) + 1
    assert out[-1] == f"{matrix}: 9 cells from 9 files, 18 of 18 dialogues imported (0 failed); matrix.json written"
    cells = MatrixFolder(matrix).cells()
    assert [(c.simulator, c.crs, c.dataset) for c in cells] == [("ABUS_ReDial", a, "imported") for a in _agents(files)]
    index = json.loads((matrix / "matrix.json").read_text())
    assert index["source"] == "import" and [c["source_file"] for c in index["cells"]] == [str(f) for f in files]
    for cell, file in zip(cells, files):
        manifest = cell.folder.read_manifest()
        assert (
            manifest["config"]["crs"]["type"] == cell.crs and manifest["config"]["simulator"]["type"] == "ABUS_ReDial"
        )
        assert json.loads(cell.folder.import_report_path.read_text())["dialogues_file"] == str(file)
        assert len(list(iter_jsonl(cell.folder.dialogues_path))) == 2

    # meta-eval reads the matrix as it is (labels from outside), one system per imported CRS
    labels = arena_labels_csv(shared_data, tmp_path / "labels.csv")
    me = tmp_path / "me"
    args = ["--scores", "turns", "--reference", str(labels), "--resamples", "20", "--no-report", "-o", str(me)]
    assert main(["meta-eval", str(matrix), *args]) == 0
    table = pd.read_csv(me / "meta_eval.csv")
    conversation = table[(table["level"] == "conversation") & (table["statistic"] == "auc")]
    assert set(conversation["n"]) == {18}
    assert set(table.loc[table["level"] == "system", "n"]) == {9}

    # fidelity compares every imported cell with the human conversations
    human = tmp_path / "human"
    raw = shared_data / "raw" / "crsarena_dial" / "crs_arena_dial_open_first2_per_crs.json"
    assert main(["convert", "crsarena-dial", "-i", str(raw), "-o", str(human)]) == 0
    fid = tmp_path / "fid"
    assert main(["fidelity", str(matrix), str(human), "--resamples", "20", "--no-report", "-o", str(fid)]) == 0
    fidelity = pd.read_csv(fid / "fidelity.csv")
    # beside the cells, the context baselines (two human populations) that every AUC is read against
    context = fidelity["simulator"].str.startswith("context: ")
    assert set(fidelity.loc[~context, "simulator"]) == {c.name for c in cells}
    assert context.any()
    fidelity = fidelity[~context]
    auc = fidelity[fidelity["statistic"] == "discriminator_auc"]
    assert len(auc) == 9 and set(auc["n_simulated"]) == {2} and set(auc["n_human"]) == {18}

    # names from the options; --overwrite replaces the imported cells (none of the old ones is left)
    capsys.readouterr()
    args = ["import", *map(str, files[:2]), "--matrix", str(matrix), "--simulator", "abus", "--dataset", "redial"]
    assert main(args) == 2
    assert "already holds a matrix; pass --overwrite" in capsys.readouterr().err
    assert main([*args, "--overwrite"]) == 0
    assert [(c.simulator, c.dataset) for c in MatrixFolder(matrix).cells()] == [("abus", "redial")] * 2
    assert sorted(p.name for p in (matrix / "cells").iterdir()) == sorted(c.name for c in MatrixFolder(matrix).cells())


def _export(cid: str, agent: str, text: str = "hi", user: str = "SP-LLMUS") -> dict:
    return {
        "conversation_id": cid,
        "agent": {"id": agent, "type": "AGENT"},
        "user": {"id": user, "type": "USER"},
        "conversation": [
            {"participant": "USER", "utterance": text},
            {"participant": "AGENT", "utterance": f"re: {text}"},
        ],
    }


def _write(path: Path, data) -> str:
    path.write_text(json.dumps(data))
    return str(path)


def test_ids_repeated_across_files_stay_unique_over_the_matrix(tmp_path, capsys):
    # the anchor builds IDs from second-resolution timestamps: two runs at the same second share one
    first = _write(tmp_path / "kbrd.json", [_export("20240101-120000", "KBRD"), _export("20240101-120001", "KBRD")])
    second = _write(tmp_path / "movie.json", [_export("20240101-120000", "IAI MovieBot", "other")])
    judge = {"IAI MovieBot": {"fluency": [{"conversation_id": "x", "score": 4, "score_explanation": "ok"}]}}
    judged = _write(tmp_path / "judge.json", judge)
    matrix = tmp_path / "matrix"
    args = ["import", first, second, "--matrix", str(matrix)]
    assert main([*args, "--judgments", judged]) == 2
    assert "one judge file per dialogues file" in capsys.readouterr().err
    assert main([*args, "--on-duplicate", "fail"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{second}: conversation_id '20240101-120000'" in err and f"{first}[0]" in err
    none = _write(tmp_path / "none.json", {})
    assert main([*args, "--judgments", none, "--judgments", judged, "--join-by", "position"]) == 0
    assert "2 cells from 2 files, 3 of 3 dialogues imported" in capsys.readouterr().out
    kbrd, moviebot = MatrixFolder(matrix).cells()
    assert (kbrd.name, moviebot.name) == ("SP-LLMUS__KBRD__imported", "SP-LLMUS__IAI-MovieBot__imported")
    moved = list(iter_jsonl(moviebot.folder.dialogues_path))
    assert [(d["conversation_id"], d["metadata"]["source_conversation_id"]) for d in moved] == [
        ("20240101-120000~2", "20240101-120000")
    ]
    assert [j["conversation_id"] for j in iter_jsonl(moviebot.folder.judgments_path)] == ["20240101-120000~2"]
    assert not kbrd.folder.judgments_path.exists()
    report = json.loads(moviebot.folder.import_report_path.read_text())
    assert report["duplicates"]["renamed"] == [
        {"old": "20240101-120000", "new": "20240101-120000~2", "position": 0, "exact_duplicate": False}
    ]


def test_what_cannot_be_one_matrix_is_one_line(tmp_path, capsys):
    a = _write(tmp_path / "a.json", [_export("a1", "KBRD")])
    b = _write(tmp_path / "b.json", [_export("b1", "KBRD")])
    mixed = _write(tmp_path / "mixed.json", [_export("m1", "KBRD"), _export("m2", "BARCOR")])
    matrix = str(tmp_path / "matrix")
    cases = [
        (["import", a, b, "--output", str(tmp_path / "run")], "2 files given with --output; pass --matrix DIR"),
        (["import", a, b, "--matrix", matrix], f"{a} and {b} both make cell SP-LLMUS__KBRD__imported"),
        (["import", mixed, "--matrix", matrix], f"{mixed}: dialogues of 2 CRSs (BARCOR, KBRD); pass --crs NAME"),
        (["import", a, "--matrix", matrix, "--crs", "my__crs"], "--crs 'my__crs': use letters"),
        (["import", a, "--output", str(tmp_path / "run"), "--dataset", "x"], "--dataset names the cells of a matrix"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, (argv, err)
    assert not (tmp_path / "matrix").exists() and not (tmp_path / "run").exists()
    # a simulated matrix is never replaced by an import
    simulated = tmp_path / "simulated"
    (simulated / "cells" / "agenda__retrieval__ml").mkdir(parents=True)
    assert main(["import", a, "--matrix", str(simulated), "--overwrite"]) == 2
    assert "holds a simulated matrix" in capsys.readouterr().err


def test_meta_eval_votes_on_a_matrix_without_references_is_system_level(shared_data, tmp_path, capsys):
    matrix = tmp_path / "matrix"
    assert main(["import", *map(str, arena_exports(shared_data, tmp_path / "exports")), "--matrix", str(matrix)]) == 0
    votes = arena_votes(shared_data)
    capsys.readouterr()
    out = tmp_path / "me"
    args = ["--scores", "turns,utterances", "--votes", str(votes), "--resamples", "20", "-o", str(out)]
    assert main(["meta-eval", str(matrix), *args, "--human", "votes"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("no per-conversation reference on the 18 conversations: conversation level not checked")
    assert "human ranking (Bradley-Terry from 25 votes" in printed
    table = pd.read_csv(out / "meta_eval.csv")
    assert set(table["level"]) == {"system"} and set(table["n"]) == {9}
    # turns, utterances and the two baselines that need no reference (length, assistant words): 3 figures each
    assert len(table) == 12 and table["value"].notna().all()
    assert "conversation level not checked" in (out / "report.html").read_text()
    result = meta_eval(matrix, ["turns"], votes=votes, human="votes", resamples=0)
    assert (result.reference_key, result.reference_kind, result.human_source) == (None, None, "votes")
    # the labels cannot rank systems that carry none: one line, which names the way out
    assert main(["meta-eval", str(matrix), *args, "--human", "labels"]) == 2
    assert "give pairwise votes (--votes FILE)" in capsys.readouterr().err
