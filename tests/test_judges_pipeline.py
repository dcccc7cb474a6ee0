"""The judge pipeline as a library function and through the CLI: judgments of several models side
by side (resume per model, report per model), permanent LLM failures stop the command at once,
transient ones are recorded, and the sync entry point works inside a running event loop."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.metrics_fixtures import write_run
from usersimcrs.analysis.judgments import read_judgments
from usersimcrs.cli import main
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.judges.base import Judgment
from usersimcrs.pipeline.judge import JudgeRequest, JudgeResult, judge
from usersimcrs.testing.llm_server import LLMServer

SCORE_OF = {"model-a": 4, "model-b": 2}


def by_model_reply(body: dict) -> str:
    """Each model gives its own rating, so the two models' judgments can be told apart."""
    return json.dumps({"rationale": f"{body['model']} thinks so", "rating": SCORE_OF.get(body["model"], 3)})


def cli_judge(run_dir: Path, url: str, model: str, *extra: str) -> int:
    return main(
        [
            "judge",
            str(run_dir),
            "--judge",
            "quality",
            "--llm-backend",
            "openai",
            "--base-url",
            url,
            "--model",
            model,
            "--no-cache",
            *extra,
        ]
    )


def rows(run_dir: Path) -> list[dict]:
    return list(iter_jsonl(run_dir / "judgments.jsonl"))


@pytest.fixture
def run_dir(tmp_path) -> Path:
    """8 conversations (the last one failed), not judged yet."""
    folder = tmp_path / "run"
    write_run(folder, judged=False)
    return folder


# ---------------------------------------------------------------------------- several models


def test_two_models_judge_side_by_side_resume_per_model_and_report_both(run_dir, capsys):
    with LLMServer(replies=by_model_reply) as server:
        assert cli_judge(run_dir, server.openai_url, "model-a", "--json") == 0
        first = json.loads(capsys.readouterr().out)
        assert cli_judge(run_dir, server.openai_url, "model-b", "--json") == 0
        second = json.loads(capsys.readouterr().out)
        calls = server.counters["by_model"]
        # judging again with either model finds everything done
        assert cli_judge(run_dir, server.openai_url, "model-a", "--json") == 0
        again_a = json.loads(capsys.readouterr().out)
        assert cli_judge(run_dir, server.openai_url, "model-b", "--json") == 0
        again_b = json.loads(capsys.readouterr().out)
        assert server.counters["by_model"] == calls  # no call on the reruns
    valid = 7  # the fixture's last conversation failed
    assert first["judgments_written"] == second["judgments_written"] == 5 * valid
    assert again_a["judgments_written"] == again_b["judgments_written"] == 0
    assert again_a["already_done"] == again_b["already_done"] == valid
    assert calls == {"model-a": 5 * valid, "model-b": 5 * valid}
    stored = rows(run_dir)
    per_model = {m: [r for r in stored if r["model"] == m] for m in ("openai:model-a", "openai:model-b")}
    assert {m: len(v) for m, v in per_model.items()} == {"openai:model-a": 35, "openai:model-b": 35}
    assert {r["value"] for r in per_model["openai:model-a"]} == {4.0}
    assert {r["value"] for r in per_model["openai:model-b"]} == {2.0}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    by_model = manifest["judges"]["by_model"]
    assert by_model["openai:model-a"]["quality"]["judgments"] == 35
    assert by_model["openai:model-b"]["quality"]["calls"] == 35
    # the report shows each model's scores
    assert main(["metrics", str(run_dir), "--no-satisfaction"]) == 0
    assert main(["report", str(run_dir)]) == 0
    scores = (run_dir / "report" / "tables" / "judge_scores.csv").read_text()
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "model" in scores.splitlines()[0]
    lines = [line for line in scores.splitlines()[1:] if line.startswith("quality,fluency,")]
    assert len(lines) == 2
    assert any("openai:model-a" in line and "4.0" in line for line in lines)
    assert any("openai:model-b" in line and "2.0" in line for line in lines)
    assert "openai:model-a" in html and "openai:model-b" in html and "per judge model" in html


def test_records_with_a_bare_model_name_count_for_that_model_only(run_dir, capsys):
    with LLMServer(replies=by_model_reply) as server:
        assert cli_judge(run_dir, server.openai_url, "model-a", "--criteria", "fluency") == 0
        legacy = [{**r, "model": "model-a"} for r in rows(run_dir)]  # as written before backend:model
        (run_dir / "judgments.jsonl").write_text("".join(json.dumps(r) + "\n" for r in legacy))
        server.reset_log()
        capsys.readouterr()
        assert cli_judge(run_dir, server.openai_url, "model-a", "--criteria", "fluency", "--json") == 0
        same = json.loads(capsys.readouterr().out)
        assert cli_judge(run_dir, server.openai_url, "model-b", "--criteria", "fluency", "--json") == 0
        other = json.loads(capsys.readouterr().out)
        assert server.counters["by_model"] == {"model-b": 7}
    assert same["judgments_written"] == 0 and other["judgments_written"] == 7


def test_one_model_report_has_no_model_column(run_dir):
    with LLMServer(replies=by_model_reply) as server:
        assert cli_judge(run_dir, server.openai_url, "model-a", "--criteria", "fluency,conversational_flow") == 0
    assert main(["metrics", str(run_dir), "--no-satisfaction"]) == 0
    assert main(["report", str(run_dir)]) == 0
    header = (run_dir / "report" / "tables" / "judge_scores.csv").read_text().splitlines()[0]
    assert "model" not in header.split(",")


# ---------------------------------------------------------------------------- permanent failures


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_api_key_stops_at_once_with_one_line(run_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "usersimcrs",
            "judge",
            str(run_dir),
            "--judge",
            "quality",
            "--llm-backend",
            "openai",
            "--model",
            "gpt-4o-mini",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    elapsed = time.perf_counter() - started
    assert done.returncode == 2, done.stderr
    assert elapsed < 5.0, f"took {elapsed:.1f}s"
    line = _one_line(done.stderr)
    assert line.startswith("error:") and "OPENAI_API_KEY" in line
    assert not (run_dir / "judgments.jsonl").exists()


class _Refusing(BaseHTTPRequestHandler):
    """Answers every request with one HTTP status and an OpenAI-style error body."""

    status = 401
    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(self.path)
        body = json.dumps(
            {
                "error": {
                    "message": "Incorrect API key provided: sk-te****",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        ).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002
        """Quiet."""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Clients hanging up on an aborted run are expected here."""


@pytest.fixture
def refusing_server():
    handler = type("Refusing401", (_Refusing,), {"status": 401, "seen": []})
    httpd = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", handler
    httpd.shutdown()
    httpd.server_close()


def test_rejected_key_401_stops_with_one_line_and_no_rows(run_dir, refusing_server, capsys):
    url, handler = refusing_server
    started = time.perf_counter()
    assert cli_judge(run_dir, url, "gpt-4o-mini", "--concurrency", "1") == 2
    elapsed = time.perf_counter() - started
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("error:") and "401" in line and "openai:gpt-4o-mini" in line and url in line
    assert "sk-te" not in line or "****" in line  # the server's own masking at most; no key of ours
    assert elapsed < 5.0
    assert not (run_dir / "judgments.jsonl").exists()
    # aborted at the first failure: one conversation's criteria were asked, not every conversation's
    assert 1 <= len(handler.seen) <= 5


def test_wrong_base_url_404_stops_with_one_line_and_no_rows(run_dir, capsys):
    with LLMServer(replies=by_model_reply) as server:
        wrong = f"{server.url}/wrong/v1"
        assert cli_judge(run_dir, wrong, "model-a") == 2
        answered = server.counters["answered"]
    line = _one_line(capsys.readouterr().err)
    assert "404" in line and wrong in line and "openai:model-a" in line
    assert answered == 0 and not (run_dir / "judgments.jsonl").exists()


def test_rows_written_before_a_permanent_failure_stay(run_dir, capsys):
    with LLMServer(replies=by_model_reply) as server:
        assert cli_judge(run_dir, server.openai_url, "model-a", "--limit", "2") == 0
    before = rows(run_dir)
    assert len(before) == 10
    with LLMServer(replies=by_model_reply) as server:
        assert cli_judge(run_dir, f"{server.url}/wrong/v1", "model-a") == 2
    assert rows(run_dir) == before


def test_transient_500_then_ok_records_judgments(run_dir, capsys):
    with LLMServer(replies=by_model_reply, faults=["500", "500"]) as server:
        assert cli_judge(run_dir, server.openai_url, "model-a", "--criteria", "fluency", "--json") == 0
        faults = server.counters["faults"]
    summary = json.loads(capsys.readouterr().out)
    assert faults == {"500": 2}
    assert summary["judgments_written"] == 7 and summary["statuses"] == {"ok": 7}
    assert {r["value"] for r in rows(run_dir)} == {4.0}


# ---------------------------------------------------------------------------- library entry point


def test_sync_judge_works_inside_a_running_event_loop(run_dir):
    request = JudgeRequest(judge="quality", criteria=["fluency", "conversational_flow"], no_cache=True)

    async def caller(config) -> tuple[JudgeResult, bool]:
        result = judge(run_dir, request, llm=config)  # a sync call while this loop runs
        return result, asyncio.get_running_loop().is_running()

    with LLMServer(replies=by_model_reply, models=["model-b"]) as server:
        result, still_running = asyncio.run(caller(server.config("openai", cache=False)))
        calls = len(server.chat_requests)
    assert still_running and isinstance(result, JudgeResult)
    assert result.judgments_written == 14 == calls and result.statuses == {"ok": 14}
    assert result.by_model["openai:model-b"].judgments == 14
    assert result.models == {"fluency": "openai:model-b", "conversational_flow": "openai:model-b"}
    assert len(read_judgments(run_dir / "judgments.jsonl")) == 14


def test_dry_run_result_is_typed_and_calls_nothing(run_dir):
    with LLMServer(replies=by_model_reply) as server:
        result = judge(run_dir, JudgeRequest(judge="quality", dry_run=True), llm=server.config("openai"))
        assert server.chat_requests == []
    assert result.dry_run is not None and result.dry_run.calls == 5 * 7 and result.to_judge == 7
    assert result.judgments_written == 0 and not (run_dir / "judgments.jsonl").exists()


# ---------------------------------------------------------------------------- records


def test_reader_returns_judgments_and_tolerates_imported_anchor_records(tmp_path):
    from usersimcrs.analysis.anchor_judgments import anchor_judgments

    anchor = anchor_judgments(
        {
            "kbrd": {
                "fluency": [
                    {"conversation_id": "c1", "score": 0.0, "score_explanation": None},
                    {"conversation_id": "c2", "score": 4},
                ]
            }
        }
    )
    path = tmp_path / "judgments.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [*anchor, {**anchor[1], "metadata": {"repeat": 2}}]) + "\n")
    records = read_judgments(path)
    assert all(isinstance(r, Judgment) for r in records)
    failed, ok, extra = records
    assert failed.value is None and failed.status == "parse_error" and failed.raw_value == 0.0
    assert failed.agent_id == "kbrd" and failed.source == "imported" and failed.rationale == "" and failed.model == ""
    assert ok.value == 4.0 and ok.raw_value == 4
    assert extra.provenance == {"metadata": {"repeat": 2}}


def test_debate_rounds_view_follows_the_records_not_the_judge_name():
    from usersimcrs.report.html import Report
    from usersimcrs.report.sections import add_judgment_sections

    records = [
        {
            "conversation_id": f"c{i}",
            "judge": "my_panel",
            "name": "overall",
            "value": 60.0,
            "scale": [0, 100],
            "model": "m",
            "raw": {"rounds": [{"a": 50.0, "b": 70.0}, {"a": 60.0, "b": 60.0}], "max_rounds": 2},
        }
        for i in range(3)
    ]
    report = Report(title="t")
    add_judgment_sections(report, records)
    assert "debate_rounds" in report.tables and "debate_trajectories" in report.plots
    plain = Report(title="t")
    add_judgment_sections(plain, [{**r, "judge": "debate", "raw": None} for r in records])
    assert "debate_rounds" not in plain.tables
