"""`usersimcrs matrix`: cells from named overrides, resumable as a whole, then metrics and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.core.items import ItemCollection
from usersimcrs.engine.matrix import deep_merge, plan_cells
from usersimcrs.errors import ConfigError
from usersimcrs.pipeline.matrix import load_matrix_config, plan_matrix

TINY = Path(__file__).resolve().parents[1] / "configs" / "data"


def _config(tmp_path: Path, **extra) -> Path:
    data = {
        "name": "tiny",
        "concurrency": 4,
        "base": {
            "seed": 7,
            "conversations": 3,
            "max_turns": 4,
            "progress": False,
            "profiles": {"source": "generate", "constraint_slots": ["genres"]},
        },
        "datasets": [
            {
                "name": "tiny",
                "items": {
                    "path": str(TINY / "tiny_movies.csv"),
                    "mapping": {"genres": "genres", "keywords": "keywords"},
                    "delimiters": {"genres": "|", "keywords": "|"},
                },
                "ratings": {"path": str(TINY / "tiny_ratings.csv")},
            }
        ],
        # two named variants of the LLM-free agenda user: a patient and an impatient one
        "simulators": [
            {"name": "patient", "type": "agenda", "patience": 3},
            {"name": "impatient", "type": "agenda", "patience": 1, "max_recommendation_rounds": 1},
        ],
        "crs": [{"name": "pop", "type": "popularity"}, {"name": "bm25", "crs": {"type": "retrieval"}}],
        "metrics": {"options": {"satisfaction": False}},
        "report": False,
        **extra,
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def item_reads(monkeypatch) -> list[str]:
    """The item files read (`ItemCollection.from_csv`), one entry per read."""
    reads: list[str] = []
    read = ItemCollection.from_csv.__func__  # type: ignore[attr-defined]

    def counted(cls, path, **options):
        reads.append(Path(path).name)
        return read(cls, path, **options)

    monkeypatch.setattr(ItemCollection, "from_csv", classmethod(counted))
    return reads


def test_cells_merge_overrides_and_replace_plugin_sections(tmp_path):
    path = _config(tmp_path)
    config = load_matrix_config(path)
    cells = plan_cells(config, tmp_path / "out", path)
    assert [c.name for c in cells] == [
        "patient__pop__tiny",
        "patient__bm25__tiny",
        "impatient__pop__tiny",
        "impatient__bm25__tiny",
    ]
    impatient = cells[2].config
    assert impatient.simulator == {"type": "agenda", "patience": 1, "max_recommendation_rounds": 1}
    assert impatient.crs == {"type": "popularity"} and impatient.seed == 7 and impatient.name == "impatient__pop__tiny"
    assert impatient.llm.cache_dir == str((tmp_path / "out" / "llm_cache").resolve())  # one cache for all cells
    merged = deep_merge({"crs": {"type": "llm_crs", "max_tokens": 9}}, {"crs": {"type": "retrieval"}})
    assert merged == {"crs": {"type": "retrieval"}}  # another plug-in: its options do not leak over
    assert deep_merge({"crs": {"type": "a", "x": 1}}, {"crs": {"y": 2}}) == {"crs": {"type": "a", "x": 1, "y": 2}}


def test_bad_matrix_configs_name_the_key(tmp_path):
    path = _config(tmp_path, crs=[{"name": "pop", "type": "popularity"}, {"name": "pop", "type": "retrieval"}])
    with pytest.raises(ConfigError, match="crs: duplicate name"):
        load_matrix_config(path)
    path = _config(tmp_path, base={"conversations": "many"})
    with pytest.raises(ConfigError, match="key 'matrix.base.conversations'"):
        load_matrix_config(path)
    path = _config(tmp_path, simulators=[{"name": "s", "type": "agenda", "max_turnz": 3}])
    with pytest.raises(ConfigError, match="cell s__pop__tiny: unknown key 'simulator.max_turnz'"):
        plan_matrix(load_matrix_config(path), tmp_path / "out", path)


def test_a_bad_judge_spec_stops_the_matrix_before_any_cell_runs(tmp_path, capsys):
    out = tmp_path / "out"
    for judges in (
        [{"judge": "qualty"}],
        [{"judge": "quality", "criteria_x": ["fluency"]}],
        [{"judge": "quality", "criteria": ["no_such_aspect"]}],
    ):
        path = _config(tmp_path, judges=judges)
        assert main(["matrix", str(path), "--output", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err and "judges" in err, err
        assert not (out / "cells").exists()  # nothing ran


def test_matrix_runs_resumes_and_reports(tmp_path, capsys, item_reads):
    path = _config(tmp_path)
    out = tmp_path / "out"
    assert main(["matrix", str(path), "--output", str(out), "--no-progress"]) == 0
    assert item_reads == ["tiny_movies.csv"]  # four cells run and scored: the item file read once
    index = json.loads((out / "matrix.json").read_text())
    assert len(index["cells"]) == 4 and all(c["status"].startswith("completed") for c in index["cells"])
    for cell in index["cells"]:
        folder = out / cell["run_dir"]
        assert (folder / "metrics.csv").exists() and (folder / "manifest.json").exists()
        assert sum(1 for _ in (folder / "dialogues.jsonl").open()) == 3
    assert main(["report", str(out)]) == 0
    assert item_reads == ["tiny_movies.csv"] * 2  # the report command reads it once for its four cells
    assert (out / "report.html").exists() and (out / "comparison" / "ranks.csv").exists()
    html = (out / "report.html").read_text()
    for png in (out / "report" / "plots").glob("*.png"):
        assert f'data-file="plots/{png.name}"' in html
    # a second invocation finds every cell complete and runs nothing again
    before = (out / "cells" / "patient__pop__tiny" / "dialogues.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["matrix", str(path), "--output", str(out), "--no-progress"]) == 0
    assert capsys.readouterr().out.count("skipped (complete)") == 4
    assert (out / "cells" / "patient__pop__tiny" / "dialogues.jsonl").read_bytes() == before


def test_matrix_exits_non_zero_when_a_cell_fails_the_gate(tmp_path, capsys):
    path = _config(
        tmp_path,
        crs=[{"name": "pop", "type": "popularity"}],
        simulators=[{"name": "patient", "type": "agenda"}],
        metrics={"options": {"satisfaction": False}, "max_invalid_rate": 0.0, "validity": {"min_utterances": 50}},
    )
    assert main(["matrix", str(path), "--output", str(tmp_path / "out"), "--no-progress"]) == 1
    assert "patient__pop__tiny: invalid rate 100.0% exceeds the allowed 0.0%" in capsys.readouterr().err


def test_matrix_report_ranks_crss_with_cis_and_shows_a_transcript_per_cell(tmp_path, item_reads):
    path = _config(tmp_path, report=True)
    out = tmp_path / "out"
    assert main(["matrix", str(path), "--output", str(out), "--no-progress"]) == 0
    assert item_reads == ["tiny_movies.csv"]  # cells, their scoring and the report share one collection
    html = (out / "report.html").read_text(encoding="utf-8")
    ranking = pd.read_csv(next((out / "report" / "tables").glob("ranking_*.csv")))
    assert {"rank", "crs", "mean [95% CI]", "n", "note"} <= set(ranking.columns)
    assert ranking["mean [95% CI]"].str.contains(r"\[").any()  # a CI next to each measured mean
    assert "Transcripts" in html
    for cell in ("patient__pop__tiny", "patient__bm25__tiny", "impatient__pop__tiny", "impatient__bm25__tiny"):
        assert f"<h3>{cell}: {cell}-0000" in html


def test_the_bundled_demo_config_is_valid_and_plans_six_cells(tmp_path):
    from usersimcrs.pipeline.quickstart import demo_config

    config = load_matrix_config(demo_config())
    cells = plan_matrix(config, tmp_path / "demo", demo_config())
    assert sorted(c.name.split("__")[1] for c in cells) == [
        "llm_crs",
        "llm_crs",
        "popularity",
        "popularity",
        "retrieval",
        "retrieval",
    ]
    assert {c.config.conversations for c in cells if c.simulator == "agenda"} == {12}
    assert all(Path(c.config.items.path).exists() or Path(c.config.items.fallback_path).exists() for c in cells)
