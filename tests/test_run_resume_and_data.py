"""A refused `--resume` names the settings that differ; the manifest records which data file a run
used (the primary or the fallback), and the quickstart says it before it starts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import yaml

from usersimcrs.cli import main
from usersimcrs.cli.quickstart import data_lines
from usersimcrs.pipeline.quickstart import demo_data_files

DATA = Path(__file__).resolve().parents[1] / "configs" / "data"


def write_config(folder: Path, **items: object) -> Path:
    config = {
        "name": "resume",
        "conversations": 3,
        "max_turns": 4,
        "progress": False,
        "items": {"path": str(DATA / "tiny_movies.csv"), "delimiters": {"genres": "|"}, **items},
        "ratings": {"path": str(DATA / "tiny_ratings.csv")},
        "simulator": {"type": "agenda"},
        "crs": {"type": "retrieval"},
    }
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_a_refused_resume_names_each_setting_that_differs(tmp_path, capsys):
    config, out = write_config(tmp_path), str(tmp_path / "run")
    assert main(["run", str(config), "-o", out, "--set", "conversations=5", "--set", "max_turns=6"]) == 0
    before = (tmp_path / "run" / "dialogues.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["run", str(config), "-o", out, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: {out}: the config changed since this run started (conversations: 5 -> 3; max_turns: 6 -> 4); "
        "resume needs the same config (repeat the same --set options, or run into a new folder)"
    )
    assert (tmp_path / "run" / "dialogues.jsonl").read_bytes() == before
    # settings that decide no conversation may change; the same --set options resume
    args = ["run", str(config), "-o", out, "--resume", "--set", "conversations=5", "--set", "max_turns=6"]
    assert main([*args, "--set", "concurrency=1"]) == 0


def test_a_nested_change_is_named_by_its_dotted_key(tmp_path, capsys):
    config, out = write_config(tmp_path), str(tmp_path / "run")
    assert main(["run", str(config), "-o", out]) == 0
    capsys.readouterr()
    assert main(["run", str(config), "-o", out, "--resume", "--set", "simulator.nlu=rules"]) == 2
    assert '(simulator.nlu: (absent) -> "rules")' in capsys.readouterr().err


def test_the_manifest_records_whether_the_primary_file_or_its_fallback_was_used(tmp_path):
    primary = tmp_path / "primary"
    primary.mkdir()
    missing = tmp_path / "missing.csv"
    fallback = write_config(primary, path=str(missing), fallback_path=str(DATA / "tiny_movies.csv"), use_fallback=True)
    assert main(["run", str(fallback), "-o", str(tmp_path / "fallback")]) == 0
    files = json.loads((tmp_path / "fallback" / "manifest.json").read_text())["data_files"]
    digest = {
        name: hashlib.sha256((DATA / name).read_bytes()).hexdigest() for name in ("tiny_movies.csv", "tiny_ratings.csv")
    }
    assert files["items"] == {
        "path": str(DATA / "tiny_movies.csv"),
        "used": "fallback_path",
        "missing": str(missing),
        "sha256": digest["tiny_movies.csv"],  # the content read, which each Ray task checks its own against
    }
    assert files["ratings"] == {
        "path": str(DATA / "tiny_ratings.csv"),
        "used": "path",
        "sha256": digest["tiny_ratings.csv"],
    }


def test_the_quickstart_says_which_data_it_uses(tmp_path):
    files = demo_data_files(tmp_path / "demo")
    assert set(files) == {"items", "ratings"} and all(Path(f["path"]).is_file() for f in files.values())
    lines = data_lines(files)
    assert len(lines) == 2 and lines[0].startswith(f"data: items {files['items']['path']} (")
    fallback = {"path": "x/tiny_movies.csv", "used": "fallback_path", "missing": "y/movies_w_keywords.csv"}
    assert data_lines({"items": fallback}) == [
        "data: items x/tiny_movies.csv (fallback: the bundled 40-movie sample, as y/movies_w_keywords.csv does not "
        "exist; rankings on it differ from the MovieLens-25m sample's)"
    ]


def test_a_named_data_file_that_does_not_exist_stops_the_run_unless_the_fallback_is_allowed(tmp_path, capsys):
    missing = tmp_path / "typo.csv"
    config = write_config(tmp_path, fallback_path=str(DATA / "tiny_movies.csv"))  # the fallback is not allowed
    out = tmp_path / "run"
    assert main(["run", str(config), "-o", str(out), "--set", f"items.path={missing}"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: items.path: file not found: {missing} (items.fallback_path {DATA / 'tiny_movies.csv'} is read "
        "instead only with items.use_fallback: true)"
    )
    assert not out.exists()


def test_a_path_given_with_set_is_the_file_meant_even_where_the_config_allows_its_fallback(tmp_path, capsys):
    missing = tmp_path / "typo.csv"
    config = write_config(tmp_path, fallback_path=str(DATA / "tiny_movies.csv"), use_fallback=True)
    out = str(tmp_path / "run")
    assert main(["run", str(config), "-o", out, "--set", f"items.path={missing}"]) == 2
    assert f"items.path: file not found: {missing}" in capsys.readouterr().err
    # asked for on the command line too: read, and said aloud
    assert (
        main(["run", str(config), "-o", out, "--set", f"items.path={missing}", "--set", "items.use_fallback=true"]) == 0
    )


def test_reading_the_fallback_is_said_aloud_and_recorded(tmp_path, caplog):
    missing = tmp_path / "missing.csv"
    config = write_config(tmp_path, path=str(missing), fallback_path=str(DATA / "tiny_movies.csv"), use_fallback=True)
    with caplog.at_level("WARNING", logger="usersimcrs.data"):
        assert main(["run", str(config), "-o", str(tmp_path / "run")]) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "usersimcrs.data"] == [
        f"items: {missing} does not exist; reading items.fallback_path {DATA / 'tiny_movies.csv'} instead "
        "(items.use_fallback: true)",
        "items from the fallback but ratings from the named file",
    ]
    files = json.loads((tmp_path / "run" / "manifest.json").read_text())["data_files"]
    assert files["items"]["path"] == str(DATA / "tiny_movies.csv") and files["items"]["used"] == "fallback_path"
