"""`usersimcrs agreement` and the matrix comparison tables on small hand-made inputs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from usersimcrs.analysis.compare import compare, holm
from usersimcrs.cli import main

JUDGE = {"c1": [4, 3], "c2": [2, 2], "c3": [3, 4], "c4": [1, 1], "c5": [4, 4], "c6": [2, 3]}
HUMAN_A = {"c1": [4, 3], "c2": [2, 1], "c3": [3, 4], "c4": [2, 1], "c5": [4, 4], "c6": [3, 3]}
HUMAN_B = {"c1": [4, 4], "c2": [2, 1], "c3": [3, 3], "c4": [2, 2], "c5": [4, 4], "c6": [3, 3]}
NAMES = ["coherence", "novelty"]


def _write(tmp_path):
    with (tmp_path / "judgments.jsonl").open("w") as handle:
        for cid, values in JUDGE.items():
            for name, value in zip(NAMES, values):
                handle.write(
                    json.dumps(
                        {
                            "conversation_id": cid,
                            "judge": "core12",
                            "name": name,
                            "value": value,
                            "scale": [0, 4],
                            "status": "ok",
                            "model": "m",
                            "rationale": "",
                        }
                    )
                    + "\n"
                )
        handle.write(
            json.dumps(
                {
                    "conversation_id": "c1",
                    "judge": "quality",
                    "name": "fluency",
                    "value": 5,
                    "scale": [1, 5],
                    "status": "ok",
                    "model": "m",
                    "rationale": "",
                }
            )
            + "\n"
        )
    rows = [
        {"conversation_id": cid, "rater": rater, "name": name, "value": value}
        for rater, table in (("a", HUMAN_A), ("b", HUMAN_B))
        for cid, values in table.items()
        for name, value in zip(NAMES, values)
    ]
    pd.DataFrame(rows).to_csv(tmp_path / "human.csv", index=False)


def test_agreement_command_matches_reference_implementations(tmp_path, capsys):
    _write(tmp_path)
    code = main(
        [
            "agreement",
            "--judgments",
            str(tmp_path / "judgments.jsonl"),
            "--reference",
            str(tmp_path / "human.csv"),
            "--judge",
            "core12",
            "--output",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    table = pd.read_csv(tmp_path / "out" / "agreement.csv").set_index("name")
    judge = [JUDGE[c][0] for c in JUDGE]
    human = [(HUMAN_A[c][0] + HUMAN_B[c][0]) / 2 for c in JUDGE]  # raters averaged
    assert table.loc["coherence", "kendall_tau_b"] == pytest.approx(
        stats.kendalltau(judge, human, variant="b").statistic
    )
    assert table.loc["coherence", "spearman_r"] == pytest.approx(stats.spearmanr(judge, human).statistic)
    rounded = list(np.rint(human).astype(int))
    assert table.loc["coherence", "qwk"] == pytest.approx(cohen_kappa_score(judge, rounded, weights="quadratic"))
    assert table.loc["coherence", "raters"] == 2
    assert table.loc["novelty", "percent_agreement"] == pytest.approx(
        np.mean(np.array([JUDGE[c][1] for c in JUDGE]) == np.rint([(HUMAN_A[c][1] + HUMAN_B[c][1]) / 2 for c in JUDGE]))
    )
    assert "total" in table.index
    assert "mean |tau-b| between factors" in capsys.readouterr().out


def test_agreement_reports_missing_names_in_one_line(tmp_path, capsys):
    _write(tmp_path)
    pd.DataFrame({"conversation_id": ["c1"], "fluency_x": [3]}).to_csv(tmp_path / "wide.csv", index=False)
    assert (
        main(["agreement", "--judgments", str(tmp_path / "judgments.jsonl"), "--reference", str(tmp_path / "wide.csv")])
        == 2
    )
    assert "no aspect names in common" in capsys.readouterr().err


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, float("nan")])[0] == pytest.approx(0.5)


def test_compare_pairs_users_across_crs_and_ranks_them():
    rows = []
    for sim in ("s1", "s2"):
        for crs, shift in (("good", 0.3), ("bad", 0.0), ("mid", 0.1)):
            for i in range(6):
                rows.append(
                    {
                        "dataset": "d",
                        "simulator": sim,
                        "crs": crs,
                        "index": i,
                        "user_id": f"u{i}",
                        "conversation_id": f"{sim}-{crs}-{i}",
                        "valid": True,
                        "score": 0.1 * i + shift + (0.05 if sim == "s2" and crs == "bad" else 0),
                    }
                )
    table = pd.DataFrame(rows)
    result = compare(table, ["score"], n_resamples=1000)
    ranks = result.ranks.set_index(["simulator", "crs"])["rank"]
    assert ranks[("s1", "good")] == 1 and ranks[("s1", "bad")] == 3
    # cells of n=6: the agreement figure is withheld, with the reason
    assert result.agreement.loc[0, "withheld"] and "n<10" in result.agreement.loc[0, "note"]
    assert pd.isna(result.agreement.loc[0, "kendall_tau_b"]) and result.agreement.loc[0, "min_cell_n"] == 6
    relaxed = compare(table, ["score"], n_resamples=1000, min_n=5)
    assert relaxed.agreement.loc[0, "kendall_tau_b"] == pytest.approx(1.0) and not relaxed.agreement.loc[0, "withheld"]
    sig = result.significance.set_index(["simulator", "crs_a", "crs_b", "test"])
    # good - bad = 0.3 for every paired user: all 64 sign flips, only the two extreme ones reach |0.3|
    assert sig.loc[("s1", "bad", "good", "permutation"), "mean_difference"] == pytest.approx(-0.3)
    assert sig.loc[("s1", "bad", "good", "permutation"), "p_value"] == pytest.approx(2 / 64)
    assert sig.loc[("s1", "bad", "good", "permutation"), "n_pairs"] == 6


def test_stability_over_repeated_judge_runs(tmp_path, capsys):
    _write(tmp_path)
    second = tmp_path / "second.jsonl"
    with second.open("w") as handle:
        for cid, values in JUDGE.items():
            for name, value in zip(NAMES, values):
                bumped = value + 1 if cid == "c1" else value  # c1 scored one point higher on both factors
                handle.write(
                    json.dumps(
                        {
                            "conversation_id": cid,
                            "judge": "core12",
                            "name": name,
                            "value": bumped,
                            "scale": [0, 4],
                            "status": "ok",
                            "model": "m",
                            "rationale": "",
                        }
                    )
                    + "\n"
                )
    assert (
        main(
            [
                "agreement",
                "--judgments",
                str(tmp_path / "judgments.jsonl"),
                "--repeat",
                str(second),
                "--judge",
                "core12",
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    table = pd.read_csv(tmp_path / "out" / "stability.csv").set_index("factor")
    one = np.std([0, 1], ddof=1)
    assert table.loc["coherence", "std"] == pytest.approx(one / 6)  # only 1 of 6 conversations moved
    assert table.loc["total", "std"] == pytest.approx(np.std([0, 2], ddof=1) / 6)
    assert table.loc["total", "repeats"] == 2
    assert main(["agreement", "--judgments", str(tmp_path / "judgments.jsonl")]) == 2
