"""Meta-evaluation: statistics with hand-known answers, the pipeline on built runs, the CLI on the real slice."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.conftest import PROJECT_ROOT
from usersimcrs.analysis.battles import Battle
from usersimcrs.analysis.meta_eval import (
    CSV_COLUMNS,
    StatRow,
    auc,
    conversation_stats,
    label_kind,
    pairwise_accuracy,
    system_stats,
)
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.errors import DataError
from usersimcrs.pipeline.meta_eval import meta_eval


def test_auc_perfect_inverted_constant():
    labels = [0, 0, 0, 1, 1, 1]
    assert auc([1, 2, 3, 4, 5, 6], labels) == 1.0
    assert auc([6, 5, 4, 3, 2, 1], labels) == 0.0
    assert auc([3, 3, 3, 3, 3, 3], labels) == 0.5
    assert auc([1, 2], [1, 1]) is None  # one class: not measurable, not 0


def test_conversation_stats_rows_and_ci():
    labels = [0, 1] * 20
    perfect = conversation_stats("s", [float(v) for v in labels], labels, resamples=200, seed=1)
    assert [(r.statistic, r.value, r.n) for r in perfect] == [("auc", 1.0, 40)]
    assert perfect[0].ci_low == perfect[0].ci_high == 1.0
    noisy = conversation_stats("s", list(np.random.default_rng(0).normal(size=40)), labels, resamples=300, seed=1)[0]
    assert noisy.ci_low < noisy.value < noisy.ci_high
    assert any("chance" in c for c in noisy.caveats())
    ordinal = conversation_stats("s", [1, 2, 3, 4, 5], [1, 2, 3, 4, 5], resamples=100)
    assert {r.statistic: r.value for r in ordinal} == {
        "spearman": pytest.approx(1.0),
        "kendall_tau_b": pytest.approx(1.0),
        "qwk": pytest.approx(1.0),
    }
    reversed_ = conversation_stats("s", [5, 4, 3, 2, 1], [1, 2, 3, 4, 5], resamples=100)
    assert {r.statistic: r.value for r in reversed_}["kendall_tau_b"] == pytest.approx(-1.0)
    # a 0-10 score against a 1-5 rating: no kappa (scales differ)
    assert "qwk" not in {r.statistic for r in conversation_stats("s", [0, 10, 3, 7, 9], [1, 2, 3, 4, 5], resamples=0)}
    assert label_kind([0, 1, 1]) == "binary" and label_kind([1, 3, 5]) == "ordinal"


def test_small_n_and_missing_are_flagged():
    row = StatRow(score="s", level="conversation", statistic="auc", value=0.6, ci_low=0.4, ci_high=0.8, n=12)
    assert any("n = 12" in c for c in row.caveats()) and any("spans" in c for c in row.caveats())
    missing = conversation_stats("s", [1.0, 2.0], [1, 1], resamples=10)[0]
    assert missing.value is None and missing.note


def test_pairwise_accuracy():
    human = {"a": 3, "b": 2, "c": 1}
    assert pairwise_accuracy({"a": 30, "b": 20, "c": 10}, human) == 1.0
    assert pairwise_accuracy({"a": 1, "b": 2, "c": 3}, human) == 0.0
    assert pairwise_accuracy({"a": 1, "b": 1, "c": 1}, human) == 0.5  # score ties count half
    assert pairwise_accuracy({"a": 1, "b": 2}, {"a": 1, "b": 1}) is None  # humans order no pair


def _system_table(means, reference_share, n=10, seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for system, mean in means.items():
        share = reference_share[system]
        for i in range(n):
            rows.append(
                {"system": system, "reference": float(i < round(share * n)), "score": mean + rng.normal(0, 0.01)}
            )
    return pd.DataFrame(rows)


def test_system_tau_identical_and_reversed():
    shares = {"a": 0.9, "b": 0.6, "c": 0.3, "d": 0.1}
    same = _system_table({"a": 4, "b": 3, "c": 2, "d": 1}, shares)
    rows, _, _ = system_stats("score", same, resamples=200, seed=0)
    values = {r.statistic: r for r in rows}
    assert values["kendall_tau_b"].value == pytest.approx(1.0) and values["spearman"].value == pytest.approx(1.0)
    assert values["pairwise_accuracy"].value == 1.0 and values["kendall_tau_b"].n == 4
    reversed_ = _system_table({"a": 1, "b": 2, "c": 3, "d": 4}, shares)
    rows, _, _ = system_stats("score", reversed_, resamples=200, seed=0)
    values = {r.statistic: r for r in rows}
    assert values["kendall_tau_b"].value == pytest.approx(-1.0) and values["pairwise_accuracy"].value == 0.0
    assert values["kendall_tau_b"].ci_high <= -0.5


def test_system_level_with_battles():
    battles = (
        [Battle(system_a="a", system_b="b", outcome="a")] * 5
        + [Battle(system_a="b", system_b="c", outcome="a")] * 5
        + [Battle(system_a="a", system_b="c", outcome="tie")] * 1
        + [Battle(system_a="a", system_b="c", outcome="a")] * 4
    )
    table = _system_table({"a": 3, "b": 2, "c": 1}, {"a": 0.1, "b": 0.5, "c": 0.9})  # labels disagree on purpose
    rows, _, human = system_stats("score", table, battles=battles, resamples=100, seed=0)
    assert human["a"] > human["b"] > human["c"]
    assert {r.statistic: r.value for r in rows}["kendall_tau_b"] == pytest.approx(1.0)


def _write_run(folder, dialogues, judgments=()):
    folder.mkdir(parents=True)
    with JsonlWriter(folder / "dialogues.jsonl") as writer:
        for d in dialogues:
            writer.write(d)
    if judgments:
        with JsonlWriter(folder / "judgments.jsonl") as writer:
            for record in judgments:
                writer.write(record)


def _dialogue(cid, crs, n_utterances, satisfied):
    d = Dialogue(conversation_id=cid, agent_id=crs, metadata={"reference": {"satisfied": satisfied}})
    for i in range(n_utterances):
        d.add(Utterance(participant="USER" if i % 2 == 0 else "AGENT", text=f"words {i}"))
    return d


def test_pipeline_on_a_run_with_judge_scores(tmp_path):
    # satisfied conversations are the long ones, so `utterances` separates them perfectly; the judge inverts it
    dialogues, judgments = [], []
    for i in range(40):
        satisfied = i % 2
        crs = "crs_a" if i < 20 else "crs_b"
        dialogues.append(_dialogue(f"c{i}", crs, 6 if satisfied else 2, satisfied))
        judgments.append(
            {
                "conversation_id": f"c{i}",
                "judge": "quality",
                "name": "overall",
                "value": 1 + 4 * (1 - satisfied),
                "scale": [1, 5],
                "status": "ok",
            }
        )
    _write_run(tmp_path / "run", dialogues, judgments)
    result = meta_eval(tmp_path / "run", ["utterances", "quality:overall"], tmp_path / "out", resamples=100)
    conv = {r.score: r.value for r in result.rows if r.level == "conversation" and r.statistic == "auc"}
    assert conv["utterances"] == 1.0 and conv["quality:overall"] == 0.0
    # the baselines stand beside every score: length, assistant words, and the CRS's mean label out of fold
    assert {"conversation length", "assistant words per turn", "CRS identity"} <= set(conv)
    within = {r.score: r for r in result.rows if r.statistic == "within_auc"}
    assert within["utterances"].value == 1.0 and within["quality:overall"].value == 0.0 and within["utterances"].n == 40
    assert within["CRS identity"].value is None and "only the system" in within["CRS identity"].note
    assert result.human_source == "labels" and result.n_labelled == 40
    table = pd.read_csv(tmp_path / "out" / "meta_eval.csv")
    assert list(table.columns) == CSV_COLUMNS
    assert set(table["level"]) == {"conversation", "system"}
    assert (tmp_path / "out" / "report.html").exists()
    # two systems with equal label shares: the system level is not measurable, and says so (never 0)
    system = [r for r in result.rows if r.level == "system" and r.statistic == "kendall_tau_b"]
    assert all(r.value is None and r.note for r in system)
    assert table[(table["level"] == "system") & (table["statistic"] == "kendall_tau_b")]["value"].isna().all()


def test_pipeline_errors_are_one_line(tmp_path, capsys):
    _write_run(tmp_path / "run", [_dialogue("c1", "a", 2, 1)])
    with pytest.raises(DataError, match="unknown score"):
        meta_eval(tmp_path / "run", ["nonsense"], None, resamples=0)
    with pytest.raises(DataError, match="no judge score"):
        meta_eval(tmp_path / "run", ["judge:x"], None, resamples=0)
    plain = Dialogue(conversation_id="p", agent_id="a")
    _write_run(tmp_path / "plain", [plain])
    assert main(["meta-eval", str(tmp_path / "plain"), "--scores", "turns", "--resamples", "0"]) == 2
    assert "no human reference" in capsys.readouterr().err


def test_real_slice_cli(shared_data, tmp_path, capsys):
    raw = shared_data / "raw" / "crsarena_dial"
    corpus = tmp_path / "arena"
    assert (
        main(
            [
                "convert",
                "crsarena-dial",
                "--input",
                str(raw / "crs_arena_dial_open_first2_per_crs.json"),
                str(raw / "votes_open_first25.csv"),
                "--output",
                str(corpus),
            ]
        )
        == 0
    )
    capsys.readouterr()
    out = tmp_path / "me"
    assert (
        main(["meta-eval", str(corpus), "--scores", "satisfaction,turns", "--output", str(out), "--resamples", "200"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| satisfaction | conversation | auc |" in printed and "| turns | system | kendall_tau_b |" in printed
    assert "CIs are wide" in printed  # 18 conversations: the output must say so
    table = pd.read_csv(out / "meta_eval.csv")
    n_dialogues = len(json.loads((raw / "crs_arena_dial_open_first2_per_crs.json").read_text(encoding="utf-8")))
    conv = table[(table["level"] == "conversation") & (table["statistic"] == "auc")]
    assert (conv["n"] == n_dialogues).all() and conv["value"].between(0, 1).all()
    assert {"conversation length", "assistant words per turn", "CRS identity"} <= set(conv["score"])
    # 2 conversations per CRS: no CRS has the 3 a within-CRS AUC needs; not measured, never 0
    within = table[table["statistic"] == "within_auc"]
    assert len(within) == len(conv) and within["value"].isna().all()
    assert (out / "human_ranking.csv").exists() and (out / "plots" / "system_scatter.png").exists()


def test_outside_references_judgments_and_label_ranking(tmp_path):
    # no metadata.reference: the references come from a CSV, the judge scores from an outside file
    dialogues = [_dialogue(f"c{i}", f"crs_{i % 3}", 2 + i % 3 * 2, 0) for i in range(30)]
    for d in dialogues:
        d.metadata = {}
    _write_run(tmp_path / "run", dialogues)
    pd.DataFrame(
        {"conversation_id": [f"c{i}" for i in range(30)], "name": "rating", "value": [1 + i % 3 * 2 for i in range(30)]}
    ).to_csv(tmp_path / "ref.csv", index=False)
    with JsonlWriter(tmp_path / "outside.jsonl") as writer:
        for i in range(30):
            writer.write(
                {
                    "conversation_id": f"c{i}",
                    "judge": "ext",
                    "name": "overall",
                    "value": 5 - i % 3 * 2,
                    "scale": [1, 5],
                    "status": "ok",
                }
            )
    result = meta_eval(
        tmp_path / "run",
        ["utterances", "ext:overall"],
        None,
        reference_csv=tmp_path / "ref.csv",
        judgments=[tmp_path / "outside.jsonl"],
        resamples=50,
    )
    assert result.reference_key == "rating" and result.reference_kind == "ordinal" and result.human_source == "labels"
    values = {(r.score, r.level, r.statistic): r.value for r in result.rows}
    assert values[("utterances", "conversation", "kendall_tau_b")] == pytest.approx(1.0)
    assert values[("ext:overall", "conversation", "kendall_tau_b")] == pytest.approx(-1.0)
    assert values[("ext:overall", "conversation", "qwk")] is not None  # both on 1-5 integers
    assert ("utterances", "conversation", "qwk") not in values  # utterances 2-6 leave the 1-5 scale
    assert values[("utterances", "system", "kendall_tau_b")] == pytest.approx(1.0)
    assert values[("ext:overall", "system", "pairwise_accuracy")] == 0.0


def test_left_out_conversations_are_counted_printed_and_written(tmp_path, capsys):
    """Issue 33: meta-eval reported '3089 of 3089' after leaving out 1,111 failed conversations."""
    dialogues = [_dialogue(f"c{i}", "crs_a" if i < 10 else "crs_b", 2 + 2 * (i % 2), i % 2) for i in range(20)]
    for d in dialogues[:3]:
        d.status, d.error = "failed", "ConnectorError: timeout"
    _write_run(tmp_path / "run", dialogues)
    code = main(["meta-eval", str(tmp_path / "run"), "--scores", "utterances", "-o", str(tmp_path / "out")])
    assert code == 0
    out = capsys.readouterr().out
    assert "on 17 of 17 conversations" in out
    assert "left out 3 of 20 conversations: run: 3 of 20 failed (status failed: an error ended it)" in out
    written = pd.read_csv(tmp_path / "out" / "left_out.csv")
    assert written.to_dict("records") == [
        {"source": "run", "reason": "failed (status failed: an error ended it)", "conversations": 3, "of": 20}
    ]
    assert "Left out 3 of 20 conversations" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_an_empty_studio_export_says_no_conversations_were_exported_yet(tmp_path, capsys):
    study = PROJECT_ROOT / "configs" / "studio_example.yaml"
    export = tmp_path / "export"
    assert main(["studio", str(study), "--export", str(export), "--output", str(tmp_path / "study")]) == 0
    capsys.readouterr()
    assert main(["meta-eval", str(export), "--scores", "turns"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no conversations exported yet" in err[0], err
