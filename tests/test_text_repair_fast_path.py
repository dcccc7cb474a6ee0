"""The read-only check in front of the repair walk (issue #22): a value it calls clean is one the repair
would leave equal and uncounted, and a clean utterance passes `repair_utterance` untouched."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from usersimcrs.core.dialogue import AGENT, ItemRef, Utterance
from usersimcrs.core.text_repair import MAX_DEPTH, clean_text, is_clean_json, repair_text, repair_value
from usersimcrs.engine.conversation import repair_utterance

SURROGATE = "\ud800"
texts = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0xFFFF), max_size=12)  # with lone surrogates
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | texts
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(values)
def test_a_value_called_clean_is_one_the_repair_leaves_equal_and_uncounted(value):
    repaired, counts = repair_value(value)
    if is_clean_json(value):  # (the check may send a plain-looking value the slow way, e.g. a tuple: never the reverse)
        assert not counts and repaired == value


@settings(max_examples=200, deadline=None)
@given(texts)
def test_clean_text_is_what_repair_text_leaves_alone(text):
    assert clean_text(text) == (repair_text(text)[1] == 0)


def test_nesting_beyond_the_depth_is_not_clean():
    deep: object = "leaf"
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    assert not is_clean_json(deep) and is_clean_json([[["ok"]]])
    assert not is_clean_json({1: "int key"}) and not is_clean_json(("a",)) and not is_clean_json(math.inf)


def test_a_clean_utterance_passes_untouched_and_a_hostile_one_is_still_repaired():
    metadata = {"items_from_text": True, "crs_raw": {"response": "Try Amélie (2001)"}}
    items = [ItemRef(id="1", title="Amélie (2001)", raw="Amelie (2001)", resolution="fuzzy")]
    clean = Utterance(participant=AGENT, text="Try Amélie (2001)", items=items, metadata=metadata)
    stored = clean.metadata  # (the model keeps its own copy of what it was given)
    assert repair_utterance(clean) is clean and clean.metadata is stored and clean.items == items
    hostile = Utterance(
        participant=AGENT,
        text=f"bad {SURROGATE}",
        items=[ItemRef(title="x", score=math.nan)],
        metadata={"crs_raw": {"response": SURROGATE}},
    )
    repaired = repair_utterance(hostile)
    assert repaired.text == "bad \ufffd" and repaired.items[0].score is None
    assert repaired.metadata["crs_raw"] == {"response": "\ufffd"}
    assert repaired.metadata["repairs"] == {"lone_surrogates": 2, "non_finite_numbers": 1}
