"""The validity gate flags failed, looping, leaking and short conversations; summaries differ."""

from __future__ import annotations

import pytest

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.analysis.summary import summarize
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.validity import ValidityOptions, flag_conversations, flag_rates, leaked_targets


def _set():
    good = dialogue("good", ["1"], [[ref("5")], [ref("1")]], user_acts=[[], ["ACCEPT"]], end_reason="target_accepted")
    failed = dialogue("failed", ["1"], [[ref("5")]], status="failed", end_reason=None)
    loop = dialogue(
        "loop",
        ["1"],
        [[ref("5")], [ref("6")], [ref("7")]],
        agent_texts=["Try Casino!", "try casino! ", "Try  Casino!"],
        user_acts=[[], ["REJECT"], ["REJECT"]],
    )
    leak = dialogue(
        "leak",
        ["2"],
        [[ref("5")], [ref("2")]],
        user_texts=["I loved The American President, can you find it?", "thanks"],
        simulator="target_biased",
    )
    return [good, failed, loop, leak]


def test_flags_each_problem():
    flags = flag_conversations(_set(), judgments=[{"conversation_id": "good", "value": None}]).set_index(
        "conversation_id"
    )
    assert flags.loc["failed", "failed"] and flags.loc["failed", "too_short"]
    assert flags.loc["loop", "repetition_loop"] and not flags.loc["good", "repetition_loop"]
    assert flags.loc["leak", "target_leakage"] and flags.loc["leak", "leaked"] == "American President, The (1995)"
    assert flags.loc["good", "judge_parse_failure"] and not flags.loc["loop", "judge_parse_failure"]
    assert flags.loc["loop", "truncated_by_turn_limit"] and not flags.loc["good", "truncated_by_turn_limit"]
    assert list(flags["valid"]) == [True, False, False, False]
    assert flag_rates(flags.reset_index())["failed"] == pytest.approx(0.25)


def test_leakage_only_checked_for_target_aware_simulators_unless_forced():
    d = dialogue("x", ["1"], [[ref("5")], [ref("6")]], user_texts=["I want Heat", "ok"])
    assert flag_conversations([d])["target_leakage"].tolist() == [None]  # no simulator recorded: not checked
    assert flag_conversations([d], simulator="target_free")["target_leakage"].tolist() == [True]
    forced = ValidityOptions(check_leakage=True)
    assert flag_conversations([d], options=forced)["target_leakage"].tolist() == [True]
    # whole words only: "Heater" does not leak "Heat"
    d.utterances[0].text = "my heater broke"
    assert leaked_targets(d) == []


def test_repeat_threshold_is_configurable():
    loop = _set()[2]
    assert not flag_conversations([loop], options=ValidityOptions(repeat_k=4))["repetition_loop"].iloc[0]


def test_summaries_on_all_and_valid_differ():
    dialogues = _set()
    tables = compute_metrics(dialogues, MetricOptions(satisfaction=False))
    flags = flag_conversations(dialogues)
    valid = tables.conversations["conversation_id"].map(flags.set_index("conversation_id")["valid"])
    summary = summarize(tables.conversations, valid=valid, n_resamples=200).set_index(["subset", "metric"])
    # success is measured on 'good' (accepts) and 'loop' (rejects); 'failed' and 'leak' show no signal
    assert summary.loc[("all", "success"), "n"] == 2 and summary.loc[("valid", "success"), "n"] == 1
    assert summary.loc[("all", "success"), "mean"] == pytest.approx(0.5)
    assert summary.loc[("valid", "success"), "mean"] == 1.0
    assert summary.loc[("all", "end_reason[error]"), "mean"] == pytest.approx(0.25)
    assert summary.loc[("all", "turns"), "mean"] == pytest.approx((2 + 1 + 3 + 2) / 4)
    low, high = summary.loc[("all", "turns"), ["ci_low", "ci_high"]]
    assert 1 <= low <= 2 <= high <= 3
