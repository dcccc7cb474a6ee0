"""A conversion that writes fewer items than it read says why in conversion_report.json (IARD movies)."""

from __future__ import annotations

from tests.test_convert_helpers import run_convert


def test_iard_says_why_it_writes_only_some_movies(shared_data, tmp_path):
    movies = shared_data / "raw" / "redial" / "movies_with_mentions.csv"
    dialogues = shared_data / "raw" / "iard" / "umap2020_IARD_Cai_first15.json"
    report = run_convert("iard", [dialogues, movies], tmp_path / "out")
    movie_rows = sum(1 for line in movies.read_text(encoding="utf-8").splitlines()[1:] if line.strip())
    assert report["counts_in"]["movies"] == movie_rows
    assert report["counts_out"]["items"] < movie_rows
    (partial,) = [p for p in report["partial"] if p["what"] == "movies"]
    assert partial["read"] == report["counts_in"]["movies"]
    assert partial["written"] == report["counts_out"]["items"]
    assert "mentioned in the converted dialogues" in partial["reason"]
    assert sum(partial["counts"].values()) == partial["written"]


def test_iard_without_a_movie_list_has_nothing_to_explain(shared_data, tmp_path):
    dialogues = shared_data / "raw" / "iard" / "umap2020_IARD_Cai_first15.json"
    assert run_convert("iard", [dialogues], tmp_path / "out")["partial"] == []
