"""Tolerant JSON extraction and schema validation of structured LLM output."""

from __future__ import annotations

import pytest

from usersimcrs.llm.structured import (
    StructuredOutputError,
    close_truncated,
    json_candidates,
    parse_or_close,
    parse_structured,
    validate,
)

RATING = {
    "type": "object",
    "properties": {
        "score": {"type": "integer", "minimum": 1, "maximum": 5},
        "reason": {"type": "string", "maxLength": 40},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["fun", "slow"]}, "maxItems": 2},
    },
    "required": ["score"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "text",
    [
        '{"score": 4}',
        '```json\n{"score": 4}\n```',
        '```\n{"score": 4}\n```',
        'The rating is as follows: {"score": 4} -- hope that helps',
        '{"broken": \n then the real one {"score": 4}',
        '{"score": 9} no wait, {"score": 4}',
    ],
)
def test_first_valid_object_is_extracted(text):
    assert parse_structured(text, RATING) == {"score": 4}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty completion"),
        ("   \n", "empty completion"),
        ("I'd rate it four.", "no JSON value"),
        ('{"score": 7}', "maximum"),
        ('{"score": "4"}', "expected integer"),
        ('{"reason": "x"}', "missing required 'score'"),
        ('{"score": 3, "extra": 1}', "unexpected key 'extra'"),
        ('{"score": 3, "tags": ["fun", "long"]}', "not in"),
        ('{"score": 3, "reason": "' + "x" * 41 + '"}', "maxLength"),
        ('{"score": true}', "expected integer"),
    ],
)
def test_invalid_output_names_the_problem(text, problem):
    with pytest.raises(StructuredOutputError, match=problem):
        parse_structured(text, RATING)


def test_arrays_and_nested_candidates_in_order():
    assert json_candidates('a [1, 2] b {"k": [3]} c') == [[1, 2], {"k": [3]}]
    assert parse_structured("list: [1, 2, 3]", {"type": "array", "items": {"type": "integer"}}) == [1, 2, 3]


def test_validator_subset():
    assert validate(3.0, {"type": "integer"}) == []
    assert validate(None, {"type": ["string", "null"]}) == []
    assert validate("b", {"anyOf": [{"const": "a"}, {"const": "b"}]}) == []
    assert validate("c", {"anyOf": [{"const": "a"}, {"const": "b"}]})
    assert validate({"a": 1}, {"additionalProperties": {"type": "string"}})
    assert validate([], {"type": "array", "minItems": 1})


UTTERANCE = {
    "type": "object",
    "properties": {"end": {"type": "boolean"}, "utterance": {"type": "string"}},
    "required": ["end", "utterance"],
}


def test_cut_off_json_is_closed_around_whole_values_only():
    assert close_truncated('{"end": false, "utterance": "a film with a genre: drama,', UTTERANCE) == {
        "end": False,
        "utterance": "a film with a genre: drama,",
    }
    assert close_truncated('Sure! {"score": 4, "reason": "good pac', RATING) == {"score": 4, "reason": "good pac"}
    assert close_truncated('{"score": 3, "tags": ["fun"', RATING) == {"score": 3, "tags": ["fun"]}
    with pytest.raises(StructuredOutputError, match="not in"):  # a cut string still has to pass the schema
        close_truncated('{"score": 3, "tags": ["fun", "sl', RATING)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"utterance": "a film with a gen', "missing required 'end'"),  # the flag never written
        ('{"score": 1', "missing required 'score'"),  # a half-written number is not guessed (1 of 10?)
        ('{"end": tr', "missing required 'end'"),  # nor a half-written literal
        ("no JSON at all", "no JSON value"),
    ],
)
def test_cut_off_json_that_lacks_a_required_value_is_refused(text, problem):
    schema = UTTERANCE if "utterance" in text or "end" in text else RATING
    with pytest.raises(StructuredOutputError, match=problem):
        close_truncated(text, schema)


def test_parse_or_close_closes_only_an_answer_cut_off_at_its_cap():
    cut = '{"end": false, "utterance": "a film with a gen'
    assert parse_or_close(cut, UTTERANCE, cut_off=True) == ({"end": False, "utterance": "a film with a gen"}, True)
    with pytest.raises(StructuredOutputError, match="no JSON value"):  # a short answer is not guessed at
        parse_or_close(cut, UTTERANCE, cut_off=False)
    assert parse_or_close('{"end": true, "utterance": "bye"}', UTTERANCE, cut_off=True)[1] is False
