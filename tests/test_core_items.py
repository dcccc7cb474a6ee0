"""Items: CSV loading with column mapping and delimiters, lookup by ID and (fuzzy) title."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from usersimcrs.core import ItemCollection, ItemRef, Ratings, normalize_title
from usersimcrs.core.items import FUZZY_INDEX_AFTER, FuzzyTitleIndex, Item, display_title, split_values
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


def test_a_repeated_title_lookup_does_not_rescore_the_catalogue():
    """Issue #22: misses and hits are remembered per collection; only the first miss is scored."""
    items = ItemCollection.from_csv(TINY, delimiters={"genres": "|", "keywords": "|"})
    stats = items.title_stats
    first = items.resolve(ItemRef(title="The Matrx (1999)", raw="The Matrx (1999)"))
    assert first.id == "12" and first.resolution == "fuzzy"
    assert stats.fuzzy_searches == 1 and stats.titles_scored <= len(items)
    scored = stats.titles_scored
    again = items.resolve(ItemRef(title="The Matrx (1999)", raw="The Matrx (1999)"))
    assert again == first and stats.fuzzy_searches == 1 and stats.titles_scored == scored and stats.remembered == 1
    for _ in range(3):  # a miss is remembered too
        assert items.resolve(ItemRef(title="Completely Unknown Film")).resolution == "unresolved"
    assert stats.fuzzy_searches == 2 and stats.remembered == 3
    assert items.resolve(ItemRef(title="Heat (1995)")).resolution == "exact" and stats.fuzzy_searches == 2


def test_remembered_matches_keep_the_ambiguity_semantics():
    items = _apes()
    for _ in range(2):  # the second round comes from the memo and must read the same
        assert items.resolve(ItemRef(title="Planet of the Apes")).resolution == "ambiguous"
        assert items.resolve(ItemRef(title="Plannet of the Apes")).resolution == "ambiguous"
        assert items.resolve(ItemRef(title="The Matrx")).id == "m99"
    assert items.title_stats.remembered == 3
    items.add(Item(id="a14", title="Planet of the Apes (2014)", year=2014))  # a change forgets what was remembered
    assert sorted(items.resolve(ItemRef(title="Planet of the Apes")).candidates) == ["a01", "a14", "a68"]


def _full_scan(items: ItemCollection, key: str, cutoff: float) -> list:
    from rapidfuzz import fuzz, process

    return process.extract(key, list(items._by_title), scorer=fuzz.ratio, limit=5, score_cutoff=cutoff)


def test_the_fuzzy_prefilter_finds_what_a_full_scan_finds(shared_data):
    """The length and bigram bounds drop only titles that cannot reach the cutoff: same matches, same order."""
    import random

    from usersimcrs.testing.crs_servers import TitleStyle, load_catalog

    path = shared_data / "items/movielens-25m-sample/movies_w_keywords.csv"
    items = ItemCollection.from_csv(path, delimiters={"genres": "|", "keywords": "|"})
    rng = random.Random(7)
    queries = ["", "a", "ab", "the", "x" * 60]
    for movie in rng.sample(load_catalog(path), 150):
        queries += [normalize_title(TitleStyle(1.0, 0.0, 1).write(movie)[0])]  # spelling variants
        queries += [normalize_title(TitleStyle(0.0, 1.0, 2).write(movie)[0])]  # titles the catalogue lacks
        key = normalize_title(movie.title)
        cut = rng.randrange(len(key))
        queries += [key[:cut] + rng.choice("aeiouxz ") + key[cut + 1 :], key[:cut] + key[cut + 1 :]]
    for cutoff in (90.0, 80.0):
        for key in queries:
            assert items._fuzzy_matches(key, cutoff) == _full_scan(items, key, cutoff), (key, cutoff)
    stats = items.title_stats
    indexed = stats.fuzzy_searches - FUZZY_INDEX_AFTER  # the first ones scan every title, then the index serves
    assert stats.titles_scored - FUZZY_INDEX_AFTER * len(items._by_title) < indexed * len(items) / 5


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text("abcde xyz", min_size=1, max_size=14), min_size=1, max_size=40),
    st.text("abcde xyz", max_size=16),
    st.sampled_from([90.0, 85.0, 70.0]),
)
def test_the_fuzzy_prefilter_is_lossless_on_any_catalogue(titles, query, cutoff):
    items = ItemCollection(Item(id=str(i), title=title) for i, title in enumerate(titles))
    key = normalize_title(query)
    index = FuzzyTitleIndex(list(items._by_title))
    pool = index.candidates(key, cutoff)
    accepted = {choice for choice, _, _ in _full_scan(items, key, cutoff)}
    assert pool is None or accepted <= {index.choices[j] for j in pool}  # every title the scan accepts is a candidate
    items._scans = FUZZY_INDEX_AFTER  # straight to the index
    assert items._fuzzy_matches(key, cutoff) == _full_scan(items, key, cutoff)


def test_indexes_built_in_steps_are_the_indexes_a_lookup_builds_and_a_change_between_steps_drops_them():
    """`index_in_steps` (the engine runs it while the first replies are awaited) builds exactly what the
    first lookups would: same title keys, same fuzzy postings, so the same matches; an item added
    between two steps makes it stop, and the next lookup builds the indexes of the changed collection."""
    items = ItemCollection.from_csv(TINY, delimiters={"genres": "|", "keywords": "|"})
    lazy = ItemCollection.from_csv(TINY, delimiters={"genres": "|", "keywords": "|"})
    steps = list(items.index_in_steps(step=7))
    assert len(steps) >= 40 // 7 * 2  # both indexes, a step of 7 titles at a time
    assert items._titles is not None and items._fuzzy is not None
    assert items._titles == lazy._title_indexes()
    built = FuzzyTitleIndex(list(lazy._by_title))
    assert (items._fuzzy.choices, items._fuzzy.postings, items._fuzzy.by_length) == (
        built.choices,
        built.postings,
        built.by_length,
    )
    for title in ("the matrx (1999)", "Heat (1995)", "Fargo", "Completely Unknown Film", "godfathr"):
        assert items.match_title(title) == lazy.match_title(title), title
    assert items.title_stats.titles_scored < lazy.title_stats.titles_scored  # no full scans before the index

    changing = ItemCollection.from_csv(TINY, delimiters={"genres": "|", "keywords": "|"})
    stepper = changing.index_in_steps(step=7)
    next(stepper)
    changing.add(Item(id="new", title="Brand New Film (2030)"))
    assert list(stepper) == [] and changing._titles is None and changing._fuzzy is None
    assert changing.find_by_title("Brand New Film").id == "new"


def test_resolve_title_is_resolve_of_a_title_only_reference():
    """The one-step reference of a parsed title (issue #22) equals resolving ItemRef(title, raw) and copying."""
    items = _apes()
    for title in ("The Matrix (1999)", "matrix", "The Matrx", "Planet of the Apes", "Unknown Film", ""):
        assert items.resolve_title(title) == items.resolve(ItemRef(title=title, raw=title)), title


@settings(max_examples=300, deadline=None)
@given(st.text(" \t\n\u00a0\u2009\x1c,()1995abcTheA'.-é", max_size=30))
def test_title_keys_in_one_pass_are_the_keys_of_the_separate_functions(title):
    from usersimcrs.core.items import _exact_key, _title_keys

    assert _title_keys(title) == (normalize_title(title), _exact_key(title), _exact_key(display_title(title)))


_YEAR_PATTERN = re.compile(r"\s*\((\d{4})\)\s*$")  # the split's definition, as a regex


def _split_year_by_regex(title: str) -> tuple[str, int | None]:
    match = _YEAR_PATTERN.search(title)
    return (title.strip(), None) if not match else (title[: match.start()].strip(), int(match.group(1)))


@given(st.text(" \t\n\u00a0\u2009\x1c\x85()0123456789\u0661\u00b2Heat é,", max_size=24))
@settings(max_examples=400)
def test_split_year_is_the_regex_split(title):
    from usersimcrs.core.items import split_year

    assert split_year(title) == _split_year_by_regex(title)


@pytest.mark.parametrize(
    "title, expected",
    [
        ("Heat (1995)", ("Heat", 1995)),
        ("  Heat   (1995) \n", ("Heat", 1995)),
        ("(1995)", ("", 1995)),
        ("Heat (19955)", ("Heat (19955)", None)),
        ("Heat (1995) extended", ("Heat (1995) extended", None)),
        ("Heat (\u0661\u0669\u0669\u0665)", ("Heat", 1995)),  # Arabic-Indic digits are \d, as int() reads them
        ("Heat (\u00b9\u00b9\u00b9\u00b9)", ("Heat (\u00b9\u00b9\u00b9\u00b9)", None)),  # superscripts are not
    ],
)
def test_split_year_cases(title, expected):
    from usersimcrs.core.items import split_year

    assert split_year(title) == expected == _split_year_by_regex(title)


def test_split_values_strips_and_drops_as_a_strip_of_every_value_does():
    cells = ["a|b", " a|b", "a |b", "a| b", "a|b ", "a||b", "|", "", " ", "a\t|b", "a|\xa0b", "a\u2003|b",
             "Sci-Fi|Film-Noir", "a | b | ", "x", " x ", "a,b", "a , b"]  # fmt: skip
    for cell in cells:
        for sep in ("|", ",", " ", None):
            naive = [v.strip() for v in cell.split(sep)] if sep else [cell.strip()]
            assert split_values(cell, sep) == [v for v in naive if v], (cell, sep)


def test_items_read_from_csv_equal_validated_items(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text(
        'movieId,title,genres\n1,Heat (1995),Action|Crime\n2,"American President, The (1995)",\n3,Untitled,(no genres listed)\n',
        encoding="utf-8",
    )
    items = list(ItemCollection.from_csv(path, delimiters={"genres": "|"}))
    assert [i.model_dump() for i in items] == [Item.model_validate(i.model_dump()).model_dump() for i in items]
    assert items[0] == Item(id="1", title="Heat (1995)", year=1995, attributes={"genres": ["Action", "Crime"]})
    assert items[1].year == 1995 and items[1].attributes == {} and items[2].year is None
    assert all(i.model_fields_set == {"id", "title", "year", "attributes"} for i in items)


def test_a_lookup_during_the_step_build_means_no_index_is_built_twice(monkeypatch):
    """When a CRS reply's lookup builds an index before `index_in_steps` has (an answer that comes fast),
    the step build of that index stops at its next step instead of building a second copy (issue #22:
    at 13.8k titles each copy is about 0.2 s of CPU)."""
    import usersimcrs.core.items as items_module

    indexed: list[str] = []
    original = items_module._index_title

    def counting(item, by_title, by_exact):
        indexed.append(item.id)
        original(item, by_title, by_exact)

    monkeypatch.setattr(items_module, "_index_title", counting)
    items = ItemCollection.from_csv(TINY, delimiters={"genres": "|", "keywords": "|"})
    stepper = items.index_in_steps(step=7)
    next(stepper)  # 7 titles indexed
    assert items.find_by_title("Heat (1995)") is not None  # the lookup builds the title indexes whole
    monkeypatch.setattr(items_module, "FUZZY_INDEX_AFTER", 0)  # and its next fuzzy miss the fuzzy index
    next(stepper)  # the step build sees the titles built and goes on to the fuzzy index
    built = items._titles
    assert items.match_title("godfathr").resolution in ("fuzzy", "unresolved") and items._fuzzy is not None
    fuzzy = items._fuzzy
    assert len(list(stepper)) == 0  # it stops at once: nothing more is built
    assert len(indexed) == len(items) + 7  # the first step's 7 titles, then the lookup's whole index: not twice
    assert items._titles is built and items._fuzzy is fuzzy  # the lookup's indexes are the ones kept
