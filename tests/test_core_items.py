"""Items: CSV loading with column mapping and delimiters, lookup by ID and (fuzzy) title."""

from __future__ import annotations

from pathlib import Path

import pytest

from usersimcrs.core import ItemCollection, ItemRef, Ratings, normalize_title
from usersimcrs.core.items import display_title
from usersimcrs.errors import DataError

TINY = Path(__file__).resolve().parents[1] / "configs" / "data" / "tiny_movies.csv"


def test_titles_with_trailing_articles_normalise():
    assert normalize_title("American President, The (1995)") == normalize_title("The American President")
    assert display_title("Godfather, The (1972)") == "The Godfather (1972)"
    assert normalize_title("Se7en (1995)") == "se7en"


def test_csv_mapping_delimiters_and_lookup():
    items = ItemCollection.from_csv(
        TINY, mapping={"genres": "GENRE", "keywords": "KEYWORD"}, delimiters={"genres": "|", "keywords": "|"}
    )
    assert len(items) == 40
    heat = items.get("2")
    assert heat.title == "Heat (1995)" and heat.year == 1995
    assert heat.values("GENRE") == ["Action", "Crime", "Thriller"]
    assert items.find_by_title("The Godfather").id == "37"
    assert items.find_by_title("the matrx (1999)").id == "12"  # fuzzy
    assert items.find_by_title("Heat (2001)") is None  # the year must agree
    assert items.find_by_title("Completely Unknown Film") is None
    assert items.resolve(ItemRef(title="Fargo")).id == "13"


def test_movielens_sample_loads(shared_data):
    items = ItemCollection.from_csv(
        shared_data / "items/movielens-25m-sample/movies_w_keywords.csv",
        mapping={"genres": "genres", "keywords": "keywords"},
        delimiters={"genres": "|", "keywords": "|"},
    )
    assert len(items) == 13816
    assert items.find_by_title("Toy Story (1995)").id == "1"
    ratings = Ratings.from_csv(shared_data / "items/movielens-25m-sample/ratings.csv")
    assert len(ratings) == 3739 and len(ratings.users()) == 20
    assert ratings.normalized(5.0) == 1.0 and ratings.normalized(0.5) == -1.0


def test_missing_column_names_file_and_column(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("id,name\n1,x\n")
    with pytest.raises(DataError, match=r"items.csv: missing column 'movieId'"):
        ItemCollection.from_csv(path)


def _apes() -> ItemCollection:
    from usersimcrs.core.items import Item

    return ItemCollection(
        [
            Item(id="a68", title="Planet of the Apes (1968)", year=1968),
            Item(id="a01", title="Planet of the Apes (2001)", year=2001),
            Item(id="m99", title="Matrix, The (1999)", year=1999),
        ]
    )


def test_a_bare_title_shared_by_remakes_stays_ambiguous():
    items = _apes()
    ref = items.resolve(ItemRef(title="Planet of the Apes"))
    assert ref.id is None and ref.resolution == "ambiguous" and sorted(ref.candidates) == ["a01", "a68"]
    assert items.find_by_title("Planet of the Apes") is None  # no silent pick
    dated = items.resolve(ItemRef(title="Planet of the Apes (1968)"))
    assert (dated.id, dated.resolution, dated.candidates) == ("a68", "exact", [])
    assert items.resolve(ItemRef(title="planet of the apes (2001)")).id == "a01"
    assert items.resolve(ItemRef(title="Planet of the Apes (1990)")).resolution == "unresolved"
    assert items.resolve(ItemRef(title="Plannet of the Apes")).resolution == "ambiguous"  # fuzzy tie
    assert items.resolve(ItemRef(title="The Matrix")).resolution == "normalized"
    assert items.resolve(ItemRef(title="The Matrx")).resolution == "fuzzy"


def test_parsed_titles_keep_their_ambiguity_and_json_stays_compact():
    from crs_connectors.item_parsing import items_from_text

    refs = items_from_text(
        "I would recommend the following items:\n1: Planet of the Apes\n2: The Matrix (1999)", _apes()
    )
    assert [(r.id, r.resolution) for r in refs] == [(None, "ambiguous"), ("m99", "exact")]
    assert refs[0].candidates == ["a68", "a01"]
    assert "candidates" not in ItemRef(id="x").model_dump() and "resolution" not in ItemRef(id="x").model_dump_json()
    assert ItemRef.model_validate_json(refs[0].model_dump_json()) == refs[0]
