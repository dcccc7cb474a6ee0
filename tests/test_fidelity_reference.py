"""The bundled human reference, `fidelity` without a human corpus, and the context baselines beside every AUC."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from tests.conftest import PROJECT_ROOT
from tests.test_fidelity import _varied, _write
from usersimcrs.analysis.fidelity import (
    ABOUT_PARTNER,
    ABOUT_USER,
    CONTEXT,
    NOT_CHECKED,
    FidelityRow,
    context_readings,
    conversation_features,
)
from usersimcrs.analysis.human_reference import build_population, population_table, writing_summary
from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.holdout import held_out
from usersimcrs.core.human_reference import HUMAN_CRS, HUMAN_HUMAN, load_reference
from usersimcrs.core.jsonl import read_models
from usersimcrs.pipeline.fidelity import fidelity

WORD = re.compile(r"[a-z0-9']+")


def test_the_bundled_reference_holds_human_human_and_crs_users():
    reference = load_reference()
    names = [p.name for p in reference.populations]
    assert names == ["redial_seekers", "inspired_seekers", "crs_arena_users"]
    assert [p.context for p in reference.populations] == [HUMAN_HUMAN, HUMAN_HUMAN, HUMAN_CRS]
    for population in reference.populations:
        words = population.per_turn["words"]
        assert 5 <= words.mean <= 9 and words.n == population.user_turns == sum(population.words_per_turn.values())
        assert all(len(v) == population.conversations for v in population.per_conversation.values())
    redial = reference.population("redial_seekers")
    assert redial.conversations == 1342 and redial.suggestions_per_conversation.median == 3
    assert reference.style.words_per_turn == 6 and reference.style.max_words == 14
    assert reference.style.reveal_per_turn == 1 and reference.style.patience == 3
    assert "fidelity-reference" in reference.command


def test_a_population_keeps_each_conversations_features():
    d = Dialogue(conversation_id="x")
    d.add(Utterance(participant="USER", text="any good comedies?"))
    d.add(Utterance(participant="AGENT", text="Airplane! (1980)", items=[]))
    d.add(Utterance(participant="USER", text="seen it, no thanks"))
    empty = Dialogue(conversation_id="agent-only")
    empty.add(Utterance(participant="AGENT", text="hello?"))
    population = build_population("p", "P", HUMAN_HUMAN, "test", [d, empty])
    assert population.conversations == 1 and population.user_turns == 2  # no user turn: not a user to describe
    expected = conversation_features(d)
    table = population_table(population, "human")
    assert table.loc[0, "user_words"] == pytest.approx(expected["user_words"], abs=1e-4)
    assert population.per_turn["question"].mean == 0.5 and population.words_per_turn == {3: 1, 4: 1}


def test_writing_summary_places_a_run_against_the_reference():
    d = Dialogue(conversation_id="x")
    d.add(Utterance(participant="USER", text="hi, any good comedies out there for tonight?"))
    d.add(Utterance(participant="AGENT", text="Airplane! (1980)"))
    d.add(Utterance(participant="USER", text="seen it"))
    summary = writing_summary([d], load_reference())
    assert summary.turns == 2 and summary.words_mean == 5.0 and summary.question_share == 0.5
    assert summary.human_range == (5.0, 9.0) and summary.placement == "inside"
    line = summary.line()
    assert "5.0 words per turn" in line and "questions in 50% of 2 turns" in line and "humans 5-9" in line
    assert "ReDial seekers 7.1 words, 20% questions" in line and "CRS Arena users 7.5 words, 46% questions" in line
    assert writing_summary([Dialogue(conversation_id="empty")], load_reference()) is None


def row(simulator, feature, value, low=None):  # type: ignore[no-untyped-def]
    return FidelityRow(
        simulator=simulator, feature=feature, statistic="ks", value=value, ci_low=low, n_simulated=9, n_human=9
    )


def test_readings_compare_each_distance_with_the_widest_human_human_gap():
    baselines = [row(f"{CONTEXT}a vs b", "user_words", 0.1), row(f"{CONTEXT}c vs d", "user_words", 0.3)]
    baselines += [row(f"{CONTEXT}a vs b", "question_share", 0.5)]
    rows = [row("sim", "user_words", 0.6, low=0.5), row("sim", "question_share", 0.6, low=0.4)]
    rows += [row("sim", "accept_share", 0.9, low=0.8), row("sim", "utterances", 0.35, low=0.31)]
    baselines += [row(f"{CONTEXT}a vs b", "utterances", 0.3)]
    readings = {r.feature: r for r in context_readings(rows, baselines)}
    assert readings["user_words"].reading == ABOUT_USER and readings["user_words"].context == "c vs d"
    assert readings["question_share"].reading == ABOUT_PARTNER  # its CI reaches what context alone does
    assert readings["accept_share"].reading == NOT_CHECKED  # no baseline for it
    assert readings["utterances"].reading == ABOUT_USER  # the lower bound clears the widest human gap


def quickstart_run(tmp_path, conversations: int):  # type: ignore[no-untyped-def]
    out = tmp_path / "quickstart"
    args = ["run", str(PROJECT_ROOT / "configs" / "quickstart.yaml"), "-o", str(out)]
    assert main([*args, "--set", f"conversations={conversations}", "--set", "progress=false"]) == 0
    return out


def words_per_turn(run) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Mean words per user turn over all turns, and the mean of each conversation's mean (the fidelity feature)."""
    dialogues = read_models(run / "dialogues.jsonl", Dialogue)
    turns = [len(WORD.findall(u.text.lower())) for d in dialogues for u in d.user_turns]
    per_conversation = [conversation_features(d)["user_words"] for d in dialogues]
    return sum(turns) / len(turns), sum(per_conversation) / len(per_conversation)


def check_fidelity_without_corpus(run, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "fidelity"
    assert main(["fidelity", str(run), "--output", str(out), "--resamples", "20", "--no-report"]) == 0
    printed = capsys.readouterr().out
    lines = printed.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("quickstart: ") and "AUC" in line)
    context = lines[verdict + 1]
    assert "context baseline" in context and "ReDial seekers vs INSPIRED seekers: AUC" in context
    assert "vs CRS Arena users: AUC" in context
    assert "bundled human reference: ReDial seekers + INSPIRED seekers" in printed
    assert "about the user" in printed or "may be about the partner" in printed
    table = pd.read_csv(out / "fidelity.csv")
    context_rows = table[table["simulator"].str.startswith(CONTEXT)]
    auc = context_rows[context_rows["statistic"] == "discriminator_auc"]
    assert len(auc) == 2 and auc["value"].notna().all() and (auc["n_simulated"] >= 198).all()
    mine = table[(table["simulator"] == "quickstart") & (table["statistic"] == "ks")]
    assert set(mine["reading"]) <= {ABOUT_USER, ABOUT_PARTNER} and len(mine) == 7


def test_quickstart_users_write_like_people_and_fidelity_needs_no_corpus(tmp_path, capsys):
    run = quickstart_run(tmp_path, 20)
    per_turn, per_conversation = words_per_turn(run)
    assert 5 <= per_turn <= 9 and 5 <= per_conversation <= 9
    check_fidelity_without_corpus(run, tmp_path, capsys)
    assert main(["report", str(run)]) == 0
    overview = (run / "report" / "tables" / "overview.md").read_text()
    assert f"| how these users write | {per_turn:.1f} words per turn" in overview
    assert "inside the middle half of human conversations" in overview


@pytest.mark.slow
def test_quickstart_200_conversations_write_5_to_9_words(tmp_path, capsys):
    """The issue's figure: the default agenda user, 200 conversations of configs/quickstart.yaml."""
    run = quickstart_run(tmp_path, 200)
    per_turn, per_conversation = words_per_turn(run)
    assert 5 <= per_turn <= 9 and 5 <= per_conversation <= 9
    check_fidelity_without_corpus(run, tmp_path, capsys)


def test_a_given_corpus_gets_its_own_context_baseline_and_a_held_out_part(tmp_path, capsys):
    human = _write(tmp_path / "crs_users", _varied(120, seed=4))
    sim = _write(tmp_path / "sim", _varied(40, seed=5))
    result = fidelity(sim, human, None, resamples=30, human_holdout=0.5)
    expected = sum(held_out(f"c4-{i}", 0.5) for i in range(120))
    assert result.n_human == expected and 40 < expected < 80
    labels = [r.simulator for r in result.baselines if r.statistic == "discriminator_auc"]
    assert labels == [
        f"{CONTEXT}ReDial seekers + INSPIRED seekers vs crs_users",
        f"{CONTEXT}ReDial seekers vs INSPIRED seekers",
    ]
    assert "held-out share 0.5" in result.human
    assert main(["fidelity", str(sim), "--human-holdout", "0.3", "--resamples", "5"]) == 2
    assert "needs a human corpus" in capsys.readouterr().err


@pytest.mark.shared_data
def test_the_reference_command_rebuilds_from_the_raw_corpora(shared_data, tmp_path, capsys):
    redial, inspired = shared_data / "raw" / "redial", shared_data / "raw" / "inspired"
    out = tmp_path / "reference.json"
    args = ["fidelity-reference", "--redial", str(redial / "test_data_first25.jsonl")]
    args += [str(redial / "movies_with_mentions.csv"), "--inspired", str(inspired / "dev_first10dialogs.tsv")]
    assert main([*args, "--output", str(out)]) == 0
    assert "ReDial seekers (human-human): 25 conversations" in capsys.readouterr().out
    small = load_reference(str(out))
    assert [p.name for p in small.populations] == ["redial_seekers", "inspired_seekers"]
    assert small.population("inspired_seekers").conversations == 10
    sim = _write(tmp_path / "sim", _varied(30, seed=6))
    result = fidelity(sim, None, None, resamples=10, reference=out)
    assert result.n_human == 35 and result.reference == str(out)
    assert [r.simulator for r in result.baselines if r.statistic == "discriminator_auc"] == [
        f"{CONTEXT}ReDial seekers vs INSPIRED seekers"  # no CRS users in this reference
    ]
    assert main(["fidelity-reference", "--crsarena-eval", str(out), "--output", str(tmp_path / "x.json")]) == 2
    assert "needs a human-human corpus" in capsys.readouterr().err
