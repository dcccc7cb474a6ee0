"""`usersimcrs probe-crs` as a user runs it: a subprocess against a local server and a closed port."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from usersimcrs.testing.crs_servers import serve

ROOT = Path(__file__).resolve().parents[1]


def probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "usersimcrs", "probe-crs", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def ievalm():
    server = serve("ievalm")
    yield server
    server.stop()


def test_probe_reports_on_a_working_ievalm_server(ievalm):
    result = probe("--type", "crs_arena", "--url", ievalm.url, "--turns", "3")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "health        ok       'Model is running.'" in out
    assert "latency over 3 turns: p50" in out and "p95" in out
    assert "items: 3 (The Matrix (1999)" in out
    assert "cookies: the CRS set session" in out
    assert "sessions: a second conversation got the same first reply" in out
    assert "context: the last message got a different reply in a fresh conversation" in out
    assert out.rstrip().endswith("result: OK")
    posts = [e for e in ievalm.log if e.method == "POST"]
    assert len(posts) == 3 + 1 + 1  # the script, a second conversation, a fresh one for context


def test_probe_resolves_titles_with_an_item_file(ievalm, tmp_path):
    items = tmp_path / "movies.csv"
    items.write_text('movieId,title,genres\n2571,"Matrix, The (1999)",Action|Sci-Fi|Thriller\n', encoding="utf-8")
    result = probe("--type", "crs_arena", "--url", ievalm.url, "--turns", "2", "--item-file", str(items))
    assert result.returncode == 0, result.stderr
    assert "1 resolved to item IDs" in result.stdout


def test_probe_of_a_closed_port_fails_with_one_line():
    port = closed_port()
    result = probe("--type", "crs_arena", "--url", f"http://127.0.0.1:{port}/", "--timeout", "2")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: health check of") and f"127.0.0.1:{port}" in lines[0]
    assert "health        failed   health check of" in result.stdout
    assert "conversation  not run" in result.stdout and "result: FAILED (health)" in result.stdout


def test_probe_of_a_failing_server_names_the_turn():
    from usersimcrs.testing.crs_servers import FaultPlan, IEvaLMApp, LocalCRSServer

    server = LocalCRSServer(IEvaLMApp(), FaultPlan(rates={"non_json": 1.0})).start()
    try:
        result = probe("--type", "crs_arena", "--url", server.url, "--set", "retries=1", "--set", "backoff_s=0")
    finally:
        server.stop()
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and lines == ["error: probe-a turn 1: non-JSON reply (after 2 attempts)"]
    assert "conversation  failed   probe-a turn 1: non-JSON reply" in result.stdout


def test_probe_of_a_server_of_another_protocol_reports_the_failed_check(ievalm):
    """`--type moviebot` against an iEvaLM server: the check fails in the table and the command ends
    with one error line (it died with a ConnectorError traceback when opening the session)."""
    result = probe("--type", "moviebot", "--url", ievalm.url, "--set", "retries=0")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: probe-a opening the conversation: HTTP 400"), lines
    assert "does it speak the 'moviebot' connector's protocol?" in lines[0]
    rows = {line.split()[0]: line for line in result.stdout.splitlines() if line.split()}
    assert rows["health"].split()[1] == "ok"
    assert rows["conversation"].split()[1] == "failed" and "HTTP 400" in rows["conversation"]
    assert rows["sessions"].split()[1:] == ["not", "run"]
    assert result.stdout.rstrip().endswith("result: FAILED (conversation)")
