"""Profiles stored once per run in profiles.jsonl: writing, resume, reading (new and old format), line size,
and metrics / judges / export giving the same results as with profiles embedded in every line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from benchmarks.setups import llm_user_config
from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.dialoguekit_io import dialogue_to_dialoguekit, read_dialoguekit
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.core.profile import (
    InformationNeed,
    ProfileRecord,
    SeenItem,
    UserProfile,
    compact_profile,
    expand_profile,
    profile_id,
)
from usersimcrs.core.run_folder import PROFILES, load_run
from usersimcrs.engine.runner import load_items, load_ratings, run
from usersimcrs.judges.prompt_builder import ConversationView
from usersimcrs.metrics.compute import compute_metrics
from usersimcrs.metrics.validity import ValidityOptions, checkable_titles, leakage_flag
from usersimcrs.pipeline.export import export_run
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing.llm_server import LLMServer
from usersimcrs.user_model.population import build_profile_source

ROOT = Path(__file__).resolve().parents[1]
LINE_BUDGET = 8 * 1024  # bytes of one dialogues.jsonl line for a 6-utterance LLM-user conversation


def _config(**over) -> RunConfig:
    data = {
        "name": "prof",
        "seed": 11,
        "conversations": 12,
        "concurrency": 3,
        "max_turns": 4,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "profiles": {"constraint_slots": ["genres"]},
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1"},
        "simulator": {"type": "tests.engine_plugins:CountingUser", "turns": 3},
        "crs": {"type": "tests.engine_plugins:EchoCRS"},
        "progress": False,
        **over,
    }
    return RunConfig.model_validate(data)


def _expected_profiles(config: RunConfig) -> dict[int, UserProfile]:
    """What the engine hands each conversation's simulator: the profile source, seeded per conversation."""
    from usersimcrs.engine.conversation import plan

    source = build_profile_source(config.profiles, RunContext(items=load_items(config), ratings=load_ratings(config)))
    return {i: source.profile(i, random.Random(plan(config, i).seed)) for i in range(config.conversations)}


def _profile_lines(run_dir: Path) -> list[dict]:
    return list(iter_jsonl(run_dir / PROFILES))


def _write_embedded(dialogues: list[Dialogue], run_dir: Path, manifest: Path) -> None:
    """The same run in the old layout: every line embeds its profile, no profiles.jsonl."""
    run_dir.mkdir(parents=True)
    with JsonlWriter(run_dir / "dialogues.jsonl") as writer:
        for dialogue in dialogues:
            writer.write({**dialogue.model_dump(mode="json", exclude={"profile_id"})})
    (run_dir / "manifest.json").write_text(manifest.read_text())


# ---------------------------------------------------------------- writing and reading


def test_run_stores_each_distinct_profile_once_and_lines_only_name_it(tmp_path):
    config = _config()
    run(config, tmp_path / "r")
    lines = list(iter_jsonl(tmp_path / "r" / "dialogues.jsonl"))
    assert len(lines) == 12
    assert all(line["profile"] is None and line["profile_id"] for line in lines)
    stored = _profile_lines(tmp_path / "r")
    ids = [rec["profile_id"] for rec in stored]
    assert len(ids) == len(set(ids))  # one line per profile ID
    assert set(ids) == {line["profile_id"] for line in lines}  # every referenced profile is stored, none extra
    expected = _expected_profiles(config)
    assert len(ids) == len({profile_id(p) for p in expected.values()})  # one line per distinct profile
    # items of the collection are stored by bare ID; the profile line carries no item titles
    assert all(isinstance(t, str) for rec in stored for t in rec["profile"]["need"]["targets"])
    assert all(isinstance(s["item"], str) for rec in stored for s in rec["profile"].get("seen_items", []))


def test_load_run_attaches_the_typed_profile_the_simulator_used(tmp_path):
    config = _config()
    run(config, tmp_path / "r")
    expected = _expected_profiles(config)
    loaded = load_run(tmp_path / "r")
    dialogues = loaded.dialogues
    assert dialogues and all(isinstance(d.profile, UserProfile) for d in dialogues)
    for dialogue in dialogues:
        assert dialogue.profile == expected[dialogue.index]
        assert dialogue.profile_id == profile_id(expected[dialogue.index])
        assert all(t.title for t in dialogue.profile.need.targets)  # titles restored from the collection
    streamed = {d.conversation_id: d.profile for d in load_run(tmp_path / "r").iter_dialogues()}
    assert all(streamed[d.conversation_id] == d.profile for d in dialogues)
    assert set(loaded.profiles) == {d.profile_id for d in dialogues}
    first = dialogues[0]
    assert load_run(tmp_path / "r").profile(first.profile_id) == first.profile


def test_profile_id_is_stable_and_content_based():
    a = UserProfile(user_id="u", preferences={"items": {"1": 0.5, "2": -0.5}}, seen_items=[{"item": {"id": "1"}}])
    again = UserProfile.model_validate_json(a.model_dump_json())  # as another process would rebuild it
    changed = UserProfile(user_id="u", preferences={"items": {"1": 0.5, "2": -0.4}}, seen_items=[{"item": {"id": "1"}}])
    assert profile_id(a) == profile_id(again) == profile_id(a.model_copy(deep=True)) != profile_id(changed)
    assert len(profile_id(a)) == 16 and int(profile_id(a), 16) >= 0


def test_compact_round_trip_keeps_refs_the_collection_cannot_restore(tmp_path):
    items = ItemCollection.from_csv(ROOT / "configs/data/tiny_movies.csv")
    known = items.get(items.ids()[0])
    profile = UserProfile(
        user_id="u",
        need=InformationNeed(
            targets=[
                known.ref(),
                {"id": known.id, "title": "Another title"},
                {"title": "No ID"},
                {"id": "not-in-collection", "title": "Gone"},
            ]
        ),
        seen_items=[SeenItem(item=known.ref(), rating=4.0), SeenItem(item={"id": known.id}, rating=1.0)],
    )
    data = compact_profile(profile, items)
    assert data["need"]["targets"][0] == known.id and isinstance(data["need"]["targets"][1], dict)
    assert data["seen_items"][0]["item"] == known.id and data["seen_items"][1]["item"] == {"id": known.id}
    assert expand_profile(json.loads(json.dumps(data)), items) == profile
    record = ProfileRecord(profile_id=profile_id(profile), profile=data)
    assert record.model_dump_json().startswith('{"profile_id":')  # the reader indexes lines by this prefix


def test_resumed_run_does_not_repeat_profile_lines(tmp_path):
    config = _config()
    out = tmp_path / "r"
    run(config, out)
    complete = _profile_lines(out)
    path = out / "dialogues.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:4]))  # killed after four conversations ...
    prof = out / PROFILES
    prof.write_bytes(prof.read_bytes() + b'{"profile_id":"torn-li')  # ... mid-way through a profile line
    summary = run(config, out, resume=True)
    assert summary.completed == 8
    after = _profile_lines(out)
    ids = [rec["profile_id"] for rec in after]
    assert len(ids) == len(set(ids)) == len(complete)
    assert {d.profile_id for d in load_run(out).dialogues} == set(ids)
    assert all(d.profile is not None for d in load_run(out).dialogues)


def test_overwrite_starts_profiles_afresh(tmp_path):
    run(_config(), tmp_path / "r")
    run(_config(seed=12), tmp_path / "r", overwrite=True)
    stored = {rec["profile_id"] for rec in _profile_lines(tmp_path / "r")}
    assert stored == {d.profile_id for d in load_run(tmp_path / "r").dialogues}


def test_old_run_folder_with_embedded_profiles_still_reads(tmp_path):
    config = _config()
    run(config, tmp_path / "new")
    dialogues = load_run(tmp_path / "new").dialogues
    _write_embedded(dialogues, tmp_path / "old", tmp_path / "new" / "manifest.json")
    assert all(isinstance(rec["profile"], dict) for rec in iter_jsonl(tmp_path / "old" / "dialogues.jsonl"))
    old = load_run(tmp_path / "old")
    assert old.profiles == {}
    assert [d.profile for d in old.dialogues] == [d.profile for d in dialogues]
    assert [d.profile for d in old.iter_dialogues()] == [d.profile for d in dialogues]


# ---------------------------------------------------------------- size


def _big_catalogue(tmp_path: Path, items: int = 1_000, users: int = 3, rated: int = 800) -> tuple[Path, Path]:
    """A catalogue and ratings where each user has a long history (~100 KB of profile JSON)."""
    rng = random.Random(3)
    genres = ["Comedy", "Drama", "Action", "Horror", "Romance", "Thriller"]
    item_path, ratings_path = tmp_path / "items.csv", tmp_path / "ratings.csv"
    rows = ["movieId,title,genres,keywords"]
    rows += [
        f"{i},A Long Enough Movie Title Number {i} ({1950 + i % 70}),{'|'.join(rng.sample(genres, 2))},kw{i}"
        for i in range(1, items + 1)
    ]
    item_path.write_text("\n".join(rows) + "\n")
    rows = ["userId,movieId,rating,timestamp"]
    for user in range(1, users + 1):
        picked = rng.sample(range(1, items + 1), rated)
        rows += [f"{user},{i},{rng.choice([1.0, 2.5, 3.0, 4.0, 4.5, 5.0])},0" for i in picked]
    ratings_path.write_text("\n".join(rows) + "\n")
    return item_path, ratings_path


def test_llm_user_line_is_sized_by_the_conversation_not_the_history(tmp_path):
    item_path, ratings_path = _big_catalogue(tmp_path)
    with LLMServer() as server:
        config = llm_user_config(server.openai_url, conversations=6, concurrency=3)
        config = config.model_copy(
            update={
                "max_turns": 3,
                "items": config.items.model_copy(update={"path": str(item_path)}),
                "ratings": config.ratings.model_copy(update={"path": str(ratings_path)}),
            }
        )
        run(config, tmp_path / "r")
    raw = (tmp_path / "r" / "dialogues.jsonl").read_bytes().splitlines(keepends=True)
    records = [json.loads(line) for line in raw]
    assert any(len(r["utterances"]) == 6 for r in records)
    assert all(len(line) <= LINE_BUDGET for line in raw), [len(line) for line in raw]
    # the history really is big: embedding it, as before, would break the budget
    profiles = load_run(tmp_path / "r").dialogues
    assert min(len(d.profile.model_dump_json()) for d in profiles) > 10 * LINE_BUDGET


# ---------------------------------------------------------------- same results as with embedded profiles


@pytest.fixture
def both_layouts(tmp_path):
    """One run read from profiles.jsonl, and the same dialogues with their profiles embedded (old layout)."""
    config = _config(conversations=10, crs={"type": "tests.engine_plugins:EchoCRS"}, max_turns=4)
    run(config, tmp_path / "new")
    new = load_run(tmp_path / "new")
    _write_embedded(new.dialogues, tmp_path / "old", tmp_path / "new" / "manifest.json")
    return new, load_run(tmp_path / "old")


def test_metrics_are_the_same_on_both_layouts(both_layouts):
    new, old = both_layouts
    tables_new, tables_old = compute_metrics(new.dialogues), compute_metrics(old.dialogues)
    assert tables_new.conversations.equals(tables_old.conversations)
    assert tables_new.turns.equals(tables_old.turns)
    assert tables_new.conversations["user_id"].tolist() == [d.profile.user_id for d in new.dialogues]
    assert [checkable_titles(d) for d in new.dialogues] == [checkable_titles(d) for d in old.dialogues]
    options = ValidityOptions(check_leakage=True)
    flags = []
    for layout in (new, old):  # a user turn naming the first target leaks it, in either layout
        for d in layout.dialogues:
            d.add(Utterance(participant="USER", text=f"I want {d.profile.need.targets[0].title} now"))
        flags.append([leakage_flag(d, "target_biased", options) for d in layout.dialogues])
    assert flags[0] == flags[1] and all(leaked for leaked, _ in flags[0])


def test_judge_views_are_the_same_on_both_layouts(both_layouts):
    new, old = both_layouts
    views_new = [ConversationView.from_dialogue(d) for d in new.dialogues]
    assert views_new == [ConversationView.from_dialogue(d) for d in old.dialogues]
    assert all(v.ground_truth and v.preferences for v in views_new)
    target_titles = {t.title for d in new.dialogues for t in d.profile.need.targets}
    assert {title for v in views_new for title in v.ground_truth} == target_titles


def test_dialoguekit_export_carries_the_profile(both_layouts, tmp_path):
    new, old = both_layouts
    export_run(new, tmp_path / "new.json")
    export_run(old, tmp_path / "old.json")
    exported = json.loads((tmp_path / "new.json").read_text())
    for record, dialogue in zip(exported, new.dialogues):
        assert UserProfile.model_validate(record["metadata"]["usersimcrs"]["profile"]) == dialogue.profile
    strip = [dialogue_to_dialoguekit(d) for d in new.dialogues]
    assert [r["metadata"]["usersimcrs"]["profile"] for r in strip] == [
        r["metadata"]["usersimcrs"]["profile"] for r in json.loads((tmp_path / "old.json").read_text())
    ]
    back = read_dialoguekit(tmp_path / "new.json")
    assert [d.profile for d in back] == [d.profile for d in new.dialogues]


def test_import_of_an_export_stores_profiles_once(both_layouts, tmp_path):
    from usersimcrs.pipeline.imports import import_run

    new, _ = both_layouts
    export_run(new, tmp_path / "export.json")
    import_run(tmp_path / "export.json", tmp_path / "imported")
    lines = list(iter_jsonl(tmp_path / "imported" / "dialogues.jsonl"))
    assert all(line["profile"] is None and line["profile_id"] for line in lines)
    ids = [rec["profile_id"] for rec in _profile_lines(tmp_path / "imported")]
    assert len(ids) == len(set(ids)) == len({d.profile_id for d in new.dialogues})
    imported = load_run(tmp_path / "imported").dialogues
    assert [d.profile for d in imported] == [d.profile for d in new.dialogues]


def test_moved_item_file_reads_profiles_with_item_ids_only(tmp_path):
    items = tmp_path / "items.csv"
    items.write_text((ROOT / "configs/data/tiny_movies.csv").read_text())
    config = _config(items={"path": str(items), "delimiters": {"genres": "|", "keywords": "|"}})
    run(config, tmp_path / "r")
    with_titles = load_run(tmp_path / "r").dialogues
    items.unlink()
    without = load_run(tmp_path / "r").dialogues
    for a, b in zip(with_titles, without, strict=True):
        assert [t.id for t in b.profile.need.targets] == [t.id for t in a.profile.need.targets]
        assert all(t.title is None for t in b.profile.need.targets) and all(t.title for t in a.profile.need.targets)


def test_a_line_naming_a_missing_profile_reads_without_it(tmp_path, caplog):
    run(_config(conversations=3), tmp_path / "r")
    (tmp_path / "r" / PROFILES).unlink()
    dialogues = load_run(tmp_path / "r").dialogues
    assert len(dialogues) == 3 and all(d.profile is None and d.profile_id for d in dialogues)
    assert "profiles.jsonl lacks" in caplog.text
