"""The LLM user never puts words into the CRS's mouth that its model did not write without the run
saying so: every user turn is labelled by where its words came from, a run counts fallback and
repaired turns (summary, manifest, report), the validity gate flags those conversations, and
`on_unusable: fail` fails them instead. Against the real local OpenAI-protocol server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.prompts import load_prompt
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
CANNED = {
    *load_prompt("simulators/llm_single")["fallback_utterances"],
    load_prompt("simulators/llm_single")["fallback_utterance"],
}


def user_turn(body: dict) -> int:
    """Which user turn a simulator request is for: the simulated user's earlier turns are 'assistant' messages."""
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def script(body: dict) -> str:
    """Turn 0: a good answer; turn 1: a placeholder (unusable); turn 2: prose where JSON was asked for;
    turn 3: an empty utterance with a wish to end before min_turns (the case once labelled 'structured')."""
    turn = user_turn(body)
    if turn == 0:
        return json.dumps({"end": False, "utterance": "Hi, I want a funny film for tonight."})
    if turn == 1:
        return json.dumps({"end": False, "utterance": "<your message>"})
    if turn == 2:
        return "Sure thing, something lighter with a bit of romance please."
    return json.dumps({"end": True, "utterance": ""})


def write_config(tmp_path: Path, server: LLMServer, **simulator: object) -> Path:
    config = {
        "name": "honest",
        "seed": 3,
        "conversations": 3,
        "concurrency": 3,
        "max_turns": 4,
        "progress": False,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "llm": {"backend": "openai", "base_url": server.openai_url, "model": "test-model", "retries": 0},
        "simulator": {"type": "llm_single", "min_turns": 6, **simulator},
        "crs": {"type": "popularity"},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def user_turns(run_dir: Path) -> list[dict]:
    return [u for r in iter_jsonl(run_dir / "dialogues.jsonl") for u in r["utterances"] if u["participant"] == "USER"]


def test_every_user_turn_says_where_its_words_came_from_and_the_run_counts_them(tmp_path, capsys):
    with LLMServer(replies=script) as server:
        config = write_config(tmp_path, server)
        assert main(["run", str(config), "-o", str(tmp_path / "run"), "--no-crs-check"]) == 0
    out = capsys.readouterr().out
    turns = user_turns(tmp_path / "run")
    labels = [t["metadata"]["generation"] for t in turns]
    assert len(turns) == 3 * 4
    # per conversation: the model's JSON, a fallback for the placeholder, the model's prose (repaired),
    # and a fallback for the empty answer whose wish to end came before min_turns
    assert labels == ["structured", "fallback:placeholder", "repaired:prose", "fallback:empty"] * 3
    assert all((t["text"] in CANNED) == t["metadata"]["generation"].startswith("fallback") for t in turns[1:])
    assert turns[2]["text"] == "Sure thing, something lighter with a bit of romance please."
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["dialogues"]["user_turns"] == {
        "labelled": 12,
        "model": 3,
        "repaired": 3,
        "fallback": 6,
        "template": 0,
    }
    assert manifest["dialogues"]["conversations_with_fallback"] == 3
    assert "LLM user turns not as the model wrote them: 6 fallback (canned, not the model's words), 3 repaired" in out

    assert main(["metrics", str(tmp_path / "run")]) == 0
    assert main(["report", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    metrics = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    header = metrics[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in metrics[1:]]
    assert {r["user_fallback"] for r in rows} == {"True"} and {r["user_repaired"] for r in rows} == {"True"}
    assert {r["valid"] for r in rows} == {"False"}  # a fallback turn excludes the conversation from 'valid'
    html = (tmp_path / "run" / "report.html").read_text()
    assert "LLM user turns: fallback / repaired / all" in html and "6 / 3 / 12" in html
    assert "user_fallback" in html


def test_a_clean_run_has_no_flags_and_rule_based_users_are_not_checked(tmp_path):
    from usersimcrs.core.dialogue import Dialogue, Utterance
    from usersimcrs.metrics.validity import user_turn_flags

    clean = Dialogue(conversation_id="c")
    clean.add(Utterance(participant="USER", text="hi", metadata={"generation": "structured"}))
    closing = Utterance(participant="USER", text="Thanks, bye!", metadata={"generation": "template:stop_utterance"})
    clean.add(closing)
    assert user_turn_flags(clean) == {"user_fallback": False, "user_repaired": False}
    rule_based = Dialogue(conversation_id="r")
    rule_based.add(Utterance(participant="USER", text="hi", metadata={"nlg_source": "template"}))
    assert user_turn_flags(rule_based) == {"user_fallback": None, "user_repaired": None}


@pytest.mark.parametrize("kind", ["llm_single", "llm_dual", "target_free"])
def test_on_unusable_fail_fails_the_conversation_instead_of_sending_a_canned_turn(tmp_path, capsys, kind):
    def reply(body: dict) -> str:
        if "end" in json.dumps(body.get("response_format") or {}) and "utterance" not in json.dumps(
            body.get("response_format") or {}
        ):
            return json.dumps({"end": False})  # the dual user's stop decision: go on
        return script(body) if user_turn(body) < 2 else json.dumps({"end": False, "utterance": "<your message>"})

    with LLMServer(replies=reply) as server:
        config = write_config(tmp_path, server, on_unusable="fail", type=kind, min_turns=0)
        code = main(["run", str(config), "-o", str(tmp_path / "run"), "--no-crs-check"])
    err = capsys.readouterr().err
    records = list(iter_jsonl(tmp_path / "run" / "dialogues.jsonl"))
    assert code == 3 and "3 of 3 conversations failed" in err
    assert {r["status"] for r in records} == {"failed"}
    assert all("UnusableAnswer: the LLM user's answer at turn" in r["error"] for r in records)
    assert all("on_unusable is fail" in r["error"] for r in records)
    sent = [u["text"] for r in records for u in r["utterances"] if u["participant"] == "USER"]
    assert sent and not set(sent) & CANNED  # nothing canned reached the CRS


def wants_out(body: dict) -> str:
    """Every answer asks to end: the opening with usable words, every later turn with a placeholder (unusable),
    so with min_turns 6 three of a conversation's four user turns are canned; the dual user's stop decision
    says carry on."""
    schema = json.dumps(body.get("response_format") or {})
    if "end" in schema and "utterance" not in schema:
        return json.dumps({"end": False})
    if user_turn(body) == 0:
        return json.dumps({"end": True, "utterance": "Hi, I want a funny film for tonight."})
    return json.dumps({"end": True, "utterance": "<your message>"})


@pytest.mark.parametrize("kind", ["llm_single", "llm_dual", "target_free"])
def test_every_ignored_end_request_is_marked(tmp_path, kind):
    """The opening's end request (and the dual and target-free users' ones) went unmarked: 'about half'."""
    with LLMServer(replies=wants_out) as server:
        config = write_config(tmp_path, server, type=kind, min_turns=6)
        assert main(["run", str(config), "-o", str(tmp_path / "run"), "--no-crs-check"]) == 0
    turns = user_turns(tmp_path / "run")
    assert len(turns) == 3 * 4
    assert [t["metadata"].get("end_ignored") for t in turns] == [True] * 12


def test_a_run_of_mostly_canned_turns_opens_with_a_warning_and_marks_its_figures(tmp_path, capsys):
    with LLMServer(replies=wants_out) as server:
        config = write_config(tmp_path, server, min_turns=6)
        assert main(["run", str(config), "-o", str(tmp_path / "run"), "--no-crs-check"]) == 0
    warning = "warning: 9 of 12 LLM user turns (75%) were canned fallbacks, not the model's words"
    assert capsys.readouterr().out.splitlines()[0].startswith(warning)

    assert main(["metrics", str(tmp_path / "run"), "--no-satisfaction"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(warning)
    headline = next(line for line in out if line.startswith("  all (the CRS took part)"))
    assert "success" in headline and headline.count("⚠ 75% canned") >= 3, headline
    table = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    header = table[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in table[1:]]
    assert [(r["user_turns_canned"], r["user_turns_labelled"]) for r in rows] == [("3", "4")] * 3

    assert main(["report", str(tmp_path / "run")]) == 0
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    body = html[html.index("</nav>") :]
    assert body.index("Warning: 9 of 12 LLM user turns (75%) were canned") < body.index('<h2 id="s1">Overview')
    assert "canned user turns" in html and "75% ⚠" in html


def test_a_run_with_half_its_turns_canned_or_fewer_has_no_warning(tmp_path, capsys):
    with LLMServer(replies=script) as server:  # 6 of 12 turns canned: not most
        config = write_config(tmp_path, server)
        assert main(["run", str(config), "-o", str(tmp_path / "run"), "--no-crs-check"]) == 0
    assert "warning:" not in capsys.readouterr().out
    assert main(["metrics", str(tmp_path / "run"), "--no-satisfaction"]) == 0
    out = capsys.readouterr().out
    assert "warning:" not in out and "canned" not in out


def test_matrix_cells_of_mostly_canned_turns_are_named_and_their_values_marked():
    import pandas as pd

    from usersimcrs.report.matrix_report import _mean_label, canned_cells

    table = pd.DataFrame(
        {
            "dataset": ["d"] * 4,
            "simulator": ["llm_single"] * 2 + ["agenda"] * 2,
            "crs": ["ievalm"] * 4,
            "success": [0.0, 1.0, 1.0, 0.0],
            "user_turns_canned": [4, 3, None, None],
            "user_turns_labelled": [5, 4, None, None],
        }
    )
    assert canned_cells(table) == [("llm_single · ievalm", pytest.approx(7 / 9))]
    assert _mean_label(0.5, 2, canned=7 / 9) == "0.500 (n=2) ⚠ 78% canned"
    assert _mean_label(0.5, 2, canned=0.5) == "0.500 (n=2)"
