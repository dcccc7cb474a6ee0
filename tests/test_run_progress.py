"""`run` shows progress when stderr is not a terminal too: a plain line every interval, with done,
failed, LLM figures, elapsed time and time left; nothing when progress is off."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import yaml

from usersimcrs.engine.progress import RunProgress

ROOT = Path(__file__).resolve().parents[1]


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_lines_when_not_a_terminal():
    out = Pipe()
    with RunProgress(total=4, enabled=True, stream=out, interval_s=0.0) as progress:
        progress.advance()
        progress.advance(failed=True)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("conversations: 1/4 | failed 0 | ") and "elapsed, ~" in lines[0] and "left" in lines[0]
    assert lines[1].startswith("conversations: 2/4 | failed 1 | ")


def test_lines_are_spaced_by_the_interval_and_absent_when_disabled():
    out = Pipe()
    with RunProgress(total=50, enabled=True, stream=out, interval_s=3600) as progress:
        for _ in range(50):
            progress.advance()
    assert out.getvalue() == ""  # a run shorter than the interval prints nothing
    out = Pipe()
    with RunProgress(total=3, enabled=False, stream=out, interval_s=0.0) as progress:
        progress.advance()
    assert out.getvalue() == ""


def test_a_run_piped_to_a_file_prints_progress_lines(tmp_path):
    """A real `usersimcrs run` with stderr to a pipe and the interval at zero: one line per conversation."""
    data = ROOT / "configs" / "data"
    config = {
        "name": "progress",
        "conversations": 3,
        "concurrency": 1,
        "items": {"path": str(data / "tiny_movies.csv"), "delimiters": {"genres": "|"}},
        "ratings": {"path": str(data / "tiny_ratings.csv")},
        "simulator": {"type": "agenda"},
        "crs": {"type": "retrieval"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "usersimcrs", "run", str(path), "-o", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "USERSIMCRS_PROGRESS_INTERVAL_S": "0"},
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("conversations: ")]
    assert [line.split(" | ")[0] for line in lines] == [
        "conversations: 1/3",
        "conversations: 2/3",
        "conversations: 3/3",
    ]


def test_a_plain_line_every_interval_while_nothing_finishes():
    """A cell whose first conversation takes minutes (the demo's LLM CRS) printed nothing for 100 s."""
    import time

    out = Pipe()
    with RunProgress(total=4, enabled=True, stream=out, interval_s=0.1) as progress:
        time.sleep(0.45)
        progress.done = 1  # one finished right at the end: the last line says so
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("conversations: 0/4 | ") for line in lines[:-1]), lines
    assert lines[-1].startswith("conversations: 1/4 | ")


def test_matrix_cells_side_by_side_print_labelled_lines(tmp_path, monkeypatch, capsys):
    """Cells running at once had no progress at all; now each prints plain lines with its name."""
    from usersimcrs.cli import main

    data = ROOT / "configs" / "data"
    config = {
        "name": "side",
        "concurrency": 2,
        "parallel_cells": 2,
        "base": {"seed": 1, "conversations": 6, "max_turns": 4},
        "datasets": [
            {
                "name": "tiny",
                "items": {"path": str(data / "tiny_movies.csv"), "delimiters": {"genres": "|"}},
                "ratings": {"path": str(data / "tiny_ratings.csv")},
            }
        ],
        "simulators": [{"name": "agenda", "type": "agenda"}],
        "crs": [{"name": "popularity", "type": "popularity"}, {"name": "retrieval", "type": "retrieval"}],
        "metrics": {"options": {"satisfaction": False}},
        "report": False,
    }
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    monkeypatch.setenv("USERSIMCRS_PROGRESS_INTERVAL_S", "0.01")
    assert main(["matrix", str(path), "--output", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err.splitlines()
    for cell in ("agenda__popularity__tiny", "agenda__retrieval__tiny"):
        mine = [line for line in err if line.startswith(f"{cell}: ")]
        assert mine and mine[-1].startswith(f"{cell}: 6/6 | failed 0"), err
