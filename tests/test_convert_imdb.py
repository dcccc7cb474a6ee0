"""IMDB (PEPPER schema) converter on a synthetic fixture written from SCHEMA.md (no real record is public)."""

from __future__ import annotations

import json

import pytest

from tests.test_convert_helpers import assert_balanced, reload, run_convert
from usersimcrs.errors import DataError

GENRES = ["Drama", "Comedy", "Horror", "Action", "Romance"]


def _review(n: int, rating: str | None) -> dict:
    """One review object with the keys PEPPER's code reads (title with year, rating "8/10", ...)."""
    review = {
        "title": f"Film {n} ({1990 + n})",
        "imdb_id": f"tt{n:07d}",
        "genres": [GENRES[n % 5], GENRES[(n + 1) % 5]],
        "director": [f"Director {n}"],
        "cast": [f"Actor {n}", f"Actor {n + 1}"],
        "date": f"1 March 20{10 + n}",
        "raw_review": f"My review of film {n}.",
        "abstract": f"[Like]\n- the score of film {n}\n[Dislike]\n"
        + ("None" if n % 2 else f"- the length of film {n}"),
    }
    if rating is not None:
        review["rating"] = rating
    return review


@pytest.fixture
def user_data(tmp_path):
    ratings = ["9/10", "3/10", "10/10", "7/10", "7/10", "1/10", "7/10", "5/10", "8/10", "2/10"]
    data = {
        "u1": [_review(i, r) for i, r in enumerate(ratings)],
        "u2": [],  # dropped: PEPPER drops users without reviews
        "u3": [_review(20, "6/10"), _review(21, None), _review(22, "bad"), _review(23, "9/10"), _review(24, "4/10")],
    }
    path = tmp_path / "user_data_IMDB.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_seen_target_split_and_profiles(user_data, tmp_path):
    report = run_convert("imdb", [user_data], tmp_path / "out")
    out = reload(tmp_path / "out")
    assert_balanced(report, ["users", "reviews"])
    assert [d["reason"] for d in report["dropped"]] == ["user has no reviews"]
    u1, u3 = out["profiles"]
    assert u1.user_id == "u1" and u1.metadata["seen/target"] == "8 / 2"
    # top-rated 20% held out: 10/10 and 9/10
    assert [t.id for t in u1.need.targets] == ["tt0000002", "tt0000000"]
    assert len(u1.seen_items) == 8 and {s.rating for s in u1.seen_items} == {1, 2, 3, 5, 7, 8}
    assert next(s for s in u1.seen_items if s.item.id == "tt0000001").review == "My review of film 1."
    # likes/dislikes from the seen reviews' abstracts only: nothing from the targets leaks
    assert "the score of film 3" in u1.preferences.likes
    assert "the score of film 2" not in u1.preferences.likes and "the score of film 0" not in u1.preferences.likes
    assert "the length of film 4" in u1.preferences.dislikes and all("None" not in d for d in u1.preferences.dislikes)
    assert u1.preferences.items["tt0000005"] == -1.0  # 1/10 on the 1..10 scale
    # unparseable ratings are never targets
    assert [t.id for t in u3.need.targets] == ["tt0000023"]
    assert report["warnings"]["rating_missing"]["count"] == 2
    film = out["items"].get("tt0000004")
    assert film.title == "Film 4 (1994)" and film.year == 1994
    assert film.values("directors") == ["Director 4"] and film.values("actors") == ["Actor 4", "Actor 5"]
    assert [n["conversation_id"] for n in out["needs"]] == ["imdb:u1", "imdb:u3"]


def test_ties_broken_by_seed_reproducibly(user_data, tmp_path):
    def targets(seed: int, name: str) -> list[list[str]]:
        run_convert("imdb", [user_data], tmp_path / name, "--seed", str(seed), "--holdout", "0.4")
        return [[t.id for t in p.need.targets] for p in reload(tmp_path / name)["profiles"]]

    first = targets(1, "a")
    assert first == targets(1, "b")
    # 40% of 10 = 4 targets: 10, 9, 8 and one of the three 7/10 reviews, chosen by the seed
    assert first[0][:3] == ["tt0000002", "tt0000000", "tt0000008"]
    picks = {targets(seed, f"s{seed}")[0][3] for seed in range(8)}
    assert picks <= {"tt0000003", "tt0000004", "tt0000006"} and len(picks) > 1


def test_title_basics_adds_metadata(user_data, tmp_path):
    basics = tmp_path / "title.basics.tsv"
    basics.write_text(
        "tconst\ttitleType\tprimaryTitle\toriginalTitle\tisAdult\tstartYear\tendYear\truntimeMinutes\tgenres\n"
        'tt0000001\tmovie\tFilm "One"\tFilm "One"\t0\t1991\t\\N\t101\tDrama,Comedy\n'
        "tt9999999\tmovie\tUnreviewed\tUnreviewed\t0\t2001\t\\N\t\\N\tHorror\n",
        encoding="utf-8",
    )
    run_convert("imdb", [user_data, basics], tmp_path / "out")
    items = reload(tmp_path / "out")["items"]
    film = items.get("tt0000001")
    assert film.values("runtime_minutes") == ["101"] and film.values("title_type") == ["movie"]
    assert "tt9999999" not in items  # only titles of reviewed movies when reviews are given
    run_convert("imdb", [basics], tmp_path / "only")
    only = reload(tmp_path / "only")["items"]
    assert only.get("tt0000001").title == 'Film "One" (1991)'  # quoting off: the quotes are part of the title
    assert only.get("tt9999999").values("genres") == ["Horror"] and not only.get("tt9999999").values("runtime_minutes")


def test_bad_reviews(tmp_path):
    path = tmp_path / "u.json"
    path.write_text(json.dumps({"u1": [{"rating": "5/10"}, _review(1, "5/10")], "u2": "oops"}), encoding="utf-8")
    from data_converters.run import convert

    with pytest.raises(DataError, match=r"u\.json: user u1: review 0: needs a 'title' or 'imdb_id'"):
        convert("imdb", [path], tmp_path / "out")
    report = run_convert("imdb", [path], tmp_path / "out", "--skip-bad")
    assert len(report["dropped"]) == 2 and report["counts_out"]["profiles"] == 1
    assert_balanced(report, ["users", "reviews"])
    broken = tmp_path / "broken.json"
    broken.write_text('{"u1": [', encoding="utf-8")
    with pytest.raises(DataError, match=r"broken\.json:1:9: not valid JSON"):
        convert("imdb", [broken], tmp_path / "out2")
