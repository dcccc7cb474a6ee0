"""Every rule-based metric on hand-computed examples (PEPPER's PC_t / PCIR_t on 2 users x 3 turns)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from tests.metrics_fixtures import dialogue, ref, two_users
from usersimcrs.metrics.compute import compute_metrics, turn_curves
from usersimcrs.metrics.coverage import average_increase_rate, coverage_curve, increase_rate, preference_coverage
from usersimcrs.metrics.exploration import consecutive_distances, jaccard_distance
from usersimcrs.metrics.length import exchanges
from usersimcrs.metrics.options import MetricOptions, RewardConfig
from usersimcrs.metrics.recall import recall_per_turn
from usersimcrs.metrics.success import accepted_rounds, hit_within, is_accept_intent, is_success, reward


def test_preference_coverage_two_users_three_turns():
    a, b = two_users()
    # k=2: A covers {1} at t1, nothing new at t2, {2} at t3; B covers nothing, then {3,4}, then nothing new
    assert coverage_curve(a, 2, 3) == [0.5, 0.5, 1.0]
    assert coverage_curve(b, 2, 3) == [0.0, 0.5, 0.5]
    pc = preference_coverage([coverage_curve(a, 2, 3), coverage_curve(b, 2, 3)])
    assert pc == pytest.approx([0.25, 0.5, 0.75])
    assert increase_rate(pc) == pytest.approx([0.25, 0.25, 0.25])
    assert average_increase_rate(pc) == pytest.approx(0.25)
    # k=1 only the head of each list counts: A {1},{},{2} ; B {},{3},{3}
    pc1 = preference_coverage([coverage_curve(a, 1, 3), coverage_curve(b, 1, 3)])
    assert pc1 == pytest.approx([0.25, 0.375, 0.625])
    assert increase_rate(pc1) == pytest.approx([0.25, 0.125, 0.25])


def test_coverage_carries_forward_after_the_dialogue_ends_and_skips_users_without_targets():
    a, _ = two_users()
    assert coverage_curve(a, 2, 5) == [0.5, 0.5, 1.0, 1.0, 1.0]
    no_targets = dialogue("C", [], [[ref("1")]])
    assert coverage_curve(no_targets, 2, 3) is None
    assert preference_coverage([coverage_curve(a, 2, 3), None]) == [0.5, 0.5, 1.0]


def test_recall_per_turn_and_title_only_matching():
    a, b = two_users()
    assert recall_per_turn(a, 2) == [0.5, 0.0, 1.0]
    assert recall_per_turn(b, 2) == [0.0, 0.5, 0.25]  # turn 3's item 3 has no ID, only the title
    assert recall_per_turn(a, 1) == [0.5, 0.0, 0.5]
    assert recall_per_turn(b, 1) == [0.0, 0.25, 0.25]


def test_jaccard_distance_between_consecutive_lists():
    a, b = two_users()
    assert jaccard_distance([ref("1"), ref("2")], [ref("2"), ref("3")]) == pytest.approx(1 - 1 / 3)
    assert jaccard_distance([], []) is None
    assert consecutive_distances(a) == [1.0, 1.0]
    assert consecutive_distances(b) == pytest.approx([1.0, 1 - 1 / 3])
    assert consecutive_distances(a, k=1) == [1.0, 1.0]


def test_success_accepted_rounds_and_hit_within():
    options = MetricOptions()
    a, b = two_users()
    assert is_accept_intent("NOTE.ACCEPT", options.accept_intents)
    assert is_accept_intent("accept_recommendation", options.accept_intents)
    assert is_accept_intent("ACC", options.accept_intents)
    assert not is_accept_intent("ACCESS", options.accept_intents)
    # A's user accepts in the turn after the 2nd recommendation round (acts of user turn 3)
    assert is_success(a, options) is True
    assert is_success(b, options) is None  # no acts, no feedback, end reason max_turns: nothing could show it
    assert [a.utterances[p].text for p in accepted_rounds(a, options)] == ["system turn 2"]
    assert hit_within(a, 1, None) == 1.0
    assert hit_within(b, 1, None) == 0.0 and hit_within(b, 2, None) == 1.0
    assert hit_within(b, 2, 1) == 1.0 and hit_within(dialogue("C", [], [[ref("1")]]), 3, None) is None


def test_success_from_feedback_and_end_reason():
    options = MetricOptions()
    liked = dialogue("F", ["1"], [[ref("5")], [ref("6")]], feedback=[None, 1])
    assert is_success(liked, options)
    assert [liked.utterances[p].text for p in accepted_rounds(liked, options)] == ["system turn 2"]
    ended = dialogue("E", ["1"], [[ref("5")], [ref("1")]], end_reason="target_hit")
    assert is_success(ended, options)
    assert [ended.utterances[p].text for p in accepted_rounds(ended, options)] == ["system turn 2"]


def test_reward_follows_dialoguekit_table():
    d = dialogue(
        "R",
        ["1"],
        [[ref("1")], [], []],
        user_acts=[["DISCLOSE.MORE"], ["DISCLOSE"], ["INQUIRE"]],
        agent_texts=["hello", "Same text", "same  text"],
    )
    config = RewardConfig(full_set_points=20, intents={"DISCLOSE": 4, "REVEAL": 2}, repeat_penalty=1, cost=1)
    # 20 - 2 (REVEAL never shown) - 0 repeats (case folds, inner spacing does not) - 3 user turns
    assert reward(d, config) == 15
    d.utterances[5].text = "same text"  # now a word-for-word repeat of the previous system turn
    assert reward(d, config) == 14
    assert reward(d, RewardConfig(full_set_points=2)) == 0  # floored at zero


def test_compute_metrics_rows_and_turn_curves():
    a, b = two_users()
    options = MetricOptions(recall_ks=[1, 2], coverage_ks=[1, 2], hit_within=[1, 3], satisfaction=False)
    tables = compute_metrics([a, b], options)
    assert tables.horizon == 3
    rows = tables.conversations.set_index("conversation_id")
    assert rows.loc["A", "recall@2"] == pytest.approx(0.5)  # (0.5 + 0 + 1) / 3
    assert rows.loc["B", "recall@2"] == pytest.approx(0.25)
    assert rows.loc["A", "hit@1"] == 1.0
    assert rows.loc["A", "pc@2"] == 1.0 and rows.loc["B", "pc@2"] == 0.5
    assert rows[["pc@2"]].mean().iloc[0] == pytest.approx(0.75)  # PC_3@2
    assert rows["pcir_avg@2"].mean() == pytest.approx(0.25)
    assert rows.loc["A", "jaccard"] == 1.0 and rows.loc["B", "jaccard"] == pytest.approx(5 / 6)
    assert rows.loc["A", "success"] == 1.0 and pd.isna(rows.loc["B", "success"])
    assert rows.loc["A", "successful_round_ratio"] == pytest.approx(1 / 3)
    assert rows.loc["A", "turns"] == 3 and rows.loc["A", "utterances"] == 6 and rows.loc["A", "exchanges"] == 2.5
    assert rows.loc["B", "hit_within_1"] == 0.0 and rows.loc["B", "hit_within_3"] == 1.0
    assert rows.loc["A", "end_reason"] == "max_turns"
    curves = turn_curves(tables.turns).set_index(["metric", "turn"])["value"]
    assert [curves[("pc@2", t)] for t in (1, 2, 3)] == pytest.approx([0.25, 0.5, 0.75])
    assert [curves[("pcir@2", t)] for t in (1, 2, 3)] == pytest.approx([0.25, 0.25, 0.25])
    assert [curves[("recall@2", t)] for t in (1, 2, 3)] == pytest.approx([0.25, 0.25, 0.625])
    assert curves[("jaccard", 3)] == pytest.approx((1 + 2 / 3) / 2)
    only_a = turn_curves(tables.turns, ["A"]).set_index(["metric", "turn"])["value"]
    assert only_a[("pc@2", 3)] == 1.0


def test_exchanges_counts_speaker_changes_like_dialoguekit():
    a, _ = two_users()
    assert exchanges(a) == 2.5
    a.utterances.insert(1, a.utterances[0].model_copy())  # two USER utterances in a row: no change
    assert exchanges(a) == 2.5


def test_satisfaction_matches_dialoguekit_classifier():
    pytest.importorskip("dialoguekit")
    from dialoguekit.core.dialogue import Dialogue as DKDialogue
    from dialoguekit.core.utterance import Utterance as DKUtterance
    from dialoguekit.nlu.models.satisfaction_classifier import SatisfactionClassifierSVM
    from dialoguekit.participant import DialogueParticipant

    from usersimcrs.metrics.base import MetricContext
    from usersimcrs.metrics.satisfaction import SatisfactionFamily, load_classifier

    classifier = load_classifier()
    assert classifier is not None, "DialogueKit's satisfaction classifier did not load"
    texts = [
        ("USER", "I want a funny movie for tonight"),
        ("AGENT", "How about The Mask? It is a classic comedy."),
        ("USER", "Great, thank you, that is perfect!"),
    ]
    ours = dialogue("S", [], [])
    dk = DKDialogue("agent", "user", "S")
    from usersimcrs.core.dialogue import Utterance

    for who, text in texts:
        ours.add(Utterance(participant=who, text=text))
        dk.add_utterance(DKUtterance(text, DialogueParticipant[who]))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = SatisfactionClassifierSVM().classify_last_n_dialogue(dk)
    value = SatisfactionFamily().per_conversation(ours, MetricContext())["satisfaction"]
    assert value == float(expected)
    assert 1 <= value <= 5 and not math.isnan(value)


def test_a_registered_plugin_family_lands_in_the_table(monkeypatch):
    from usersimcrs.metrics.base import MetricFamily
    from usersimcrs.metrics.registry import metric_families

    class AgentWords(MetricFamily):
        name = "agent_words"

        def per_conversation(self, dialogue, ctx):
            return {"agent_words": sum(len(u.text.split()) for u in dialogue.agent_turns)}

    # registered for this test only (the registry is shared by the whole session)
    monkeypatch.setitem(metric_families._loaded, "agent_words_test", AgentWords)
    a, _ = two_users()
    options = MetricOptions(families=["length", "agent_words_test"])
    row = compute_metrics([a], options).conversations.iloc[0]
    assert row["agent_words"] == 9 and row["turns"] == 3 and "recall@1" not in row
    with pytest.raises(Exception, match="unknown metrics type 'nope'"):
        compute_metrics([a], MetricOptions(families=["nope"]))


def test_simulator_signals_persuasiveness_and_target_split():
    from usersimcrs.metrics.base import MetricContext
    from usersimcrs.metrics.simulator_signals import SimulatorSignalsFamily

    d = dialogue("P", ["1", "2", "3"], [[ref("1"), ref("5")], [ref("2")]])
    d.metadata.update({"persuasiveness": 2, "targets": {"selected": ["1", "2"], "residual": ["3", "4"]}})
    values = SimulatorSignalsFamily().per_conversation(d, MetricContext())
    assert values == {"persuasiveness": 2.0, "selected_coverage": 1.0, "residual_coverage": 0.0}
    d.metadata = {"persuasiveness": None}
    assert SimulatorSignalsFamily().per_conversation(d, MetricContext()) == {
        "persuasiveness": None,
        "selected_coverage": None,
        "residual_coverage": None,
    }
