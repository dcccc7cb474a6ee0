"""One error prefix across commands: every mistake a user can make on the command line ends in one
line starting with `error: ` on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from usersimcrs.cli import main


def run_cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits
        return int(exc.code or 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "nope.yaml"],
        ["matrix", "nope.yaml"],
        ["metrics", "nope"],
        ["report", "nope"],
        ["judge", "nope", "--judge", "quality"],
        ["judge", "nope", "--judge", "quality", "--price", "cheap"],
        ["export", "nope", "--format", "dialoguekit"],
        ["export", "nope", "--format", "dialoguekit", "--output", "out"],
        ["import", "nope.json", "--output", "out"],
        ["agreement", "--judgments", "nope.jsonl"],
        ["nlu-eval", "--dialogues", "nope.json"],
        ["fidelity", "nope", "nope"],
        ["convert", "redial", "--input", "nope.jsonl", "--output", "out"],
        ["annotate", "nope", "folder"],
        ["run"],
        ["no-such-command"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_user_mistakes_end_in_one_error_line(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = run_cli(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), err
    assert not [line for line in lines if line.lower().startswith("error") and not line.startswith("error: ")]


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "run.yaml"
    data = Path(__file__).resolve().parents[1] / "configs" / "data"
    config.write_text(
        "name: x\nconversations: 1\nprogress: false\nsimulator: {type: agenda}\ncrs: {type: popularity}\n"
        f"items: {{path: {data / 'tiny_movies.csv'}}}\nratings: {{path: {data / 'tiny_ratings.csv'}}}\n"
    )
    assert run_cli(["run", str(config), "-o", str(blocker / "sub")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {blocker / 'sub'}: Not a directory"]
