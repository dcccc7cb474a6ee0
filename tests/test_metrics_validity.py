"""The validity gate: flags by the side that caused them; the CRS's own failures count, what others broke is excluded."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.analysis.summary import summarize
from usersimcrs.core.dialogue import Dialogue, DialogueAct, Utterance
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.options import MetricOptions
from usersimcrs.metrics.validity import (
    ValidityOptions,
    failure_side,
    flag_conversations,
    flag_rates,
    leaked_targets,
    subset_masks,
)

TINY_ITEMS = str(Path(__file__).resolve().parents[1] / "configs" / "data" / "tiny_movies.csv")


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
    assert flags.loc["failed", "error"] and flags.loc["failed", "too_short"]
    assert flags.loc["loop", "repetition_loop"] and not flags.loc["good", "repetition_loop"]
    assert flags.loc["leak", "target_leakage"] and flags.loc["leak", "leaked"] == "American President, The (1995)"
    assert flags.loc["good", "judge_parse_failure"] and not flags.loc["loop", "judge_parse_failure"]
    assert flags.loc["loop", "truncated_by_turn_limit"] and not flags.loc["good", "truncated_by_turn_limit"]
    assert list(flags["valid"]) == [True, False, False, False]
    assert flag_rates(flags.reset_index())["error"] == pytest.approx(0.25)


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


def _evaluate(dialogues, simulator=None, **options):
    from usersimcrs.analysis.run_metrics import without_excluded_values

    tables = compute_metrics(dialogues, MetricOptions(satisfaction=False))
    flags = flag_conversations(dialogues, simulator=simulator, options=ValidityOptions(**options))
    table = without_excluded_values(tables.conversations.merge(flags, on="conversation_id"), tables.metrics)
    summary = summarize(table, subsets=subset_masks(table), n_resamples=200).set_index(["subset", "metric"])
    return table.set_index("conversation_id"), summary


def test_the_crs_own_failures_count_in_all_and_what_the_simulator_broke_is_excluded():
    dialogues = _set()
    dialogues[1].error = "ConnectorError: HTTP 500 from the CRS"  # the CRS broke 'failed'
    table, summary = _evaluate(dialogues)
    assert table.loc["failed", "crs_error"] and table.loc["failed", "crs_failure"]
    assert table.loc["loop", "crs_failure"] and not table.loc["loop", "excluded"]
    assert table.loc["leak", "excluded"] and table.loc["leak", "exclusion"] == "target_leakage"
    assert table.loc["leak", ["success", "turns", "recall@1"]].isna().all()  # excluded: no values at all
    # success: good 1, the CRS failure 0 (a broken conversation did not succeed), loop 0; leak excluded
    assert table.loc["failed", "success"] == 0.0
    assert summary.loc[("all", "success"), "n"] == 3
    assert summary.loc[("all", "success"), "mean"] == pytest.approx(1 / 3)
    assert summary.loc[("valid", "success"), "n"] == 1 and summary.loc[("valid", "success"), "mean"] == 1.0
    assert summary.loc[("all", "crs_failure"), "mean"] == pytest.approx(2 / 3)
    assert summary.loc[("all", "end_reason[error]"), "mean"] == pytest.approx(1 / 3)
    # a failed conversation has no length: turns over good (2) and loop (3) only
    assert pd.isna(table.loc["failed", "turns"]) and summary.loc[("all", "turns"), "n"] == 2
    assert summary.loc[("all", "turns"), "mean"] == pytest.approx((2 + 3) / 2)
    low, high = summary.loc[("all", "turns"), ["ci_low", "ci_high"]]
    assert 2 <= low <= 2.5 <= high <= 3


def test_failure_side_is_read_from_the_engine_else_guessed_from_the_error():
    d = dialogue("x", ["1"], [[ref("5")]], status="failed", end_reason="error")
    d.error = "timeout: conversation exceeded 30s"
    assert failure_side(d) == "toolkit"  # nothing recorded, nothing recognisable
    d.metadata["failure_side"] = "crs"
    assert failure_side(d) == "crs"
    del d.metadata["failure_side"]
    d.error = "ConnectorError: HTTP 503 after 3 attempts"
    assert failure_side(d) == "crs"
    d.error = "LLMError: ollama: model not found"
    assert failure_side(d) == "simulator"
    d.status = "ok"
    assert failure_side(d) is None


def test_a_simulator_failure_is_excluded_with_its_reason_and_a_crs_failure_never():
    crs = dialogue("crs", ["1"], [[ref("5")]], status="failed", end_reason="error", user_acts=[["DISCLOSE"]])
    crs.metadata["failure_side"] = "crs"
    sim = dialogue("sim", ["1"], [[ref("5")], [ref("1")]], status="failed", end_reason="error")
    sim.metadata["failure_side"] = "simulator"
    ok = dialogue("ok", ["1"], [[ref("5")], [ref("1")]], user_acts=[[], ["ACCEPT"]], end_reason="target_accepted")
    table, summary = _evaluate([crs, sim, ok])
    # 'crs' is also too short (1 system turn, 2 utterances): the CRS's own failure wins, it stays in
    assert table.loc["crs", "too_short"] and not table.loc["crs", "excluded"]
    assert table.loc["sim", "excluded"] and table.loc["sim", "exclusion"] == "simulator_error"
    assert summary.loc[("all", "success"), "n"] == 2 and summary.loc[("all", "success"), "mean"] == 0.5
    assert summary.loc[("all", "hit@10"), "mean"] == 0.5  # the CRS failure never showed the target


def test_an_empty_reply_is_the_crs_failure():
    d = dialogue("e", ["1"], [[ref("5")], [], [ref("6")]], agent_texts=["Try Casino", "  ", "Try Sabrina"])
    table, _ = _evaluate([d])
    assert table.loc["e", "empty_reply"] and table.loc["e", "crs_failure"] and not table.loc["e", "valid"]
    assert not table.loc["e", "excluded"]


def test_a_gate_cannot_exclude_the_crs_own_failures(tmp_path):
    from usersimcrs.errors import ConfigError
    from usersimcrs.pipeline.score import load_metrics_config

    with pytest.raises(ValueError, match="always counts against the CRS"):
        ValidityOptions(excluding=["simulator_error", "repetition_loop"])
    with pytest.raises(ValueError, match="unknown flag"):
        ValidityOptions(invalidating=["loops"])
    path = tmp_path / "m.yaml"
    path.write_text("metrics:\n  validity:\n    excluding: [crs_error]\n")
    with pytest.raises(ConfigError, match="metrics.validity"):
        load_metrics_config(path)


def test_without_a_recorded_signal_a_crs_failure_still_scores_no_success():
    """A target-biased user signals success only by its end reason: a crash must not drop out of the mean."""
    hit = dialogue("hit", ["1"], [[ref("5")], [ref("1")]], end_reason="target_hit")
    miss = dialogue("miss", ["1"], [[ref("5")]] * 5, end_reason="max_rounds_no_hit")
    crash = dialogue("crash", ["1"], [[ref("5")]], status="failed", end_reason="error")
    crash.metadata["failure_side"] = "crs"
    table, summary = _evaluate([hit, miss, crash], simulator="target_biased")
    assert table.loc["crash", "success"] == 0.0
    assert summary.loc[("all", "success"), "mean"] == pytest.approx(1 / 3)
    # an LLM user measures success nowhere: a crash does not make it measured
    quiet = [dialogue(f"q{i}", ["1"], [[ref("5")]], end_reason="user_stop") for i in range(2)]
    quiet[1].status, quiet[1].metadata["failure_side"] = "failed", "crs"
    table, summary = _evaluate(quiet)
    assert table["success"].isna().all() and summary.loc[("all", "success"), "n"] == 0


def test_a_conversation_that_never_happened_has_no_reward_length_or_satisfaction():
    """Issue 20: a CRS that never answered gave reward 19.0 and satisfaction 2.0."""
    d = Dialogue(conversation_id="z", status="failed", end_reason="error", error="ConnectorError: refused")
    d.add(Utterance(participant="USER", text="Hi, I want a comedy", dialogue_acts=[DialogueAct(intent="DISCLOSE")]))
    tables = compute_metrics([d], MetricOptions())
    row = tables.conversations.iloc[0]
    for metric in ("reward", "reward_per_turn", "satisfaction", "turns", "user_turns", "utterances", "jaccard"):
        assert pd.isna(row[metric]), metric
    assert row["satisfaction_status"] == "failed_conversation" and row["end_reason"] == "error"
    assert row["items_shown"] == 0


def test_a_one_utterance_conversation_has_its_length():
    """Issue 33: a conversation of one utterance has 1 utterance and 0 or 1 turns, not a missing value."""
    user_only = Dialogue(conversation_id="u", end_reason="user_stop")
    user_only.add(Utterance(participant="USER", text="hi"))
    agent_only = Dialogue(conversation_id="a", end_reason="user_stop")
    agent_only.add(Utterance(participant="AGENT", text="Hello! What would you like to watch?"))
    table = compute_metrics([user_only, agent_only], MetricOptions(satisfaction=False)).conversations
    rows = table.set_index("conversation_id")
    assert (rows.loc["u", "utterances"], rows.loc["u", "turns"], rows.loc["u", "user_turns"]) == (1, 0, 1)
    assert (rows.loc["a", "utterances"], rows.loc["a", "turns"], rows.loc["a", "user_turns"]) == (1, 1, 0)
    assert rows.loc["u", "exchanges"] == 0 and pd.isna(rows.loc["u", "reward"])  # only its length is measured


def test_the_engine_records_which_side_broke_a_conversation(tmp_path):
    """A CRS that raises, a user that raises, a CRS that answers nothing: each lands on its side."""
    import usersimcrs as us
    from usersimcrs.analysis.run_metrics import evaluate

    async def crs(history, user_utterance):
        said = user_utterance.text if user_utterance else ""
        if "crash" in said:
            raise RuntimeError("CRS model died")
        if "silence" in said:
            return {"text": " ", "items": []}
        return {"text": "Try Heat (1995).", "items": [{"title": "Heat (1995)"}]}

    plans = {0: ["hi", "crash please"], 1: ["hi", "user breaks"], 2: ["hi", "silence", "ok"], 3: ["hi", "thanks"]}

    def user(dialogue):
        if not dialogue.conversation_id:  # the opening turn: every script starts with "hi"
            return "hi"
        script = plans[int(dialogue.conversation_id.split("-")[-2])]  # <name>-<index>-<hash>
        turns = len(dialogue.user_turns)
        if turns < len(script) and script[turns] == "user breaks":
            raise ValueError("simulator bug")
        return script[turns] if turns < len(script) else None

    items = us.ItemCollection.from_csv(TINY_ITEMS, delimiters={"genres": "|"})
    run = us.simulate(crs=crs, simulator=user, items=items, conversations=4, output=tmp_path / "run", max_turns=5)
    by_index = {d.index: d for d in run.dialogues}
    assert by_index[0].metadata["failure_side"] == "crs" and by_index[1].metadata["failure_side"] == "simulator"
    table = evaluate(run).conversations.set_index("index")
    assert table.loc[0, "crs_error"] and not table.loc[0, "excluded"] and table.loc[0, "crs_failure"]
    assert table.loc[1, "simulator_error"] and table.loc[1, "excluded"]
    assert table.loc[2, "empty_reply"] and table.loc[2, "crs_failure"] and not table.loc[2, "excluded"]
    assert table.loc[3, "valid"] and not table.loc[3, "crs_failure"]
