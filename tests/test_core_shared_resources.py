"""What a command shares between its runs (`SharedResources`): each item file read once per file state and
options, models loaded once, and nothing a run does changes what another run is answered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.metrics_fixtures import dialogue, ref
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.run_folder import Run, items_from_section
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.errors import DataError
from usersimcrs.metrics import satisfaction
from usersimcrs.metrics.compute import compute_metrics

TINY = Path(__file__).resolve().parents[1] / "configs" / "data" / "tiny_movies.csv"
OPTIONS = {"mapping": {"genres": "genres"}, "delimiters": {"genres": "|"}}


def test_one_item_file_is_read_once_per_options_and_again_when_it_changes(tmp_path):
    path = tmp_path / "movies.csv"
    path.write_bytes(TINY.read_bytes())
    shared = SharedResources()
    first = shared.items(path, **OPTIONS)
    assert shared.items(str(tmp_path / "." / "movies.csv"), **OPTIONS) is first  # the same file, however named
    assert len(first) == 40 and first.get("1").values("genres")[:2] == ["Adventure", "Animation"]
    assert shared.items(path) is not first and shared.items(path).get("1").values("keywords")  # other options
    assert SharedResources().items(path, **OPTIONS) is not first  # another command reads its own
    cut = shared.items(path, max_items=5, **OPTIONS)
    assert cut.ids() == first.ids()[:5] and shared.items(path, max_items=5, **OPTIONS) is cut
    assert cut.get("1") is first.get("1")  # cut from the collection already read
    path.write_bytes(TINY.read_bytes().replace(b"Toy Story", b"Toy Tale"))
    os.utime(path, ns=(1, 1))  # a rewrite within the clock's resolution still changes size or time
    reread = shared.items(path, **OPTIONS)
    assert reread is not first and reread.get("1").title == "Toy Tale (1995)"


def test_an_unreadable_item_file_is_the_same_error_as_before_and_nothing_is_kept(tmp_path):
    shared = SharedResources()
    with pytest.raises(DataError, match="cannot read item file"):
        shared.items(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("id,name\n1,x\n")
    with pytest.raises(DataError, match="missing column 'movieId'"):
        shared.items(bad)
    bad.write_text("movieId,title\n1,Heat (1995)\n")
    os.utime(bad, ns=(2, 2))
    assert shared.items(bad).get("1").title == "Heat (1995)"


def test_derived_resources_are_one_per_source_object_not_per_equal_value():
    shared = SharedResources()
    one, other = ItemCollection.from_csv(TINY), ItemCollection.from_csv(TINY)
    built: list[int] = []

    def build() -> list[str]:
        built.append(1)
        return one.ids()

    first = shared.derived(one, "ids", build)
    assert shared.derived(one, "ids", build) is first and built == [1]
    assert shared.derived(other, "ids", build) is not first and built == [1, 1]  # equal content, another object
    assert shared.derived(one, ("ids", "again"), build) is not first  # another key


def test_runs_read_with_one_resources_share_their_collection(tmp_path):
    section = {"path": str(TINY), **OPTIONS}
    shared = SharedResources()
    assert items_from_section(section, shared) is items_from_section(dict(section), shared)
    assert items_from_section({**section, "max_items": 3}, shared).ids() == ["1", "2", "3"]
    assert items_from_section(section) is not items_from_section(section)  # no resources: a read of its own
    assert Run(tmp_path, resources=shared).resources is shared and Run(tmp_path).resources is not shared


def test_a_shared_collection_answers_as_a_fresh_one_whatever_was_asked_before():
    """The title memo and indexes a collection keeps are pure: a cell asking after another gets the
    answers it would get alone (the other engineer's fuzzy index is built after 32 fuzzy misses)."""
    titles = [f"Heat {n}" for n in range(40)] + ["Se7en", "The Usual Suspect", "toy story (1995)", "Alien", ""]
    shared = ItemCollection.from_csv(TINY)
    for title in reversed(titles):  # another run asks first, in another order
        shared.match_title(title)
    for title in titles:
        assert shared.match_title(title) == ItemCollection.from_csv(TINY).match_title(title), title


class _Classifier:
    def classify_text(self, texts):
        return [4 for _ in texts]


def test_the_satisfaction_classifier_is_loaded_once_per_command(monkeypatch):
    loads: list[int] = []

    def load() -> _Classifier:
        loads.append(1)
        return _Classifier()

    monkeypatch.setattr(satisfaction, "load_classifier", load)
    dialogues = [dialogue(f"d{i}", [], [[ref("1")]], user_texts=["any sci-fi?"]) for i in range(3)]
    shared = SharedResources()
    for _ in range(2):  # two runs of one command
        table = compute_metrics(dialogues, resources=shared).conversations
        assert list(table["satisfaction"]) == [4.0] * 3
    assert loads == [1]
    compute_metrics(dialogues)  # a computation of its own loads its own
    assert loads == [1, 1]
