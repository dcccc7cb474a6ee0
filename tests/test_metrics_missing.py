"""A metric that was not measured is missing, never 0: success, leakage, satisfaction, summaries with n."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.analysis.run_metrics import evaluate, write_metrics
from usersimcrs.analysis.summary import summarize
from usersimcrs.cli.metrics import flags_line, summary_line
from usersimcrs.core.run_folder import load_run
from usersimcrs.metrics.base import MetricContext
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.config import MetricsConfig, gate_messages
from usersimcrs.metrics.options import MetricOptions, RewardConfig
from usersimcrs.metrics.satisfaction import SatisfactionFamily, on_scale
from usersimcrs.metrics.success import SuccessFamily, has_acceptance_signal, is_success
from usersimcrs.metrics.validity import flag_conversations, flag_counts, flag_rates
from usersimcrs.report.sections import validity_table


def _bare(cid: str = "human", end_reason: str | None = None):
    """A human/LLM-style dialogue: text only, no acts, no feedback, no targets."""
    return dialogue(
        cid, [], [[ref("1")], [ref("2")]], user_texts=["any sci-fi?", "thanks, I'll watch it"], end_reason=end_reason
    )


def _values(d, options: MetricOptions | None = None) -> dict:
    return SuccessFamily().per_conversation(d, MetricContext(options=options or MetricOptions()))


@pytest.mark.parametrize("end_reason", [None, "user_stop", "max_turns", "unknown"])
def test_success_is_missing_without_any_signal(end_reason):
    values = _values(_bare(end_reason=end_reason))
    assert values["success"] is None and values["accepted_rounds"] is None
    assert values["successful_round_ratio"] is None
    assert values["recommendation_rounds"] == 2  # the lists are there; only acceptance is unknown


@pytest.mark.parametrize(
    ("signal", "expected"),
    [
        ({"end_reason": "target_hit"}, 1.0),
        ({"end_reason": "agenda_done"}, 0.0),
        ({"end_reason": "user_gave_up"}, 0.0),
        ({"end_reason": "max_rounds_no_hit"}, 0.0),
        ({"user_acts": [["DISCLOSE"], ["REJECT"]]}, 0.0),
        ({"user_acts": [[], ["ACCEPT"]]}, 1.0),
        ({"feedback": [0, None]}, 0.0),
        ({"feedback": [None, 1]}, 1.0),
    ],
)
def test_success_is_measured_where_a_signal_exists(signal, expected):
    kwargs = {"end_reason": None, **signal}
    d = dialogue("s", [], [[ref("1")], [ref("2")]], **kwargs)
    assert has_acceptance_signal(d, MetricOptions())
    values = _values(d)
    assert values["success"] == expected
    assert values["accepted_rounds"] == (0 if expected == 0 else values["accepted_rounds"])
    assert values["successful_round_ratio"] is not None


def test_failure_end_reasons_are_configurable():
    d = _bare(end_reason="user_stop")
    assert is_success(d, MetricOptions()) is None
    assert is_success(d, MetricOptions(failure_end_reasons=["user_stop"])) is False


def test_reward_needs_acts_only_when_it_penalises_missing_intents():
    d = _bare()
    assert _values(d)["reward"] is not None  # default table: points minus repeats and turns, no intents
    table = MetricOptions(reward=RewardConfig(intents={"DISCLOSE": 4}))
    assert _values(d, table)["reward"] is None and _values(d, table)["reward_per_turn"] is None
    acted = dialogue("a", [], [[ref("1")]], user_acts=[["REVEAL"]])
    assert _values(acted, table)["reward"] == pytest.approx(20 - 4 - 1)


def test_mean_over_missing_values_uses_measured_ones_and_carries_n():
    measured = [dialogue(f"m{i}", [], [[ref("1")]], user_acts=[["ACCEPT" if i < 3 else "REJECT"]]) for i in range(5)]
    dialogues = measured + [_bare(f"h{i}") for i in range(4)]
    tables = compute_metrics(dialogues, MetricOptions(satisfaction=False))
    summary = summarize(tables.conversations, n_resamples=200)
    row = summary[(summary["subset"] == "all") & (summary["metric"] == "success")].iloc[0]
    assert row["n"] == 5 and row["mean"] == pytest.approx(3 / 5)  # 4 unmeasured dialogues left out, not zeros
    assert "success 0.600 (n=5)" in summary_line(summary, "all")


def test_a_metric_nobody_measured_stays_in_the_summary_with_n_0():
    tables = compute_metrics([_bare("h1"), _bare("h2")], MetricOptions(satisfaction=False))
    summary = summarize(tables.conversations, n_resamples=200).set_index(["subset", "metric"])
    assert summary.loc[("all", "success"), "n"] == 0 and pd.isna(summary.loc[("all", "success"), "mean"])
    line = summary_line(summary.reset_index(), "all")
    assert "success not measured (n=0)" in line and "success 0.000" not in line


def test_leakage_not_checked_without_targets_and_true_false_with_them():
    lists = [[ref("5")], [ref("6")]]
    no_targets = dialogue("nt", [], lists, user_texts=["I want Heat", "ok"], simulator="target_biased")
    clean = dialogue("clean", ["1"], lists, user_texts=["something tense", "ok"], simulator="target_biased")
    leak = dialogue("leak", ["1"], lists, user_texts=["I want Heat", "ok"], simulator="target_biased")
    flags = flag_conversations([no_targets, clean, leak]).set_index("conversation_id")
    assert flags.loc["nt", "target_leakage"] is None
    assert flags.loc["clean", "target_leakage"] is False and flags.loc["leak", "target_leakage"] is True
    assert flags.loc["nt", "valid"] and not flags.loc["leak", "valid"]  # unchecked never invalidates


def test_unchecked_flags_have_no_rate_and_say_not_checked():
    dialogues = [_bare("h1"), _bare("h2")]  # no targets, no judgments, no end reason
    flags = flag_conversations(dialogues, simulator="target_free")
    assert flags["target_leakage"].tolist() == [None, None]
    assert flags["judge_parse_failure"].tolist() == [None, None]
    assert flags["truncated_by_turn_limit"].tolist() == [None, None]
    rates = flag_rates(flags)
    assert rates["target_leakage"] is None and rates["error"] == 0.0 and rates["valid"] == 1.0
    assert flag_counts(flags)["target_leakage"] == (0, 0)
    assert "target_leakage not checked (n=0)" in flags_line(flag_counts(flags))
    table = validity_table(flags).set_index("flag")
    assert table.loc["target_leakage", "note"] == "not checked" and table.loc["target_leakage", "checked"] == 0
    assert pd.isna(table.loc["target_leakage", "share"]) and table.loc["too_short", "share"] == 0.0


def test_unchecked_flags_survive_the_csv_round_trip(tmp_path):
    from usersimcrs.core.jsonl import JsonlWriter

    with JsonlWriter(tmp_path / "dialogues.jsonl") as writer:
        writer.write(_bare("h1"))
        writer.write(dialogue("leak", ["1"], [[ref("5")]], user_texts=["I want Heat"], simulator="target_biased"))
    result = evaluate(load_run(tmp_path), MetricsConfig(options=MetricOptions(satisfaction=False)))
    write_metrics(tmp_path, result)
    table = validity_table(pd.read_csv(tmp_path / "metrics.csv")).set_index("flag")
    assert table.loc["target_leakage", "checked"] == 1 and table.loc["target_leakage", "conversations"] == 1
    assert table.loc["valid", "conversations"] == 1


def test_judge_parse_failure_is_checked_only_for_judged_conversations():
    a, b = _bare("a"), _bare("b")
    flags = flag_conversations([a, b], judgments=[{"conversation_id": "a", "value": 3.0}]).set_index("conversation_id")
    assert flags.loc["a", "judge_parse_failure"] is False and flags.loc["b", "judge_parse_failure"] is None


def test_gate_on_an_empty_run_says_so_instead_of_crashing():
    rates = flag_rates(flag_conversations([]))
    assert rates["valid"] is None
    assert gate_messages(rates, MetricsConfig(max_invalid_rate=0.1)) == ["no conversations to check"]
    assert gate_messages(rates, MetricsConfig()) == []


class _Fixed:
    """A stand-in classifier that always answers the same score."""

    def __init__(self, score: int):
        self.score = score

    def classify_text(self, texts):
        return [self.score for _ in texts]


@pytest.mark.parametrize(
    ("score", "value", "status"), [(0, None, "out_of_scale"), (6, None, "out_of_scale"), (1, 1.0, "ok"), (5, 5.0, "ok")]
)
def test_satisfaction_outside_1_to_5_is_missing_with_a_status(score, value, status):
    ctx = MetricContext()
    ctx.resource("satisfaction_classifier", lambda: _Fixed(score))
    out = SatisfactionFamily().per_conversation(_bare(), ctx)
    assert out == {"satisfaction": value, "satisfaction_status": status}


def test_satisfaction_status_when_not_computed():
    family = SatisfactionFamily()
    empty = dialogue("e", [], [])
    assert family.per_conversation(empty, MetricContext())["satisfaction_status"] == "empty_dialogue"
    off = MetricContext(options=MetricOptions(satisfaction=False))
    assert family.per_conversation(_bare(), off) == {"satisfaction": None, "satisfaction_status": "disabled"}
    none = MetricContext()
    none.resource("satisfaction_classifier", lambda: None)
    assert family.per_conversation(_bare(), none)["satisfaction_status"] == "classifier_unavailable"
    assert on_scale(True) is None and on_scale("3") is None and on_scale(3) == 3.0
