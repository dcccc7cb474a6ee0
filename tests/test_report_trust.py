"""The report tells what went wrong: failure reasons, transcripts, judgments of crashed runs, honest matrix cells."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.metrics_fixtures import dialogue, ref, write_run
from usersimcrs.analysis.compare import compare
from usersimcrs.analysis.failures import failure_reason
from usersimcrs.analysis.ranking import ranking_notes
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import JsonlWriter, read_models
from usersimcrs.report.matrix_report import wide_means, wide_ranks
from usersimcrs.report.sections import failure_reasons, pick_transcripts, transcript_table


def _failed(cid: str, index: int, error: str | None) -> Dialogue:
    d = dialogue(cid, [], [[ref("1")]], status="failed", end_reason="error")
    d.index, d.error = index, error
    return d


def _rewrite(run_dir, change) -> None:
    dialogues = read_models(run_dir / "dialogues.jsonl", Dialogue)
    for d in dialogues:
        change(d)
    (run_dir / "dialogues.jsonl").unlink()  # the writer appends
    with JsonlWriter(run_dir / "dialogues.jsonl") as writer:
        for d in dialogues:
            writer.write(d)


def test_failure_reasons_group_errors_without_their_volatile_parts():
    dialogues = [
        _failed("c3", 3, "ConnectorError: timeout after 30.5 s (http://crs:8000/chat?id=7)"),
        _failed("c1", 1, "ConnectorError: timeout after 12 s (http://localhost:9/x)"),
        _failed("c2", 2, "LLMError: llamacpp: HTTP 500 'model gemma3 not loaded'"),
        _failed("c0", 0, "ConnectorError: timeout after 5 s (https://a.b/c)"),
        _failed("c4", 4, None),
        dialogue("ok", [], [[ref("1")]]),  # not failed: never a reason
    ]
    table = failure_reasons(dialogues, examples=2)
    assert list(table["count"]) == [3, 1, 1]
    top = table.iloc[0]
    assert top["reason"] == failure_reason("ConnectorError: timeout after 1 s (http://z)")
    assert "<url>" in top["reason"] and "30.5" not in top["reason"]
    assert top["examples"] == "c0, c1"  # first by index, not by file order
    assert set(table["reason"]) >= {"(no error recorded)"}
    assert failure_reason("id 03368a16-93bd-4b21-885d-b9a21e3498ba gone") == failure_reason("id 12983dfe-96a9 gone")


def test_run_report_shows_failure_reasons_and_escaped_transcripts(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, n=6)

    def change(d: Dialogue) -> None:
        if d.index == 0:
            d.utterances[0].text = "<script>alert('x')</script> & more"
            d.utterances[1].items[0].title = "<b>Bold</b> (1995)"
        if d.index in (3, 4):
            d.status, d.error = (
                "failed",
                f"ConnectorError: HTTP 503 from http://crs:{8000 + d.index}/ (after {d.index} attempts)",
            )

    _rewrite(run_dir, change)
    assert main(["metrics", str(run_dir), "--no-satisfaction"]) == 0
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    reasons = pd.read_csv(run_dir / "report" / "tables" / "failure_reasons.csv")
    by_reason = reasons.set_index("reason")["count"]
    assert by_reason[failure_reason("ConnectorError: HTTP 503 from http://crs:8003/ (after 3 attempts)")] == 2
    assert by_reason[failure_reason("ConnectorError: timeout")] == 1  # write_run's last conversation
    assert "target_biased__popularity-00003, target_biased__popularity-00004" in html
    assert "Transcripts" in html
    assert "&lt;script&gt;alert('x')&lt;/script&gt; &amp; more" in html
    assert "<script" not in html and "<b>Bold" not in html and "&lt;b&gt;Bold&lt;/b&gt; (1995)" in html
    assert "error: ConnectorError: HTTP 503" in html  # the failed transcript says why it ended


def test_transcripts_are_chosen_deterministically_valid_first_then_failed_then_flagged():
    dialogues = [dialogue(f"d{i}", [], [[ref("1")], [ref("2")]], user_acts=[[], ["ACCEPT"]]) for i in range(6)]
    for i, d in enumerate(reversed(dialogues)):
        d.index = 5 - i
    flags = pd.DataFrame(
        {
            "conversation_id": [f"d{i}" for i in range(6)],
            "failed": [False, False, False, False, True, False],
            "too_short": [False] * 6,
            "repetition_loop": [False, True, False, True, False, False],
            "target_leakage": [None] * 6,
            "truncated_by_turn_limit": [True] + [False] * 5,
            "valid": [True, False, True, False, False, True],
        }
    )
    dialogues[4].status = "failed"
    picked = pick_transcripts(list(reversed(dialogues)), flags, valid=2, other=2)
    assert [(d.conversation_id, label.split(",")[0]) for d, label in picked] == [
        ("d0", "valid"),
        ("d2", "valid"),
        ("d4", "invalid"),
        ("d1", "invalid"),
    ]
    assert picked[0][1] == "valid, flags: truncated_by_turn_limit"
    assert picked[3][1] == "invalid, flags: repetition_loop"
    table = transcript_table(dialogues[0])
    assert list(table["speaker"]) == ["USER", "AGENT", "USER", "AGENT"]
    assert table.loc[1, "recommended"] == "Heat (1995)" and table.loc[0, "recommended"] == ""


def test_a_crashed_run_still_shows_its_judgments_marked_invalid(tmp_path):
    run_dir = tmp_path / "crashed"
    write_run(run_dir, n=5)

    def crash(d: Dialogue) -> None:
        d.status, d.error = "failed", "RuntimeError: CRS process died (exit code 137)"

    _rewrite(run_dir, crash)
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="table-judge_scores"' in html
    assert "INVALID conversations" in html and "Judge scores on invalid conversations." in html
    assert "on 4 invalid conversations" in html
    reasons = pd.read_csv(run_dir / "report" / "tables" / "failure_reasons.csv")
    assert reasons["count"].tolist() == [5]


def test_a_healthy_run_keeps_judgments_on_the_conversations_the_crs_took_part_in(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir, n=5)
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "Judge scores on conversations the CRS took part in." in html and "INVALID conversations" not in html


def _table(cells: dict[tuple[str, str], list[float]]) -> pd.DataFrame:
    rows = []
    for (simulator, crs), values in cells.items():
        for i, v in enumerate(values):
            rows.append(
                {
                    "dataset": "ml",
                    "simulator": simulator,
                    "crs": crs,
                    "conversation_id": f"{simulator}-{crs}-{i}",
                    "index": i,
                    "user_id": f"u{i}",
                    "valid": True,
                    "success": v,
                }
            )
    return pd.DataFrame(rows)


def test_compare_never_lists_a_cell_that_was_not_run_and_marks_small_cells():
    table = _table(
        {("sim_a", "pop"): [1, 0, 1, 1, 0], ("sim_a", "bm25"): [0, 0, 1, 0, 0], ("sim_b", "pop"): [1, 1, 1, 0, 1]}
    )  # (sim_b, bm25) was never run
    comparison = compare(table, ["success"], n_resamples=200)
    listed = set(zip(comparison.means["simulator"], comparison.means["crs"]))
    assert listed == {("sim_a", "pop"), ("sim_a", "bm25"), ("sim_b", "pop")}
    assert set(zip(comparison.ranks["simulator"], comparison.ranks["crs"])) == listed
    assert comparison.means["n"].tolist() == [5, 5, 5]
    assert all("n<10" in note for note in comparison.means["note"]) and comparison.ranks["uncertain"].all()
    means = wide_means(comparison)
    assert len(means) == 3 and not means.isna().any().any()
    assert set(means["success"]) >= {"0.200 (n=5)"}  # no star: a mark means a Holm-significant difference only
    ranks = wide_ranks(comparison).set_index("crs")
    assert ranks.loc["bm25", "sim_b"] == "not run"
    assert ranks.loc["pop", "sim_a"].startswith("1 (n<10")


def test_a_cell_without_valid_conversations_is_listed_with_n_0():
    table = _table({("sim_a", "pop"): [1.0] * 12, ("sim_a", "bm25"): [0.0] * 12})
    table.loc[table["crs"] == "bm25", "valid"] = False
    comparison = compare(table, ["success"], subset="valid", n_resamples=200).means.set_index("crs")
    assert comparison.loc["bm25", "n"] == 0 and pd.isna(comparison.loc["bm25", "mean"])
    assert comparison.loc["pop", "n"] == 12 and comparison.loc["pop", "note"] == ""


def test_ranks_with_overlapping_intervals_are_flagged_and_clear_ones_are_not():
    clear = _table({("s", "a"): [1.0] * 12, ("s", "b"): [0.0] * 12, ("s", "c"): [0.0, 1.0] * 6})
    notes = compare(clear, ["success"], n_resamples=200).ranks.set_index("crs")["note"]
    assert notes["a"] == "" and notes["b"] == ""  # a: CI [1, 1]; b: [0, 0]; c sits between them
    assert notes["c"] == ""
    close = _table({("s", "a"): [1.0, 0.0] * 6, ("s", "b"): [1.0, 0.0, 0.0] * 4})
    notes = compare(close, ["success"], n_resamples=200).ranks.set_index("crs")["note"]
    assert notes["a"] == "CI overlaps next" and notes["b"] == "CI overlaps previous"


def test_ranking_notes_follow_the_direction_of_the_metric():
    stats = pd.DataFrame(
        {"n": [20, 20, 3], "mean": [5.0, 2.0, 1.0], "ci_low": [4.0, 1.5, 0.0], "ci_high": [6.0, 2.5, 1.6]},
        index=["x", "y", "z"],
    )
    notes = ranking_notes(stats, higher_is_better=True)
    assert notes == {"x": "", "y": "CI overlaps next", "z": "n<10; CI overlaps previous"}
    lower = ranking_notes(stats, higher_is_better=False)  # z first, then y, then x
    assert lower["z"] == "n<10; CI overlaps next" and lower["x"] == ""


@pytest.mark.parametrize("drop", ["target_free__retrieval__ml"])
def test_matrix_report_leaves_out_missing_cells(tmp_path, capsys, drop):
    matrix = tmp_path / "matrix"
    for sim in ("target_biased", "target_free"):
        for crs in ("popularity", "retrieval"):
            name = f"{sim}__{crs}__ml"
            if name != drop:
                write_run(matrix / "cells" / name, crs=crs, simulator=sim, n=5, name=name, judged=False)
    capsys.readouterr()
    assert main(["compare", str(matrix), "--resamples", "200"]) == 0
    assert "ranks are uncertain" in capsys.readouterr().out
    means = pd.read_csv(matrix / "comparison" / "means.csv")
    assert not ((means["simulator"] == "target_free") & (means["crs"] == "retrieval")).any()
    assert means["note"].str.contains("n<10").all()
    assert main(["report", str(matrix)]) == 0
    html = (matrix / "report.html").read_text(encoding="utf-8")
    assert "ranks are uncertain" in html and "not run" in html
    assert "failure_reasons" in html
