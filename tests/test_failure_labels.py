"""Failure labels that agree: an *error* is a conversation the run recorded an error on (any side), a
*CRS failure* one that counts against the CRS (its errors, loops and empty replies). The console,
metrics.csv and the reports use the same words, with the breakdown beside the total, so a run whose
CRS looped reads "errors 0" and "CRS failures 4 (0 errors, 4 loops, 0 empty replies)", never
"failed 0" beside "CRS failures 4" (or "CRS failures 40%" beside "crs_failed 0%")."""

from __future__ import annotations

import html
import json
import re

import pandas as pd

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.cli import main
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.metrics.validity import ValidityOptions, crs_failure_text, flag_conversations
from usersimcrs.report.matrix_report import cells_table

LOOP = ["What kind of movies do you like?"] * 3


def _dialogues():
    """6 good conversations, 3 in which the CRS looped, 1 that ended in a CRS error."""
    out = []
    for i in range(10):
        lists = [[ref("5")], [ref("6")], [ref("1")]]
        d = dialogue(f"c{i}", ["1"], lists, agent_texts=LOOP if 6 <= i < 9 else None)
        d.index = i
        if i == 9:
            d.status, d.error, d.end_reason = "failed", "ConnectorError: HTTP 500", "error"
            d.metadata["failure_side"] = "crs"
        out.append(d)
    return out


def _plain(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def test_console_csv_and_report_use_the_same_words(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with JsonlWriter(run / "dialogues.jsonl") as writer:
        for d in _dialogues():
            writer.write(d)
    (run / "manifest.json").write_text(json.dumps({"name": "loops", "config": {"max_turns": 3}}))
    assert main(["metrics", str(run), "--no-satisfaction"]) == 0
    headline = capsys.readouterr().out.splitlines()[0]
    assert "errors 10.0% (any side)" in headline
    assert "CRS failures 40.0% (1 error, 3 loops, 0 empty replies; counted against it)" in headline
    assert " failed " not in headline

    table = pd.read_csv(run / "metrics.csv")
    assert {"error", "crs_error", "simulator_error", "toolkit_error"} <= set(table.columns)
    assert not {"failed", "crs_failed"} & set(table.columns)
    assert table["error"].sum() == 1 and table["crs_error"].sum() == 1
    assert table["repetition_loop"].sum() == 3 and table["crs_failure"].sum() == 4

    assert main(["report", str(run)]) == 0
    page = _plain((run / "report.html").read_text(encoding="utf-8"))
    assert "errors (any side) 1 " in page
    assert "CRS failures (counted against it) 4 (1 error, 3 loops, 0 empty replies)" in page
    assert "failed 1 " not in page and "failed 0 " not in page


def test_the_matrix_cell_table_breaks_the_crs_failures_down_in_the_same_words():
    flags = flag_conversations(_dialogues()).assign(dataset="d", simulator="s", crs="c")
    row = cells_table(flags).iloc[0]
    assert row["CRS failures"] == 4
    assert (row["of them errors"], row["of them loops"], row["of them empty replies"]) == (1, 3, 0)
    assert crs_failure_text(flags) == "1 error, 3 loops, 0 empty replies"


def test_configs_with_the_old_flag_names_still_read():
    options = ValidityOptions(invalidating=["failed", "too_short"], excluding=["simulator_failed", "toolkit_failed"])
    assert options.invalidating == ["error", "too_short"]
    assert options.excluding == ["simulator_error", "toolkit_error"]
