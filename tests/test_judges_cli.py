"""`usersimcrs judge RUN_DIR`: invalid conversations skipped and counted, resumable appends,
manifest usage, model maps and dry-run estimates, against the real local server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from usersimcrs.cli import main
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.testing.llm_server import LLMServer

REPLY = json.dumps({"rationale": "looks fine", "rating": 4})


def conversation(cid: str, system_turns: int, status: str = "ok") -> Dialogue:
    d = Dialogue(conversation_id=cid, status=status, error="CRS timed out" if status == "failed" else None)
    for turn in range(system_turns):
        d.add(Utterance(participant="USER", text=f"{cid}: looking for a comedy ({turn})"))
        d.add(Utterance(participant="AGENT", text=f"How about Film {turn}?", items=[ItemRef(title=f"Film {turn}")]))
    d.add(Utterance(participant="USER", text="ok thanks"))
    return d


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """Three valid conversations, one failed, one with a single system turn."""
    folder = tmp_path / "run"
    with JsonlWriter(folder / "dialogues.jsonl") as writer:
        for d in [
            conversation("a", 3),
            conversation("b", 2),
            conversation("c", 4),
            conversation("failed", 3, status="failed"),
            conversation("short", 1),
        ]:
            writer.write(d)
    (folder / "manifest.json").write_text(json.dumps({"name": "t", "status": "completed"}))
    return folder


def judge(run_dir: Path, server: LLMServer, *extra: str) -> int:
    return main(
        [
            "judge",
            str(run_dir),
            "--llm-backend",
            "openai",
            "--base-url",
            server.openai_url,
            "--model",
            "test-model",
            "--no-cache",
            *extra,
        ]
    )


def judgments(run_dir: Path) -> list[dict]:
    return list(iter_jsonl(run_dir / "judgments.jsonl"))


def test_quality_skips_and_counts_invalid_conversations_and_records_usage(run_dir, capsys):
    with LLMServer(replies=lambda body: REPLY) as server:
        assert judge(run_dir, server, "--judge", "quality", "--json") == 0
        calls = len(server.chat_requests)
    summary = json.loads(capsys.readouterr().out)
    records = judgments(run_dir)
    assert calls == 15 and len(records) == 15
    assert {r["conversation_id"] for r in records} == {"a", "b", "c"}
    assert summary["skipped_invalid"] == {"failed": 1, "too_few_system_turns": 1}
    assert summary["judged"] == 3 and summary["statuses"] == {"ok": 15}
    assert all(r["value"] == 4.0 and r["usage"]["calls"] == 1 for r in records)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    usage = manifest["judges"]["usage"]
    assert usage["calls"] == 15 and usage["prompt_tokens"] == sum(r["usage"]["prompt_tokens"] for r in records)
    assert manifest["judges"]["by_judge"]["quality"]["calls"] == 15
    routes = {(r["url"], r["client"]) for r in manifest["judges"]["http_clients"].values()}
    assert routes == {(f"{server.openai_url}/chat/completions", "lean")}  # a local server: the lean client
    assert manifest["name"] == "t"  # the rest of the manifest is kept


def test_include_invalid_judges_them_too(run_dir):
    with LLMServer(replies=lambda body: REPLY) as server:
        assert judge(run_dir, server, "--judge", "quality", "--include-invalid", "--criteria", "fluency") == 0
    assert {r["conversation_id"] for r in judgments(run_dir)} == {"a", "b", "c", "failed", "short"}


def test_resume_skips_what_is_stored_and_adds_usage(run_dir):
    with LLMServer(replies=lambda body: REPLY) as server:
        assert judge(run_dir, server, "--judge", "quality", "--limit", "2") == 0
        assert len(judgments(run_dir)) == 10
        assert judge(run_dir, server, "--judge", "quality") == 0
        assert len(judgments(run_dir)) == 15 and len(server.chat_requests) == 15
        assert judge(run_dir, server, "--judge", "quality") == 0
        assert len(server.chat_requests) == 15  # nothing left to do
    keys = [(r["conversation_id"], r["judge"], r["name"]) for r in judgments(run_dir)]
    assert len(keys) == len(set(keys))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["judges"]["usage"]["calls"] == 15


def test_transient_llm_errors_are_retried_on_the_next_invocation(run_dir):
    with LLMServer(replies=lambda body: REPLY, faults=["500"] * 100) as server:
        assert judge(run_dir, server, "--judge", "quality", "--criteria", "fluency") == 3  # every judgment failed
    assert {r["status"] for r in judgments(run_dir)} == {"llm_error"}
    assert all(r["value"] is None for r in judgments(run_dir))
    with LLMServer(replies=lambda body: REPLY) as server:
        assert judge(run_dir, server, "--judge", "quality", "--criteria", "fluency") == 0
    latest = {r["conversation_id"]: r for r in judgments(run_dir)}
    assert {r["status"] for r in latest.values()} == {"ok"}


def test_dry_run_calls_nothing_and_counts_calls(run_dir, capsys):
    with LLMServer(replies=lambda body: REPLY) as server:
        assert judge(run_dir, server, "--judge", "core12", "--debate", "--dry-run", "--json") == 0
        assert server.chat_requests == []
    report = json.loads(capsys.readouterr().out)
    # 3 valid conversations; effectiveness needs ground truth, which these lack: 11 factors each,
    # plus 4 roles x 4 rounds of debate each
    assert report["calls"] == 3 * 11 + 3 * 16
    assert (
        report["prompt_tokens"] > 0 and report["total_tokens"] == report["prompt_tokens"] + report["completion_tokens"]
    )
    assert not (run_dir / "judgments.jsonl").exists()


def test_core12_debate_with_a_models_map(run_dir, tmp_path):
    def reply(body):
        if "\nYour role: " in body["messages"][0]["content"]:
            return json.dumps({"statement": "agreed", "score": 65})
        return REPLY

    models = tmp_path / "models.yaml"
    models.write_text(
        yaml.safe_dump({"judge.core12.coherence": {"model": "coh"}, "debate.linguist": {"model": "ling"}})
    )
    with LLMServer(replies=reply) as server:
        assert judge(run_dir, server, "--judge", "core12", "--debate", "--models", str(models), "--limit", "1") == 0
        by_model = server.counters["by_model"]
    records = judgments(run_dir)
    overall = [r for r in records if r["judge"] == "debate"]
    assert len(overall) == 1 and overall[0]["value"] == 65.0 and overall[0]["raw"]["stop_reason"] == "unanimous"
    factors = [r for r in records if r["judge"] == "core12"]
    assert len(factors) == 12
    assert {r["status"] for r in factors if r["name"] == "effectiveness"} == {"missing_input"}
    assert by_model == {"coh": 1, "ling": 1, "test-model": 10 + 3}


def test_user_mistakes_are_one_line_errors(run_dir, tmp_path, capsys):
    assert main(["judge", str(tmp_path / "nowhere"), "--judge", "quality"]) == 2
    assert "dialogues.jsonl" in capsys.readouterr().err
    assert main(["judge", str(run_dir), "--judge", "quality", "--debate"]) == 2
    assert main(["judge", str(run_dir), "--judge", "nosuchjudge"]) == 2
    assert "unknown judges type" in capsys.readouterr().err
