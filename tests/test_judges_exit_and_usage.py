"""`usersimcrs judge` exit codes and usage: a judging whose judgments mostly fail exits 3 with its
failure reasons, and every request a counting server saw is counted once, the same on the console
and in the manifest (retries, judge re-asks and errors included)."""

from __future__ import annotations

import json

from tests.test_judges_cli import judge, judgments, run_dir  # noqa: F401 - the run folder fixture
from usersimcrs.testing.llm_server import LLMServer

OK = json.dumps({"rationale": "fine", "rating": 4})
OUT_OF_RANGE = json.dumps({"rationale": "fine", "rating": 99})


def test_a_judging_in_which_every_judgment_fails_exits_3_with_its_reasons(run_dir, capsys):  # noqa: F811
    with LLMServer(replies=lambda body: OUT_OF_RANGE) as server:
        code = judge(run_dir, server, "--judge", "quality", "--max-attempts", "2")
        seen = server.counters["chat"]
    out, err = capsys.readouterr()
    assert code == 3
    assert {r["status"] for r in judgments(run_dir)} == {"out_of_range"}
    assert "failed judgments: 15 of 15; by reason:" in out
    assert "   15  out_of_range: score 99 outside 1-5" in out
    assert err.strip() == "error: 15 of 15 judgments failed (100%), more than max_failed_share 0.2"
    # 15 judgments x 2 judge attempts x (1 + 3 retries of the LLM layer: the reply breaks the schema's range)
    assert seen == 15 * 2 * 4
    assert "'requests': 120" in out and "'resamples': 15" in out and "'retries': 90" in out


def test_a_judging_with_all_judgments_failing_exits_3_whatever_the_threshold(run_dir):  # noqa: F811
    with LLMServer(replies=lambda body: "no idea") as server:
        assert judge(run_dir, server, "--judge", "quality", "--criteria", "fluency", "--max-failed-share", "1") == 3


def test_a_few_failures_under_the_threshold_exit_0_and_are_listed(run_dir, capsys):  # noqa: F811
    def reply(body: dict) -> str:
        system = body["messages"][0]["content"] + body["messages"][-1]["content"]
        return OUT_OF_RANGE if "fluency" in system.lower() and "Film 3" in json.dumps(body) else OK

    with LLMServer(replies=reply) as server:
        code = judge(run_dir, server, "--judge", "quality", "--max-attempts", "1", "--max-failed-share", "0.5")
    out = capsys.readouterr().out
    failed = [r for r in judgments(run_dir) if r["value"] is None]
    assert code == 0 and failed, out
    assert f"failed judgments: {len(failed)} of 15; by reason:" in out


def test_usage_counts_every_request_the_server_saw_once(run_dir, capsys):  # noqa: F811
    """500s the LLM layer retries, unusable replies the judge asks again about, and good answers:
    requests = what the server counted, on the console and in the manifest alike."""

    def reply(body: dict) -> str:
        messages = body["messages"]
        corrected = any(m["role"] == "assistant" for m in messages)  # a re-ask after an unusable reply
        asks_fluency = "fluency" in messages[-1]["content"].lower()
        return OK if corrected or not asks_fluency else "I cannot rate this."

    faults = ["500", None, None, "500", "500"] + [None] * 200
    with LLMServer(replies=reply, faults=faults) as server:
        code = judge(run_dir, server, "--judge", "quality", "--json", "--max-attempts", "3")
        seen = server.counters["chat"]
        bodies = [json.dumps(r.body["messages"]) for r in server.chat_requests]
    report = json.loads(capsys.readouterr().out)
    usage = report["usage"]
    assert code == 0 and report["statuses"] == {"ok": 15}
    asks = set(bodies)  # each judge ask is one distinct prompt; the server saw retries of some of them
    reasks = {b for b in asks if '"assistant"' in b}
    assert len(asks) == 15 + 3 and len(reasks) == 3  # fluency asked again once in each conversation
    assert usage["requests"] == seen == len(bodies)
    assert usage["calls"] == len(asks) and usage["retries"] == seen - len(asks) >= 3
    assert usage["resamples"] == len(reasks)
    assert usage["errors"] == 3  # the three first fluency asks ended without a usable answer
    manifest = json.loads((run_dir / "manifest.json").read_text())["judges"]
    assert {k: manifest["usage"][k] for k in usage} == usage
    assert manifest["llm"]["calls"] == usage["calls"] and manifest["llm"]["retries"] == usage["retries"]
    by_model = report["by_model"]["openai:test-model"]["usage"]
    assert by_model["requests"] == seen
    assert manifest["by_model"]["openai:test-model"]["quality"]["requests"] == seen


def test_an_all_error_judging_counts_its_requests_and_errors(run_dir, capsys):  # noqa: F811
    with LLMServer(replies=lambda body: OK, faults=["500"] * 100) as server:
        code = judge(run_dir, server, "--judge", "quality", "--criteria", "fluency", "--json")
        seen = server.counters["chat"]
    usage = json.loads(capsys.readouterr().out)["usage"]
    assert code == 3
    assert usage["requests"] == seen == 3 * 4  # 3 conversations, each call tried 1 + 3 retries
    assert usage["errors"] == 3 and usage["calls"] == 3
    manifest = json.loads((run_dir / "manifest.json").read_text())["judges"]
    assert manifest["usage"]["requests"] == seen and manifest["usage"]["errors"] == 3
    assert manifest["failures"]["quality"] == {
        "llm_error: LLMError: openai: HTTP 500 injected internal error (after 4 attempts)": 3
    }
