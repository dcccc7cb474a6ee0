"""Real human-CRS conversations (CRS Arena): nothing there shows acceptance or targets, so nothing says 0."""

from __future__ import annotations

import pandas as pd

from usersimcrs.cli import main
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.jsonl import JsonlWriter

ARENA = "raw/crsarena_dial/crs_arena_dial_open_first2_per_crs.json"


def test_crs_arena_dialogues_have_missing_success_and_unchecked_leakage(shared_data, tmp_path, capsys):
    dialogues = read_dialoguekit(shared_data / ARENA)
    labels = [d.metadata.get("sentiment") for d in dialogues]
    assert "satisfied" in labels  # the humans' own verdicts: a success of 0 would contradict them
    run_dir = tmp_path / "arena"
    run_dir.mkdir()
    with JsonlWriter(run_dir / "dialogues.jsonl") as writer:
        for d in dialogues:
            writer.write(d)
    assert main(["metrics", str(run_dir), "--no-satisfaction"]) == 0
    out = capsys.readouterr().out
    assert "success not measured (n=0)" in out and "success 0.000" not in out
    assert "target_leakage not checked (n=0)" in out
    metrics = pd.read_csv(run_dir / "metrics.csv")
    assert metrics["success"].isna().all() and metrics["accepted_rounds"].isna().all()
    assert metrics["target_leakage"].isna().all()
    assert (metrics["turns"] > 0).all()  # what can be measured still is
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Not measured on any conversation" in html and "success" in html and "not checked" in html
    assert "Transcripts" in html
    assert 'id="table-satisfaction_status"' in html  # says why satisfaction is missing (here: disabled)
