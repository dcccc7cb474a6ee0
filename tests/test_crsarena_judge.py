"""The CRSArena-Eval judge end to end against the local OpenAI-protocol server (a subprocess): turn and
dialogue aspects, one shared prompt prefix per conversation, export to a run file, back through meta-eval."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from usersimcrs.cli import main
from usersimcrs.core.crsarena_eval import BY_NAME, read_run_file, split_score_name
from usersimcrs.core.run_folder import load_run
from usersimcrs.judges.rubrics import load_rubric

DIALOGUE_ASPECTS = 7
TURN_ASPECTS = 2


def test_the_rubric_has_crsarena_evals_aspects_levels_and_scales():
    rubric = load_rubric("crsarena_eval")
    for criterion in rubric.criteria:
        spec = BY_NAME[criterion.name]
        assert criterion.level == spec.level
        assert (min(criterion.allowed), max(criterion.allowed)) == (spec.low, spec.high)
        assert sorted(level.score for level in criterion.levels) == sorted(criterion.allowed)
    assert {c.name for c in rubric.criteria} == set(BY_NAME)


@pytest.fixture(scope="module")
def server_url():
    """`python -m usersimcrs.testing.llm_server` in its own process; its schema-following replies give
    ratings inside each criterion's allowed scores."""
    process = subprocess.Popen(
        [sys.executable, "-m", "usersimcrs.testing.llm_server", "--port", "0", "--model", "test-model"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        url = (process.stdout.readline() if process.stdout else "").strip()
        assert url.startswith("http://127.0.0.1:"), "the test LLM server did not start"
        yield f"{url}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def corpus(tmp_path) -> Path:
    """Six rated conversations of two CRSs (one with a single system turn), converted."""
    records = []
    for n, (crs, turns) in enumerate(
        [("kbrd", 3), ("kbrd", 1), ("kbrd", 2), ("unicrs", 2), ("unicrs", 4), ("unicrs", 1)]
    ):
        dialogue = []
        for k in range(turns):
            dialogue.append({"turn_ind": 2 * k, "role": "USER", "utterance": f"I want a comedy, try {k}"})
            dialogue.append(
                {
                    "turn_ind": 2 * k + 1,
                    "role": "ASST",
                    "utterance": f"How about Movie {n}{k} (199{k})?",
                    "turn_level_aggregated": {"relevance": (n + k) % 3, "interestingness": (n * k) % 3},
                }
            )
        records.append(
            {
                "conv_id": f"{crs}_redial_{n:04d}",
                "dialogue": dialogue,
                "dial_level_aggregated": {a: n % 2 for a, s in BY_NAME.items() if s.level == "dialogue"},
            }
        )
    (tmp_path / "eval.json").write_text(json.dumps(records))
    assert main(["convert", "crsarena-eval", "-i", str(tmp_path / "eval.json"), "-o", str(tmp_path / "c")]) == 0
    return tmp_path / "c"


def judge(cell: Path, url: str, *extra: str) -> int:
    return main(
        ["judge", str(cell), "--judge", "crsarena", "--llm-backend", "openai", "--base-url", url,
         "--model", "test-model", "--no-cache", "--json", *extra]
    )  # fmt: skip


def test_judge_rates_every_turn_and_the_dialogue_with_one_shared_prefix(corpus, server_url, tmp_path, capsys):
    cells = sorted((corpus / "cells").iterdir())
    capsys.readouterr()
    assert judge(cells[0], server_url, "--dry-run") == 0
    planned = json.loads(capsys.readouterr().out)
    dialogues = load_run(cells[0]).dialogues
    turns = sum(len(d.agent_turns) for d in dialogues)
    assert planned["calls"] == DIALOGUE_ASPECTS * len(dialogues) + TURN_ASPECTS * turns
    for cell in cells:
        assert judge(cell, server_url) == 0
        summary = json.loads(capsys.readouterr().out)
        dialogues = load_run(cell).dialogues
        turns = sum(len(d.agent_turns) for d in dialogues)
        assert summary["skipped_invalid"] == {}  # a one-turn conversation is rated too
        assert summary["statuses"] == {"ok": DIALOGUE_ASPECTS * len(dialogues) + TURN_ASPECTS * turns}
        records = load_run(cell).judgments
        for record in records:
            aspect, turn = split_score_name(record["name"])
            spec = BY_NAME[aspect]
            assert (turn is not None) == (spec.level == "turn")
            assert tuple(record["scale"]) == (spec.low, spec.high) and spec.low <= record["value"] <= spec.high
        named_turns = {split_score_name(r["name"])[1] for r in records} - {None}
        assert named_turns == {u.metadata["turn_ind"] for d in dialogues for u in d.agent_turns}
        reuse = load_run(cell).manifest.judges["prefix_reuse"]["crsarena"]
        assert reuse["prefix_reuse"] >= 0.8, reuse  # every call of a conversation shares its whole data block
        assert judge(cell, server_url) == 0  # resumes per turn: nothing left to do
        assert json.loads(capsys.readouterr().out)["already_done"] == len(dialogues)

    # the run file round-trips: meta-eval on it gives what it gives on the stored judgments
    run_file = tmp_path / "crsarena_run.json"
    assert main(["export-run", str(corpus), "-o", str(run_file)]) == 0
    capsys.readouterr()
    exported = read_run_file(run_file)
    assert len(exported) == 6 and all(set(c.dial_level_pred) == {"understanding", "task_completion",
               "interest_arousal", "efficiency", "dialogue_overall"} for c in exported)  # fmt: skip
    out = tmp_path / "me"
    assert main(["meta-eval", str(corpus), "--judgments", f"file={run_file}", "--no-baselines",
                 "--resamples", "20", "--no-report", "-o", str(out)]) == 0  # fmt: skip
    table = pd.read_csv(out / "meta_eval.csv")
    stored = table[table["evaluator"] == "crsarena"].set_index(["aspect", "statistic"])["value"]
    from_file = table[table["evaluator"] == "file"].set_index(["aspect", "statistic"])["value"]
    assert len(from_file) == 7 * 7 and from_file.equals(stored)
    n = table[(table["evaluator"] == "file") & (table["statistic"] == "pearson")].set_index("aspect")["n"]
    assert n["relevance"] == 13 and n["dialogue_overall"] == 6


def test_judging_a_converted_corpus_judges_each_cell_where_export_and_meta_eval_read(corpus, server_url, capsys):
    """`judge CORPUS` on the matrix a conversion writes (it also holds a dialogues.jsonl of all conversations)
    judges cell by cell: every judgment lands in its cell, the summary sums the cells, and --limit counts
    conversations over all cells."""
    cells = sorted((corpus / "cells").iterdir())
    dialogues = {cell.name: load_run(cell).dialogues for cell in cells}
    expected = sum(DIALOGUE_ASPECTS * len(ds) + TURN_ASPECTS * sum(len(d.agent_turns) for d in ds)
                   for ds in dialogues.values())  # fmt: skip
    capsys.readouterr()
    assert judge(corpus, server_url, "--dry-run") == 0
    assert json.loads(capsys.readouterr().out)["calls"] == expected
    assert judge(corpus, server_url, "--limit", "4") == 0
    limited = json.loads(capsys.readouterr().out)
    assert limited["conversations"] == 6 and limited["judged"] == 4
    assert judge(corpus, server_url) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["judged"] == 2 and summary["already_done"] == 4 and summary["conversations"] == 6
    assert not (corpus / "judgments.jsonl").exists()  # nothing beside the cells, where no reader looks
    written = 0
    for cell in cells:
        records = load_run(cell).judgments
        assert {r["conversation_id"] for r in records} == {d.conversation_id for d in dialogues[cell.name]}
        written += len(records)
    assert written == expected
    assert main(["export-run", str(corpus), "-o", str(corpus.parent / "run.json")]) == 0
    assert len(read_run_file(corpus.parent / "run.json")) == 6
