"""`usersimcrs ladder`: the simulator against the reference CRSs, ladder.json and report.html as the issue says."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.core.run_folder import load_run

ROOT = Path(__file__).resolve().parents[1]
RUNGS = ["oracle", "oracle_mix30", "oracle_mix70", "random", "broken"]


def run_config(folder: Path, **changes) -> Path:
    """The 40-movie sample, the default agenda user, two user turns at most (so every conversation has
    exactly two user turns: a length blind to the CRS)."""
    config = {
        "name": "tiny",
        "seed": 7,
        "conversations": 5,
        "concurrency": 4,
        "max_turns": 2,
        "items": {
            "path": str(ROOT / "configs/data/tiny_movies.csv"),
            "mapping": {"genres": "genres", "keywords": "keywords"},
            "delimiters": {"genres": "|", "keywords": "|"},
        },
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv"), "scale": [0.5, 5.0]},
        "profiles": {"source": "generate", "constraint_slots": ["genres"]},
        "simulator": {"type": "agenda"},
        "crs": {"type": "retrieval"},
        **changes,
    }
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def ladder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ladder")
    config = run_config(folder)
    args = ["ladder", str(config), "--output", str(folder / "out"), "--conversations", "30", "--no-progress"]
    assert main([*args, "--metrics", "success,user_turns,recall@10"]) == 0
    return folder


def test_ladder_json_holds_the_rungs_means_tau_pairs_and_power(ladder):
    data = json.loads((ladder / "out" / "ladder.json").read_text())
    assert data["rungs"] == RUNGS and data["conversations_per_rung"] == 30
    assert list(data["scores"]) == ["success", "user_turns", "recall@10"]
    success = data["scores"]["success"]
    assert list(success["means"]) == RUNGS
    assert all(m["n"] == 30 and m["ci_low"] <= m["mean"] <= m["ci_high"] for m in success["means"].values())
    means = [success["means"][r]["mean"] for r in RUNGS]
    assert means[0] == 1.0 and means[0] - means[3] >= 0.5  # the oracle's items are accepted, random ones rarely
    tau = success["kendall_tau"]
    assert tau["value"] >= 0.8 and tau["ci_low"] <= tau["value"] <= tau["ci_high"]
    assert success["verdict"] == "orders the ladder"
    assert [(p["better"], p["worse"]) for p in success["pairs"]] == list(zip(RUNGS, RUNGS[1:]))
    for pair in success["pairs"]:
        assert pair["n_pairs"] == 30
        assert pair["ci_low"] <= pair["difference"] <= pair["ci_high"]
        assert pair["n_for_80_power"] is not None or pair["power_notes"]
    big = success["pairs"][0]  # oracle - oracle_mix30 with one round: a large difference, a small n
    assert big["difference"] > 0.3 and big["n_for_80_power"] < 30


def test_a_score_blind_to_the_recommendations_does_not_order_the_ladder(ladder):
    data = json.loads((ladder / "out" / "ladder.json").read_text())
    turns = data["scores"]["user_turns"]
    assert {m["mean"] for m in turns["means"].values()} == {2.0}
    assert turns["verdict"] == "does not order the ladder" and turns["kendall_tau"]["value"] == 0.0
    assert all(p["n_for_80_power"] is None and p["power_notes"].startswith("no difference") for p in turns["pairs"])


def test_the_rungs_meet_the_same_users_with_the_same_seeds(ladder):
    cells = {rung: load_run(ladder / "out" / "cells" / f"agenda__{rung}__default").dialogues for rung in RUNGS}
    keys = {rung: sorted((d.index, d.seed, d.profile.user_id) for d in dialogues) for rung, dialogues in cells.items()}
    assert all(keys[rung] == keys["oracle"] for rung in RUNGS) and len(keys["oracle"]) == 30


def test_the_report_shows_the_ladder_and_a_verdict_per_score(ladder):
    html = (ladder / "out" / "report.html").read_text(encoding="utf-8")
    assert html.count('<img alt="Mean of each score per rung') == 1
    assert html.count('class="verdict"') == 3
    assert "success orders the ladder: Kendall tau" in html
    assert "user_turns does not order the ladder: the same mean on every rung" in html
    pairs = pd.read_csv(ladder / "out" / "report" / "tables" / "ladder_pairs.csv", dtype=str)
    assert pairs["pair"].iloc[0] == "oracle − oracle_mix30"
    assert "< 0.001" in set(pairs["p (permutation)"]) and "0.000" not in set(pairs["p (permutation)"])


def test_a_score_that_cannot_be_computed_for_a_rung_stops_with_one_line(ladder, capsys):
    """jaccard needs two lists: the oracle's users accept the first one."""
    args = ["ladder", str(ladder / "tiny.yaml"), "--output", str(ladder / "out"), "--conversations", "30"]
    assert main([*args, "--no-progress", "--metrics", "success,jaccard"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "jaccard cannot be computed for rung oracle" in err[0]
    assert main(["ladder", str(ladder / "tiny.yaml"), "--output", str(ladder / "out"), "--conversations", "1"]) == 2
    assert (
        capsys.readouterr().err.strip() == "error: ladder: --conversations: Input should be greater than or equal to 2"
    )


def test_an_llm_user_climbs_the_ladder_too(tmp_path):
    """Any simulator: the single-prompt LLM user against the local OpenAI-protocol test server."""
    from usersimcrs.testing.llm_server import LLMServer

    with LLMServer() as server:
        config = run_config(
            tmp_path,
            simulator={"type": "llm_single", "min_turns": 1},
            llm=server.config("openai", cache=False).model_dump(),
        )
        args = ["ladder", str(config), "-o", str(tmp_path / "out"), "--conversations", "4", "--no-progress"]
        assert main([*args, "--metrics", "recall@10"]) == 0
    data = json.loads((tmp_path / "out" / "ladder.json").read_text())
    assert data["simulator"] == "llm_single" and data["rungs"] == RUNGS
    assert all(m["n"] == 4 for m in data["scores"]["recall@10"]["means"].values())


@pytest.mark.embedded
@pytest.mark.slow
def test_the_embedded_model_smoke_test_climbs_the_ladder(tmp_path, embedded_model_path):
    """The single-prompt LLM user on the embedded Gemma 3 270M: the path end to end (not evidence about anything)."""
    config = run_config(
        tmp_path,
        simulator={"type": "llm_single", "min_turns": 1, "max_tokens": 16},
        llm={"backend": "llamacpp", "model_path": embedded_model_path, "n_ctx": 2048, "n_threads": 1},
        concurrency=1,
    )
    args = ["ladder", str(config), "-o", str(tmp_path / "out"), "--conversations", "2", "--no-progress"]
    assert main([*args, "--metrics", "recall@10"]) == 0
    data = json.loads((tmp_path / "out" / "ladder.json").read_text())
    assert all(m["n"] == 2 for m in data["scores"]["recall@10"]["means"].values())
