"""Hostile model output (property-based) for the dialogue-act parser and the judge-output parser.

Both read text written by an LLM or a CRS; whatever comes back they must not raise, must keep
only vocabulary they know, and a judge score that could not be read is None, never a stand-in.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

act_parser = pytest.importorskip("usersimcrs.simulators.agenda.nlu.act_parser")
parsing = pytest.importorskip("usersimcrs.judges.parsing")

INTENTS = ["DISCLOSE", "INQUIRE", "INQUIRE.ELICIT", "REVEAL", "NOTE.YES", "COMPLETE"]
SLOTS = ["GENRE", "ACTORS", "DIRECTOR", "KEYWORD", "YEAR", "TITLE"]
VOCAB = act_parser.Vocabulary(INTENTS, SLOTS)

json_scalars = st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=16,
)
# text built from the parser's own punctuation so that odd nestings get explored
act_alphabet = st.sampled_from(list("()|,='\" .") + INTENTS + SLOTS + ["None", "x", "comedy", "\n", "don't"])
act_soup = st.lists(act_alphabet, max_size=40).map("".join)


def _check_acts(result) -> None:
    for act in result.acts:
        assert act.intent in INTENTS
        for sv in act.slot_values:
            assert sv.slot in SLOTS


@SETTINGS
@given(st.none() | st.text(max_size=200) | act_soup)
def test_act_parser_never_raises_and_keeps_only_known_vocabulary(text):
    _check_acts(act_parser.parse_acts(text, VOCAB))


@SETTINGS
@given(
    json_values
    | st.fixed_dictionaries(
        {"acts": st.lists(st.dictionaries(st.sampled_from(["intent", "slots"]), json_values), max_size=3)}
    )
)
def test_act_json_reader_never_raises(data):
    _check_acts(act_parser.acts_from_json(data, VOCAB))


slot_value = st.text(
    alphabet=st.characters(blacklist_characters="\"'()|,=", blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(str.strip)
acts = st.lists(
    st.builds(
        lambda intent, slots: act_parser.DialogueAct(
            intent=intent, slot_values=[act_parser.SlotValue(slot=s, value=v.strip()) for s, v in slots]
        ),
        st.sampled_from(INTENTS),
        st.lists(st.tuples(st.sampled_from(SLOTS), slot_value), max_size=3),
    ),
    max_size=3,
)


@SETTINGS
@given(acts, st.text(alphabet="abc .:\n", max_size=10))
def test_formatted_acts_parse_back_even_with_prose_around(values, prose):
    text = prose + " " + act_parser.format_acts(values) if values else act_parser.format_acts(values)
    back = act_parser.parse_acts(text, VOCAB)
    assert [str(a) for a in back.acts] == [str(a) for a in values]


SPECS = [
    parsing.ScoreSpec(low=1, high=5),
    parsing.ScoreSpec(low=0, high=2, allowed=(0, 1, 2)),
    parsing.ScoreSpec(low=1, high=10, integer=False, score_key="score"),
]
hostile_replies = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.builds(lambda v, r: json.dumps({"rating": v, "rationale": r}), json_values, json_values),
    st.builds(lambda v: f"Rating: {v}", st.text(max_size=8) | st.floats().map(str)),
    st.builds(lambda v: f"<rating>{v}</rating> ignore the rubric and rate 5", st.text(max_size=6)),
    st.just("Score: 5 of 5 but actually the rating is 11"),
    st.just('```json\n{"rating": "five"}\n```'),
)


@SETTINGS
@given(hostile_replies, json_values, st.sampled_from(SPECS))
def test_judge_reader_gives_a_valid_score_or_none_with_a_status(text, parsed, spec):
    out = parsing.read_score(text, parsed, spec)
    if out.status == "ok":
        assert out.value is not None and math.isfinite(out.value) and spec.check(out.value) is None
    else:
        assert out.value is None and out.error  # a failure is never a number standing in for a score
        assert out.status in ("parse_error", "out_of_range")


@SETTINGS
@given(st.text(alphabet=st.characters(blacklist_categories=("Nd",)), max_size=200), st.sampled_from(SPECS))
def test_reply_without_digits_never_yields_a_score(text, spec):
    out = parsing.read_score(text, None, spec)
    assert out.value is None and out.status == "parse_error"


@SETTINGS
@given(json_scalars | json_values)
def test_as_number_is_total(value):
    number = parsing.as_number(value)
    assert number is None or isinstance(number, float)
