"""Profile sources: generated from ratings / items, and read from converter files."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from tests.llm_sim_support import movie_items
from usersimcrs.config import ProfilesConfig
from usersimcrs.core.profile import Ratings, UserProfile
from usersimcrs.errors import ConfigError, DataError
from usersimcrs.runtime.context import RunContext
from usersimcrs.user_model.population import build_profile_source


def ratings() -> Ratings:
    r = Ratings((0.5, 5.0))
    for item, value in {"1": 5.0, "5": 4.5, "7": 4.5, "3": 1.0, "2": 3.0, "6": 5.0}.items():
        r.add("u1", item, value)
    for item, value in {"4": 5.0, "8": 4.5, "2": 0.5}.items():
        r.add("u2", item, value)
    return r


def test_generated_from_ratings_holds_out_liked_targets_and_keeps_the_rest_as_seen():
    config = ProfilesConfig(constraint_slots=["genres"], requestable_slots=["director"], holdout=0.5)
    source = build_profile_source(config, RunContext(items=movie_items(), ratings=ratings()))
    profile = source.profile(0, random.Random(3))
    assert profile.user_id == "u1"
    liked = ["1", "6", "5", "7"]  # best first, ties by ID
    held_out = profile.metadata["held_out"]
    assert held_out == liked[:2]
    target_ids = [t.id for t in profile.need.targets]
    assert sorted(target_ids) == sorted(held_out) and target_ids[0] == profile.metadata["primary_target"]
    primary = movie_items().get(target_ids[0])
    assert profile.need.constraints["genres"] in primary.values("genres")
    assert profile.need.requests == ["director"]
    seen = {s.item.id for s in profile.seen_items}
    assert seen == {"5", "7", "3", "2"} and not seen & set(held_out)
    assert {s.item.id: s.rating for s in profile.seen_items}["3"] == 1.0
    # preferences describe seen items only: no target leaks into them
    assert not set(profile.preferences.items) & set(held_out)


def test_generation_is_deterministic_and_index_based():
    config = ProfilesConfig(holdout=0.5)
    source = build_profile_source(config, RunContext(items=movie_items(), ratings=ratings()))
    a = source.profile(5, random.Random(11))
    b = source.profile(5, random.Random(11))
    assert a == b and a.user_id == "u2"
    drawn = {source.profile(0, random.Random(seed)).metadata["primary_target"] for seed in range(30)}
    assert drawn == {"1", "6"}  # the target is drawn with the conversation's rng


def test_generation_from_items_alone():
    config = ProfilesConfig(constraint_slots=["genres", "director"], persona={"age": "40"})
    source = build_profile_source(config, RunContext(items=movie_items()))
    profile = source.profile(2, random.Random(5))
    target = movie_items().get(profile.need.targets[0].id)
    assert profile.need.constraints["director"] == target.values("director")[0]
    assert profile.need.constraints["genres"] in target.values("genres")
    assert profile.persona.fields == {"age": "40"}
    assert profile == source.profile(2, random.Random(5))


def test_generate_needs_items_or_ratings():
    with pytest.raises(ConfigError):
        build_profile_source(ProfilesConfig(), RunContext())


def test_file_source_reads_profiles_and_needs_and_cycles(tmp_path):
    items = movie_items()
    profile = UserProfile(user_id="imdb-7").model_dump(mode="json")
    profile["need"]["targets"] = [{"title": "Heat"}]
    need = {"conversation_id": "redial-20001", "need": {"constraints": {"genres": "Comedy"}, "targets": [{"id": "2"}]}}
    path = tmp_path / "information_needs.jsonl"
    path.write_text(json.dumps(profile) + "\n" + json.dumps(need) + "\n")
    source = build_profile_source(ProfilesConfig(source="file", path=str(tmp_path)), RunContext(items=items))
    first, second, third = (source.profile(i, random.Random(0)) for i in range(3))
    assert first.user_id == "imdb-7" and first.need.targets[0].id == "1"  # title resolved
    assert second.user_id == "redial-20001" and second.need.constraints == {"genres": "Comedy"}
    assert second.metadata["conversation_id"] == "redial-20001"
    assert third == first
    third.need.constraints["x"] = "y"
    assert "x" not in source.profile(2, random.Random(0)).need.constraints  # no shared state


def test_file_source_errors_name_file_and_record(tmp_path):
    path = tmp_path / "profiles.jsonl"
    path.write_text('{"user_id": "a"}\n{"need": {"constraints": {"genres": 3}}}\n')
    with pytest.raises(DataError, match=r"profiles.jsonl: record 2: key 'constraints.genres': "):
        build_profile_source(ProfilesConfig(source="file", path=str(path)), RunContext())
    with pytest.raises(ConfigError, match="file not found"):
        build_profile_source(ProfilesConfig(source="file", path=str(tmp_path / "nope.jsonl")), RunContext())
    with pytest.raises(ConfigError):
        build_profile_source(ProfilesConfig(source="file"), RunContext())


def test_real_movielens_sample(shared_data):
    from usersimcrs.core.items import ItemCollection

    folder = shared_data / "items" / "movielens-25m-sample"
    items = ItemCollection.from_csv(folder / "movies_w_keywords.csv", delimiters={"genres": "|", "keywords": "|"})
    r = Ratings.from_csv(folder / "ratings.csv")
    source = build_profile_source(ProfilesConfig(), RunContext(items=items, ratings=r))
    for index in range(len(r.users())):
        profile = source.profile(index, random.Random(index))
        assert profile.need.targets and all(t.id in items for t in profile.need.targets)
        assert not profile.seen_ids() & {t.id for t in profile.need.targets}


def test_two_conversations_of_one_user_share_one_read_only_history():
    """Issue #22: the user's profile is built once per run; its conversations share it, read-only."""
    import random as _random

    import pytest

    from benchmarks.setups import llm_user_config
    from usersimcrs.engine.runner import load_items, load_ratings
    from usersimcrs.user_model.population import GeneratedProfiles

    config = llm_user_config("http://127.0.0.1:9/v1", conversations=1, concurrency=1)
    items, ratings = load_items(config), load_ratings(config)
    users = len(ratings.users())
    source = GeneratedProfiles(config.profiles, items, ratings)
    first = source.profile(0, _random.Random(5))
    again = source.profile(users, _random.Random(5))  # conversation `users` plays the same user
    other_draw = source.profile(2 * users, _random.Random(99))
    fresh = GeneratedProfiles(config.profiles, items, ratings).profile(0, _random.Random(5))
    assert first.user_id == again.user_id == other_draw.user_id and first.seen_items
    assert first.seen_items is again.seen_items is other_draw.seen_items  # one history object, not copies
    assert first.preferences is again.preferences is other_draw.preferences
    assert first.need is not again.need and first.metadata is not again.metadata  # each conversation's own
    assert first.model_dump_json() == again.model_dump_json() == fresh.model_dump_json()
    with pytest.raises(TypeError, match="read-only"):
        first.seen_items.append(first.seen_items[0])
    with pytest.raises(TypeError, match="read-only"):
        first.preferences.items["x"] = 1.0
    with pytest.raises(TypeError, match="read-only"):
        next(iter(first.preferences.slots.values()))["x"] = 1.0
    copied = first.model_copy(deep=True)  # a deep copy is the caller's own, changeable
    copied.seen_items.append(copied.seen_items[0])
    copied.preferences.items["x"] = 1.0
    assert source.profile(0, _random.Random(5)).model_dump_json() == fresh.model_dump_json()


def test_a_file_profile_is_shared_read_only_across_its_conversations(tmp_path):
    import pytest

    from usersimcrs.core.profile import UserProfile

    profile = UserProfile.model_validate(
        {"user_id": "u1", "seen_items": [{"item": {"id": "1", "title": "Heat (1995)"}, "rating": 4.0}]}
    )
    path = tmp_path / "profiles.jsonl"
    path.write_text(profile.model_dump_json() + "\n", encoding="utf-8")
    source = build_profile_source(ProfilesConfig(source="file", path=str(path)), RunContext())
    a, b = source.profile(0, random.Random(1)), source.profile(1, random.Random(2))
    assert a.seen_items is b.seen_items and a.need is not b.need and a == b == profile
    with pytest.raises(TypeError, match="read-only"):
        a.seen_items.clear()


def test_profile_id_and_compact_form_of_a_shared_history_match_a_full_serialisation():
    """The user's part is serialised once and spliced in: the bytes must be pydantic's own, whatever the need holds."""
    from usersimcrs.core.dialogue import ItemRef
    from usersimcrs.core.profile import (
        InformationNeed,
        Persona,
        Preferences,
        ReadOnlyList,
        SeenItem,
        compact_profile,
        profile_id,
        profile_json,
    )

    items = movie_items()
    seen = ReadOnlyList([SeenItem(item=items.get(i).ref(), rating=4.0) for i in list(items.ids())[:3]])
    seen_plain = [SeenItem(item=ItemRef(title="Unknown Film", raw="x"), rating=None), *seen]
    users = [
        (Preferences(), None),  # both at their defaults: left out
        (Preferences(items={"1": 0.5}, slots={"genres": {"Drama": -0.25}}, likes=["x"]), Persona()),  # {} kept
        (Preferences(narrative="likes old films"), Persona(fields={"age": "30"})),
    ]
    cases = [
        (InformationNeed(), {}),
        (InformationNeed(constraints={"preferences": "x", "genre": "Drama"}), {"a": [1, 2.5, None], "ü": {"b": "é"}}),
        (InformationNeed(targets=[items.get(items.ids()[0]).ref(), ItemRef(title="Only A Title")]), {"metadata": 1}),
    ]
    for (preferences, persona), (need, metadata) in itertools.product(users, cases):
        shared = UserProfile(user_id='u"1', seen_items=seen_plain, preferences=preferences, persona=persona)
        shared.__dict__["seen_items"] = ReadOnlyList(seen_plain)
        profile = shared.model_copy(update={"need": need, "metadata": metadata})
        assert profile_json(profile) == profile.model_dump_json().encode()
        plain = profile.model_copy(update={"seen_items": list(profile.seen_items)})
        assert profile_id(profile) == profile_id(plain)
        assert compact_profile(profile, items) == compact_profile(plain, items)
        assert compact_profile(profile, None) == compact_profile(plain, None)
        assert list(compact_profile(profile, items)) == list(compact_profile(plain, items))  # same key order
