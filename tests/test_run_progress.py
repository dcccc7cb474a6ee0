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
