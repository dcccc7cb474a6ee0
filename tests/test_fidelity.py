"""Simulator fidelity: a corpus against its own halves looks human, a degenerate simulator does not."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.conftest import PROJECT_ROOT
from usersimcrs.analysis.fidelity import (
    CSV_COLUMNS,
    conversation_features,
    distinct_n,
    has_cue,
    is_question,
    is_reject,
    js_divergence,
)
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue, DialogueAct, Utterance
from usersimcrs.core.jsonl import JsonlWriter, read_models
from usersimcrs.pipeline.fidelity import fidelity

VOCAB = (
    "movie film comedy drama action like love watch seen great good bad old new funny scary something "
    "else please recommend another one that this"
).split()


def _write(folder, dialogues):
    folder.mkdir(parents=True)
    with JsonlWriter(folder / "dialogues.jsonl") as writer:
        for d in dialogues:
            writer.write(d)
    return folder


def _varied(n, seed):
    """Conversations whose length, wording, questions and acts vary at random (one distribution)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        d = Dialogue(conversation_id=f"c{seed}-{i}", agent_id="crs")
        for t in range(int(rng.integers(2, 14))):
            if t % 2 == 0:
                text = " ".join(rng.choice(VOCAB, size=int(rng.integers(2, 12))))
                text += "?" if rng.random() < 0.4 else "."
                act = DialogueAct(intent=str(rng.choice(["DISCLOSE", "INQUIRE", "ACCEPT", "REJECT"])))
                d.add(Utterance(participant="USER", text=text, dialogue_acts=[act]))
            else:
                d.add(Utterance(participant="AGENT", text="How about Heat (1995)?"))
        out.append(d)
    return out


def _rows(result, simulator):
    return {(r.feature, r.statistic): r for r in result.rows if r.simulator == simulator}


def test_features_by_hand():
    d = Dialogue(conversation_id="x")
    d.add(Utterance(participant="USER", text="Can you recommend a comedy"))
    d.add(Utterance(participant="AGENT", text="Heat (1995)"))
    d.add(Utterance(participant="USER", text="No, I already seen it"))
    d.add(Utterance(participant="AGENT", text="Up (2009)"))
    d.add(Utterance(participant="USER", text="Sounds great, thanks!"))
    f = conversation_features(d)
    assert f["utterances"] == 5 and f["user_words"] == pytest.approx((5 + 5 + 3) / 3)
    assert f["question_share"] == pytest.approx(1 / 3)
    assert f["reject_share"] == pytest.approx(1 / 3) and f["accept_share"] == pytest.approx(1 / 3)
    assert distinct_n([["a", "b", "a"]], 1) == pytest.approx(2 / 3) and distinct_n([["a"]], 2) is None
    assert is_question("what about it") and not is_question("I like it.")
    assert is_reject("nope") and not has_cue("I dislike nothing", ["like"])
    from collections import Counter

    assert js_divergence(Counter(a=2, b=2), Counter(a=1, b=1)) == pytest.approx(0.0)
    assert js_divergence(Counter(a=1), Counter(b=1)) == pytest.approx(1.0)


def test_halves_of_one_corpus_are_close(tmp_path):
    corpus = _varied(240, seed=1)
    sim = _write(tmp_path / "sim", corpus[:120])
    human = _write(tmp_path / "human", corpus[120:])
    result = fidelity(sim, human, tmp_path / "out", resamples=200, seed=0)
    rows = _rows(result, "sim")
    for feature in ("utterances", "user_words", "question_share", "distinct_1"):
        assert rows[(feature, "ks")].value < 0.2, feature
    assert rows[("user_dialogue_acts", "js_divergence")].value < 0.02
    disc = rows[("all", "discriminator_auc")]
    assert 0.35 < disc.value < 0.65 and disc.ci_low <= 0.5 <= disc.ci_high
    table = pd.read_csv(tmp_path / "out" / "fidelity.csv")
    assert list(table.columns[: len(CSV_COLUMNS)]) == CSV_COLUMNS
    assert (tmp_path / "out" / "report.html").exists() and (
        tmp_path / "out" / "plots" / "feature_distributions.png"
    ).exists()


def test_degenerate_simulator_is_told_apart(tmp_path, capsys):
    human = _write(tmp_path / "human", _varied(60, seed=2))
    parrot = []
    for i in range(60):
        d = Dialogue(conversation_id=f"p{i}")
        d.add(Utterance(participant="USER", text="hello"))
        d.add(Utterance(participant="AGENT", text="hi"))
        parrot.append(d)
    sim = _write(tmp_path / "parrot", parrot)
    assert main(["fidelity", str(sim), str(human), "--output", str(tmp_path / "out"), "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    assert "are told apart from humans" in printed
    table = pd.read_csv(tmp_path / "out" / "fidelity.csv")
    disc = table[table["statistic"] == "discriminator_auc"].iloc[0]
    assert disc["value"] > 0.95
    ks = table[(table["statistic"] == "ks") & (table["feature"] == "utterances")].iloc[0]
    assert ks["value"] > 0.8
    acts = table[table["feature"] == "user_dialogue_acts"].iloc[0]
    assert pd.isna(acts["value"]) and "not checked" in acts["note"]  # the parrot has no acts: missing, not 0


def test_agenda_run_halves(tmp_path):
    """The offline agenda simulator against itself (two halves of one run): no clear separation."""
    run = tmp_path / "agenda"
    assert (
        main(
            [
                "run",
                str(PROJECT_ROOT / "configs" / "agenda_retrieval.yaml"),
                "--output",
                str(run),
                "--set",
                "conversations=80",
                "--set",
                "concurrency=2",
            ]
        )
        == 0
    )
    dialogues = read_models(run / "dialogues.jsonl", Dialogue)
    # random halves (seeded): even and odd positions would split the users' round-robin into two populations
    order = np.random.default_rng(0).permutation(len(dialogues))
    first = _write(tmp_path / "first", [dialogues[i] for i in order[::2]])
    second = _write(tmp_path / "second", [dialogues[i] for i in order[1::2]])
    rows = _rows(fidelity(first, second, None, resamples=200), "first")
    disc = rows[("all", "discriminator_auc")]
    assert disc.ci_low <= 0.5 <= disc.ci_high
    # below the two-sample KS critical value at alpha 0.05 for 40 and 40 (1.36 * sqrt(2 / 40) = 0.304)
    assert rows[("utterances", "ks")].value < 0.304 and rows[("user_dialogue_acts", "js_divergence")].value < 0.05


def test_left_out_conversations_are_counted_printed_and_written(tmp_path, capsys):
    """Issue 33: fidelity used 641 of 1,200 imported conversations without a word."""
    human = _varied(30, seed=3)
    for d in human[:7]:
        d.status, d.error = "failed", "ConnectorError: HTTP 500"
    human.append(Dialogue(conversation_id="empty"))
    simulated = _varied(20, seed=4)
    simulated[0].status = "failed"
    human_dir, sim_dir = _write(tmp_path / "human", human), _write(tmp_path / "sim", simulated)
    assert main(["fidelity", str(sim_dir), str(human_dir), "-o", str(tmp_path / "out"), "--resamples", "50"]) == 0
    out = capsys.readouterr().out
    assert "left out 9 of 51 conversations: human (human): 7 of 31 failed (status failed" in out
    assert "human (human): 1 of 31 no utterances; sim: 1 of 20 failed" in out
    written = pd.read_csv(tmp_path / "out" / "left_out.csv")
    assert written["conversations"].tolist() == [7, 1, 1] and written["of"].tolist() == [31, 31, 20]
    assert "Left out 9 of 51 conversations" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


def test_a_run_with_no_completed_conversation_stops_with_one_line(tmp_path, capsys):
    """A run that stopped at its config (an empty dialogues.jsonl) is not a fidelity result of empty rows."""
    empty = tmp_path / "sim"
    empty.mkdir()
    (empty / "dialogues.jsonl").write_text("")
    failed = _varied(3, seed=5)
    for d in failed:
        d.status = "failed"
    _write(tmp_path / "failed", failed)
    for run, why in ((empty, "the run holds none"), (tmp_path / "failed", "3 of 3 failed")):
        assert main(["fidelity", str(run), "-o", str(tmp_path / "out"), "--resamples", "0"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "no completed simulated conversations" in err and why in err, err
