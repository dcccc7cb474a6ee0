"""INSPIRED converter: the real TSV samples (quoting off, literal dicts, nan, repeated speakers), outcomes."""

from __future__ import annotations

import pytest

from tests.test_convert_helpers import assert_balanced, assert_same_dialogues, reload, run_convert
from usersimcrs.core.dialogue import AGENT
from usersimcrs.errors import DataError

HEADER = [
    "dialog_id",
    "utt_id",
    "speaker",
    "turn_id",
    "text",
    "text_with_placeholder",
    "movies",
    "genres",
    "people_names",
    "movie_dict",
    "genre_dict",
    "actor_dict",
    "director_dict",
    "others_dict",
    "expert_label",
    "second_label",
    "fine_label",
    "coarse_label",
    "movie_id",
]


@pytest.fixture
def inspired(shared_data, tmp_path):
    raw = shared_data / "raw" / "inspired"
    inputs = [
        raw / "dev_first10dialogs.tsv",
        raw / "dev_dialog_with_nan_labels.tsv",
        raw / "list_of_dialog_ids_with_movie_id_all.tsv",
    ]
    report = run_convert("inspired", inputs, tmp_path / "out")
    rows = [
        line.split("\t") for f in inputs[:2] for line in f.read_text(encoding="utf-8").splitlines()[1:] if line.strip()
    ]
    return report, reload(tmp_path / "out"), rows


def test_counts_ids_and_reload(inspired):
    report, out, rows = inspired
    assert_balanced(report, ["dialogues", "utterances"])
    assert report["counts_out"] == {**report["counts_out"], "dialogues": 11, "utterances": len(rows)}
    assert [d.conversation_id for d in out["dialogues"]] == list(dict.fromkeys(r[0] for r in rows))
    assert_same_dialogues(out["dialogues"], out["dialoguekit"])
    assert out["dialogues"][0].utterances[0].utterance_id == "20191202-103716_425_live.pkl:1"
    assert out["dialogues"][0].metadata["survey"]["rec_survey_id"] == "first_batch_199"


def test_consecutive_turns_stay_separate_and_quotes_survive(inspired):
    _, out, rows = inspired
    texts = [u.text for d in out["dialogues"] for u in d.utterances]
    assert len(texts) == len(rows)
    repeats = sum(
        a.participant == b.participant for d in out["dialogues"] for a, b in zip(d.utterances, d.utterances[1:])
    )
    assert repeats > 50
    # the authors wrote QUOTATION_MARK for '"'; it is restored, the raw text kept in metadata
    quoted = [u for d in out["dialogues"] for u in d.utterances if '"future"' in u.text]
    assert quoted and "QUOTATION_MARK" in quoted[0].metadata["raw_text"]


def test_literal_dicts_nan_and_strategies(inspired):
    report, out, _ = inspired
    nan_dialogue = out["dialogues"][-1]
    assert nan_dialogue.conversation_id == "20200305-072858_888_live.pkl"
    # {'Murder Mystery (2019)': 0, 'Office Space (1999): 1} has a missing quote; both entries survive
    assert nan_dialogue.metadata["movie_dict"] == {"Murder Mystery (2019)": 0, "Office Space (1999)": 1}
    assert report["warnings"]["dict_literal_repaired"]["count"] == 1
    # one row holds the string 'nan' in the label columns: the dialogue keeps the labels of the others
    assert nan_dialogue.metadata["recommendation_outcome"] == "accept_others"
    assert nan_dialogue.metadata["trailer_id"] == "dMIrlP61Z9s"
    assert report["warnings"]["nan_value"]["count"] == 3
    assert "nan" not in {str(a.value) for u in nan_dialogue.utterances for a in u.annotations}
    strategies = {u.annotation("strategy") for d in out["dialogues"] for u in d.utterances if u.participant == AGENT}
    assert {"credibility", "opinion_inquiry", "no_strategy"} <= strategies
    first = out["dialogues"][0]
    assert first.metadata["genre_dict"] == {"drama": 0}
    assert first.utterances[3].annotation("genres") == ["drama"]


def test_outcome_and_targets(inspired):
    _, out, _ = inspired
    first = out["dialogues"][0]
    assert first.metadata["accepted"] is True and first.metadata["outcome_coarse"] == "accept_new"
    need = out["needs"][0]["need"]
    assert [t.title for t in need.targets] == ["Full Metal Jacket (1987)"]  # named before "I accept"
    assert need.constraints == {"genres": "drama"}
    # no "accept" turn: the movie named before the recommender's last trailer mention
    by_id = {n["conversation_id"]: n["need"] for n in out["needs"]}
    assert [t.title for t in by_id["20191129-144328_319_live.pkl"].targets] == ["Last Christmas (2019)"]


def _tsv(path, rows):
    lines = ["\t".join(HEADER)] + ["\t".join(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(did, n, speaker, text, movies="", fine="reject", coarse="reject_new", label=""):
    return [
        did,
        str(n),
        speaker,
        str(n),
        text,
        text,
        movies,
        "",
        "",
        "{}",
        "{}",
        "{}",
        "{}",
        "{}",
        label,
        "",
        fine,
        coarse,
        "abc",
    ]


def test_rejected_recommendation_has_no_targets(tmp_path):
    path = _tsv(
        tmp_path / "d.tsv",
        [
            _row("d1", 1, "RECOMMENDER", 'Try "Heat"', movies="Heat (1995)", label="recommend"),
            _row("d1", 2, "SEEKER", "No thanks"),
            _row(
                "d2",
                1,
                "RECOMMENDER",
                "Try Alien",
                movies="Alien (1979)",
                fine="accept_rating_good",
                coarse="accept_new",
            ),
            _row("d2", 2, "SEEKER", "I accept", fine="accept_rating_good", coarse="accept_new"),
        ],
    )
    report = run_convert("inspired", [path], tmp_path / "out")
    out = reload(tmp_path / "out")
    rejected, accepted = out["dialogues"]
    assert rejected.metadata["accepted"] is False and rejected.metadata["recommended_movies"] == ["Heat (1995)"]
    assert out["needs"][0]["need"].targets == []
    assert [t.id for t in out["needs"][1]["need"].targets] == ["Alien (1979)"]
    assert rejected.utterances[0].text == 'Try "Heat"'  # quoting off: the quotes are text
    assert report["counts_out"]["items"] == 2


def test_short_row_names_line_and_column(tmp_path):
    good = _row("d1", 1, "SEEKER", "hi")
    path = _tsv(tmp_path / "d.tsv", [good, good[:-1], _row("d1", 3, "RECOMMENDER", "hello")])
    from data_converters.run import convert

    with pytest.raises(DataError, match=r"d\.tsv:3: expected 19 fields, got 18 \(missing column 'movie_id'\)"):
        convert("inspired", [path], tmp_path / "out")
    report = run_convert("inspired", [path], tmp_path / "out", "--skip-bad")
    assert report["dropped"][0]["where"].endswith("d.tsv:3")
    assert report["counts_out"]["utterances"] == 2
    assert_balanced(report, ["utterances", "dialogues"])


def test_missing_required_column(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("dialog_id\tutt_id\ttext\nd1\t1\thi\n", encoding="utf-8")
    from data_converters.run import convert

    with pytest.raises(DataError, match="missing column 'speaker'"):
        convert("inspired", [path], tmp_path / "out")
