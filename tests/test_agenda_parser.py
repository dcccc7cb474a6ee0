"""The tolerant dialogue-act parser: where the anchor's parser breaks, this one must not."""

from __future__ import annotations

from usersimcrs.simulators.agenda.nlu.act_parser import (
    Vocabulary,
    act_schema,
    acts_from_json,
    format_acts,
    parse_acts,
)

VOCAB = Vocabulary(
    ["INQUIRE.ELICIT", "REVEAL", "REVEAL.NONE", "INQUIRE.NEXT", "DISCLOSE.MORE", "END"],
    ["GENRE", "TITLE", "ACTORS", "DIRECTOR", "YEAR"],
)


def strs(result):
    return [str(a) for a in result.acts]


def test_dotted_intents_are_accepted():
    assert strs(parse_acts("INQUIRE.ELICIT(GENRE)|REVEAL.NONE()", VOCAB)) == ["INQUIRE.ELICIT(GENRE)", "REVEAL.NONE()"]


def test_single_and_double_quotes_give_the_same_value():
    single = parse_acts("REVEAL(TITLE='Heat')", VOCAB)
    double = parse_acts('REVEAL(TITLE="Heat")', VOCAB)
    assert strs(single) == strs(double) == ['REVEAL(TITLE="Heat")']


def test_commas_inside_quoted_values_do_not_split_the_value():
    result = parse_acts('REVEAL(TITLE="Crouching Tiger, Hidden Dragon (2000)",GENRE="action")', VOCAB)
    assert result.acts[0].slots() == {"TITLE": "Crouching Tiger, Hidden Dragon (2000)", "GENRE": "action"}


def test_apostrophes_inside_values_and_words_survive():
    result = parse_acts('REVEAL(TITLE="Schindler\'s List")|INQUIRE.NEXT()', VOCAB)
    assert result.acts[0].slots()["TITLE"] == "Schindler's List"
    assert [a.intent for a in result.acts] == ["REVEAL", "INQUIRE.NEXT"]


def test_leading_and_trailing_prose_is_ignored():
    text = 'Sure! Here are the acts: INQUIRE.ELICIT(GENRE)|REVEAL(TITLE="Heat") Hope that helps.'
    assert strs(parse_acts(text, VOCAB)) == ["INQUIRE.ELICIT(GENRE)", 'REVEAL(TITLE="Heat")']


def test_none_means_no_acts_and_nothing_dropped():
    for text in ("None", "none.", "  NONE  ", ""):
        result = parse_acts(text, VOCAB)
        assert result.acts == [] and result.dropped == []


def test_unknown_intents_and_slots_are_dropped_and_listed():
    result = parse_acts('GREET()|REVEAL(TITLE="Heat",MOOD="happy")|INQUIRE.ELICIT(GENRE)', VOCAB)
    assert strs(result) == ['REVEAL(TITLE="Heat")', "INQUIRE.ELICIT(GENRE)"]
    assert result.dropped == ["intent:GREET", "slot:REVEAL.MOOD"]


def test_case_and_slot_aliases_are_normalised():
    result = parse_acts("inquire.elicit(genres)|reveal(title=Heat)", VOCAB)
    assert strs(result) == ["INQUIRE.ELICIT(GENRE)", 'REVEAL(TITLE="Heat")']


def test_bare_intents_without_parentheses():
    assert strs(parse_acts("REVEAL|INQUIRE.NEXT", VOCAB)) == ["REVEAL()", "INQUIRE.NEXT()"]
    result = parse_acts("Answer: END. REVEAL.MAYBE.", VOCAB)
    assert strs(result) == ["END()"] and result.dropped == ["intent:REVEAL.MAYBE"]


def test_multiple_acts_keep_their_order():
    text = 'END()|REVEAL(TITLE="A")|INQUIRE.ELICIT(GENRE)'
    assert [a.intent for a in parse_acts(text, VOCAB).acts] == ["END", "REVEAL", "INQUIRE.ELICIT"]


def test_structured_json_mode_reads_acts_and_drops_unknowns():
    data = {
        "acts": [
            {"intent": "REVEAL", "slots": [{"slot": "TITLE", "value": "Heat"}, {"slot": "MOOD", "value": "x"}]},
            {"intent": "WAVE", "slots": []},
            {"intent": "INQUIRE.ELICIT", "slots": [{"slot": "GENRE", "value": ""}]},
        ]
    }
    result = acts_from_json(data, VOCAB)
    assert strs(result) == ['REVEAL(TITLE="Heat")', "INQUIRE.ELICIT(GENRE)"]
    assert result.dropped == ["slot:REVEAL.MOOD", "intent:WAVE"]


def test_schema_lists_the_vocabulary_as_enums():
    schema = act_schema(["REVEAL"], ["TITLE"])
    item = schema["properties"]["acts"]["items"]
    assert item["properties"]["intent"]["enum"] == ["REVEAL", "None"]
    assert item["properties"]["slots"]["items"]["properties"]["slot"]["enum"] == ["TITLE"]


def test_format_and_parse_round_trip():
    result = parse_acts('REVEAL(TITLE="Heat, the movie")|INQUIRE.ELICIT(GENRE)', VOCAB)
    assert strs(parse_acts(format_acts(result.acts), VOCAB)) == strs(result)
    assert format_acts([]) == "None"
