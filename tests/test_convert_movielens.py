"""MovieLens converter: items with normalised titles, ratings, profiles with a top-rated holdout."""

from __future__ import annotations

import csv

import pytest

from tests.test_convert_helpers import assert_balanced, reload, run_convert
from usersimcrs.core.profile import Ratings
from usersimcrs.errors import DataError


@pytest.fixture
def movielens(shared_data, tmp_path):
    raw = shared_data / "raw" / "movielens"
    inputs = [raw / "ml-25m-sample_movies_w_keywords_first200.csv", raw / "ml-25m-sample_ratings.csv"]
    report = run_convert("movielens", inputs, tmp_path / "out")
    return report, reload(tmp_path / "out"), tmp_path / "out", inputs


def test_items_ratings_and_reload(movielens):
    report, out, folder, inputs = movielens
    assert_balanced(report, ["items", "ratings"])
    with inputs[0].open(newline="", encoding="utf-8") as handle:
        raw_ids = [row["movieId"] for row in csv.DictReader(handle)]
    assert out["items"].ids() == raw_ids
    ratings = Ratings.from_csv(folder / "ratings.csv")
    assert len(ratings) == report["counts_in"]["ratings"] == 3739
    assert ratings.of("1")["296"] == 5.0
    assert report["warnings"]["ratings_of_unknown_items"]["count"] == 1


def test_trailing_articles_are_normalised_for_matching(movielens):
    _, out, _, _ = movielens
    items = out["items"]
    president = items.get("11")
    assert president.title == "The American President (1995)"
    assert president.values("original_title") == ["American President, The (1995)"]
    assert items.find_by_title("The American President", fuzzy=False).id == "11"
    assert items.find_by_title("American President, The (1995)", fuzzy=False).id == "11"
    lost = items.get("29")  # "City of Lost Children, The (Cité des enfants perdus, La) (1995)"
    assert lost.title == "The City of Lost Children (1995)"
    assert lost.values("alternative_titles") == ["Cité des enfants perdus, La"]
    assert items.get("1").values("keywords")[:2] == ["animation", "kids and family"]
    assert items.get("1").values("genres") == ["Adventure", "Animation", "Children", "Comedy", "Fantasy"]


def test_profiles_hold_out_the_top_rated_fifth(movielens):
    _, out, folder, _ = movielens
    ratings = Ratings.from_csv(folder / "ratings.csv")
    assert len(out["profiles"]) == len(ratings.users()) == 20
    for profile in out["profiles"]:
        mine = ratings.of(profile.user_id)
        targets = [t.id for t in profile.need.targets]
        seen = [s.item.id for s in profile.seen_items]
        assert len(targets) == int(0.2 * len(mine) + 1e-9)
        assert sorted(targets + seen) == sorted(mine)
        if targets and seen:
            assert min(mine[t] for t in targets) >= max(mine[s] for s in seen)
        assert not set(targets) & set(profile.preferences.items)


def test_bad_rating_and_missing_column(tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("userId,movieId,rating,timestamp\n1,2,4.0,1\n1,3,four,2\n1,4\n", encoding="utf-8")
    from data_converters.run import convert

    with pytest.raises(DataError, match=r"ratings\.csv:3: column 'rating': not a number"):
        convert("movielens", [path], tmp_path / "out")
    report = run_convert("movielens", [path], tmp_path / "out", "--skip-bad")
    assert [d["where"].rsplit("/", 1)[-1] for d in report["dropped"]] == [
        "ratings.csv:3: column 'rating'",
        "ratings.csv:4",
    ]
    assert "missing column 'rating'" in report["dropped"][1]["reason"]
    assert report["counts_out"]["ratings"] == 1
    assert_balanced(report, ["ratings"])
    missing = tmp_path / "r2.csv"
    missing.write_text("userId,movieId,timestamp\n1,2,3\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"r2\.csv: missing column 'rating'"):
        convert("movielens", [missing], tmp_path / "out2")
