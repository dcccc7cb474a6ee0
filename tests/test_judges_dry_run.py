"""`usersimcrs judge --dry-run`: it names the model, prints a cost when a price is known (and says
when it is not), and plans the prompts the judging really sends, whichever prompt layout the
context window forces. (Its estimate against the embedded model's own token counts:
tests/test_judges_embedded.py.)"""

from __future__ import annotations

import json

import pytest

from tests.test_judges_cli import judgments, run_dir  # noqa: F401 - the run folder fixture
from usersimcrs.cli import main
from usersimcrs.judges.estimate import prompt_tokens
from usersimcrs.llm.base import Message
from usersimcrs.pipeline.judge import JudgeRequest, judge
from usersimcrs.testing.llm_server import LLMServer


def dry_run(run_dir, *flags: str) -> int:  # noqa: F811
    return main(["judge", str(run_dir), "--judge", "quality", "--dry-run", *flags])


def test_a_listed_openai_model_is_named_and_priced_without_a_key(run_dir, capsys, monkeypatch):  # noqa: F811
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert dry_run(run_dir, "--llm-backend", "openai", "--model", "gpt-4o-mini", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    (model,) = report["models"]
    planned = report["models"][model]
    assert model == "openai:gpt-4o-mini" and planned["calls"] == report["calls"] == 15
    expected = (planned["prompt_tokens"] * 0.15 + planned["completion_tokens"] * 0.60) / 1e6
    assert planned["cost_usd"] == pytest.approx(expected, abs=1e-6) and report["cost_usd"] == planned["cost_usd"]
    assert "OpenAI list price" in planned["price"]
    assert not (run_dir / "judgments.jsonl").exists()


def test_the_text_summary_names_model_and_cost(run_dir, capsys, monkeypatch):  # noqa: F811
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert dry_run(run_dir, "--llm-backend", "openai", "--model", "gpt-4o-mini") == 0
    out = capsys.readouterr().out
    assert "  model openai:gpt-4o-mini: 15 calls, ~" in out
    assert "\n  cost: $0.00" in out


def test_a_server_without_a_known_price_says_so_and_a_given_price_is_used(run_dir, capsys):  # noqa: F811
    with LLMServer() as server:
        base = ["--llm-backend", "openai", "--base-url", server.openai_url, "--model", "test-model"]
        assert dry_run(run_dir, *base) == 0
        out = capsys.readouterr().out
        assert "model openai:test-model: 15 calls" in out and "cost unknown (unknown)" in out
        assert "cost: unknown (no price for a model above; give one with --price IN,OUT" in out
        assert dry_run(run_dir, *base, "--price", "1,2", "--json") == 0
        report = json.loads(capsys.readouterr().out)
        assert server.chat_requests == []  # a dry run calls nothing
    planned = report["models"]["openai:test-model"]
    assert planned["price"] == "--price"
    assert report["cost_usd"] == pytest.approx((planned["prompt_tokens"] + 2 * planned["completion_tokens"]) / 1e6)


def test_a_local_model_has_no_per_token_price(run_dir, capsys):  # noqa: F811
    assert dry_run(run_dir, "--llm-backend", "llamacpp", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["models"]["llamacpp:gemma-3-270m"]["price"] == "local model: no per-token price"
    assert report["cost_usd"] == 0


def test_the_plan_holds_the_prompts_the_judging_sends_when_the_window_forces_the_compact_layout(run_dir):  # noqa: F811
    """A local model whose window is too small for the shared-rubric prompt gets the compact layout in
    `score`; the dry run plans exactly those prompts (it planned the longer ones before: 1.8x the tokens)."""
    with LLMServer(replies=lambda body: json.dumps({"rationale": "ok", "rating": 3})) as server:
        wide = server.config("ollama", n_ctx=32768, cache=False)
        narrow = server.config("ollama", n_ctx=1200, cache=False)
        request = {"judge": "quality", "limit": 1}
        shared = judge(run_dir, JudgeRequest(**request, dry_run=True), llm=wide).dry_run
        compact = judge(run_dir, JudgeRequest(**request, dry_run=True), llm=narrow).dry_run
        done = judge(run_dir, JudgeRequest(**request), llm=narrow)
        sent = [r.body["messages"] for r in server.chat_requests]
    assert shared is not None and compact is not None and done.statuses == {"ok": 5}
    assert compact.prompt_tokens < 0.8 * shared.prompt_tokens  # the compact layout is the shorter one
    assert compact.prompt_tokens == sum(prompt_tokens([Message(**m) for m in messages]) for messages in sent)
