"""Servers that echo the secrets they receive: no file, report, log, cache or export may hold one.

The servers here are written from scratch for this test (not the project's protocol doubles). Every
request gets the next answer of a cycle: a 200 whose text repeats the secrets, a 4xx whose body
repeats them, a 5xx whose body repeats them, a 200 with the secrets in a response header, and a
redirect whose target URL carries them. The CRS (the generic JSON protocol, bearer token from
`crs.headers_env`), the Rasa REST channel (auth token from `crs.token_env`, sent in the URL) and the
LLM (OpenAI protocol: API key from `llm.api_key_env`, a header from `llm.headers_env`) all echo.

The study runs and judges through the command line at `-v` (its output and log kept), then scores,
reports and exports (DialogueKit and JSONL) the stored runs. The test first checks that each secret reached a server and was echoed in every way,
then reads every byte the toolkit wrote (run folder, report, exports, the CLI's output and log,
the LLM cache with its WAL) and looks for every secret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable
from urllib.parse import quote

import yaml

from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.pipeline.export import export_run
from usersimcrs.pipeline.report import report
from usersimcrs.pipeline.score import score

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sk-echo-SECRET-5c1d9e77a0"
LLM_HEADER = "hdr-echo-SECRET-31b2c4d5"
CRS_TOKEN = "crs-echo-SECRET-9f8e7d6c"
RASA_TOKEN = "rasa-echo-SECRET-4a4b4c4d"
SECRETS = [API_KEY, LLM_HEADER, CRS_TOKEN, RASA_TOKEN]
MODES = ("ok_echo", "client_error", "server_error", "header", "redirect")
SCHEDULE = ("ok", "ok_echo", "ok", "header", "ok", "client_error", "ok", "server_error", "ok", "redirect")
"""Answer kinds in the order requests get them: every second one is a plain answer, so conversations go on."""

Answer = tuple[int, dict[str, str], bytes]


class EchoServer:
    """A threaded HTTP server whose answers come from `respond(request number, path, headers, body)`."""

    def __init__(self, respond: Callable[[int, str, dict[str, str], bytes], Answer]) -> None:
        self.respond = respond
        self.schedule = SCHEDULE
        self.seen: list[tuple[str, dict[str, str]]] = []
        self.modes: dict[str, int] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def do_POST(self) -> None:  # noqa: N802
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                with owner._lock:
                    number = len(owner.seen)
                    owner.seen.append((self.path, headers))
                status, extra, payload = owner.respond(number, self.path, headers, body)
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **extra}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def mode(self, number: int, path: str) -> str:
        """The answer kind of request `number` (health checks always succeed)."""
        chosen = self.schedule[number % len(self.schedule)]
        with self._lock:
            self.modes[chosen] = self.modes.get(chosen, 0) + 1
        return chosen

    def __enter__(self) -> EchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _echo(headers: dict[str, str], path: str) -> str:
    """Everything secret the client sent: its auth headers and its URL."""
    return " | ".join([headers.get("authorization", ""), headers.get("x-api-token", ""), path])


def _failure(server: EchoServer, mode: str, echo: str, path: str) -> Answer | None:
    """The 4xx, 5xx and redirect answers every echo server shares (None for the others)."""
    if mode == "client_error":
        return 403, {}, json.dumps({"error": {"message": f"forbidden for {echo}"}}).encode()
    if mode == "server_error":
        return 500, {}, json.dumps({"error": {"message": f"upstream failed for {echo}"}}).encode()
    if mode == "redirect":
        target = f"{server.url}/login?next={quote(echo)}&token={echo.split(' ')[-1]}"
        return 302, {"Location": target}, f"moved to {target}".encode()
    return None


def crs_server() -> EchoServer:
    def respond(number: int, path: str, headers: dict[str, str], body: bytes) -> Answer:
        if path.startswith("/health"):
            return 200, {}, b'{"status": "ok"}'
        mode = server.mode(number, path)
        echo = _echo(headers, path)
        failed = _failure(server, mode, echo, path)
        if failed is not None:
            return failed
        reply = {"reply": {"text": f"You sent {echo}. Try Heat (1995).", "recommendations": [{"movie_id": "6"}]}}
        if mode == "ok_echo":
            reply["reply"]["recommendations"].append({"movie_id": "2", "name": echo})
        extra = {"X-Echo": headers.get("authorization", "")} if mode == "header" else {}
        return 200, extra, json.dumps(reply).encode()

    server = EchoServer(respond)
    return server


def rasa_server() -> EchoServer:
    def respond(number: int, path: str, headers: dict[str, str], body: bytes) -> Answer:
        if not path.startswith("/webhooks/"):
            return 200, {}, b'"Hello from Rasa: 3.6.0"'
        mode = server.mode(number, path)
        echo = _echo(headers, path)
        failed = _failure(server, mode, echo, path)
        if failed is not None:
            return failed
        sender = json.loads(body or b"{}").get("sender", "")
        text = f"you called {echo}" if mode == "ok_echo" else "What genre of movie would you like?"
        extra = {"X-Echo": path} if mode == "header" else {}
        return 200, extra, json.dumps([{"recipient_id": sender, "text": text}]).encode()

    server = EchoServer(respond)
    return server


def _structured(request: bytes, text: str) -> str:
    """An answer that fits the JSON schema the request asks for (strings carry `text`), else `text` itself."""
    try:
        schema = json.loads(request)["response_format"]["json_schema"]["schema"]
    except (ValueError, KeyError, TypeError):
        return text
    kinds = {"boolean": False, "integer": 3, "number": 3}
    properties = schema.get("properties", {})
    return json.dumps({key: kinds.get(spec.get("type"), text) for key, spec in properties.items()})


def llm_server() -> EchoServer:
    def respond(number: int, path: str, headers: dict[str, str], body: bytes) -> Answer:
        mode = server.mode(number, path)
        echo = _echo(headers, path)
        failed = _failure(server, mode, echo, path)
        if failed is not None:
            return failed
        text = f"my key is {echo}" if mode == "ok_echo" else "I like comedies, any ideas?"
        completion = {
            "id": "x",
            "object": "chat.completion",
            "model": "echo-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": _structured(body, text)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }
        extra = {"X-Echo": headers.get("authorization", "")} if mode == "header" else {}
        return 200, extra, json.dumps(completion).encode()

    server = EchoServer(respond)
    return server


def _cli(args: list[str], log: Path, env: dict[str, str]) -> int:
    with log.open("ab") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "usersimcrs", "-v", *args],
            cwd=ROOT,
            stdout=handle,
            stderr=handle,
            env=env,
            timeout=300,
        )
    return done.returncode


def _config(path: Path, llm_url: str, crs: dict) -> Path:
    data = {
        "name": path.stem,
        "seed": 4,
        "conversations": 12,
        "concurrency": 4,
        "max_turns": 3,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|", "keywords": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "llm": {
            "backend": "openai",
            "model": "echo-model",
            "base_url": llm_url + "/v1",
            "api_key_env": "ECHO_TEST_API_KEY",
            "headers_env": {"X-Api-Token": "ECHO_TEST_LLM_HEADER"},
            "retries": 1,
            "backoff_s": 0.01,
        },
        "simulator": {"type": "llm_single", "max_tokens": 48},
        "crs": crs,
        "progress": False,
        "max_failed_share": 1.0,  # the servers fail on purpose; this test is about secrets
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_no_echoed_secret_reaches_any_file_report_log_cache_or_export(tmp_path):
    env = {
        **os.environ,
        "ECHO_TEST_API_KEY": API_KEY,
        "ECHO_TEST_LLM_HEADER": LLM_HEADER,
        "ECHO_TEST_CRS_AUTH": f"Bearer {CRS_TOKEN}",
        "ECHO_TEST_RASA_TOKEN": RASA_TOKEN,
        "USERSIMCRS_CACHE_DIR": str(tmp_path / "cache"),
    }
    log = tmp_path / "cli.log"
    with llm_server() as llm, crs_server() as crs, rasa_server() as rasa:
        http_run = _config(
            tmp_path / "http.yaml",
            llm.url,
            {
                "type": "http",
                "url": crs.url + "/api/chat",
                "health_url": crs.url + "/health",
                "request_template": {"session": "{conversation_id}", "text": "{message}"},
                "text_path": "reply.text",
                "items_path": "reply.recommendations[*]",
                "item_id_field": "movie_id",
                "item_title_field": "name",
                "headers_env": {"Authorization": "ECHO_TEST_CRS_AUTH"},
                "retries": 0,
            },
        )
        rasa_run = _config(
            tmp_path / "rasa.yaml",
            llm.url,
            {
                "type": "rasa",
                "url": rasa.url + "/webhooks/rest/webhook",
                "token_env": "ECHO_TEST_RASA_TOKEN",
                "retries": 0,
            },
        )
        for config in (http_run, rasa_run):
            run_dir = tmp_path / config.stem
            # the schedule is for the calls: no preflight GET takes an answer of it (tests/test_llm_preflight.py)
            assert _cli(["run", str(config), "--output", str(run_dir), "--no-preflight"], log, env) == 0, (
                log.read_text()
            )
        llm.schedule = ("ok_echo", "server_error", "header", "ok")  # no permanent failure: the judging goes on
        judge = ["judge", str(tmp_path / "http"), "--judge", "quality", "--include-invalid", "--no-preflight"]
        judged = _cli(judge, log, env)
        assert judged == 0, log.read_text()
    for name in ("http", "rasa"):  # what reads the stored run: in-process, the toolkit's Python API
        score(tmp_path / name, MetricsConfig(options={"satisfaction": False}))
        report(tmp_path / name)
        export_run(tmp_path / name, tmp_path / "exports" / f"{name}.json", format="dialoguekit")
        export_run(tmp_path / name, tmp_path / "exports" / f"{name}.jsonl", format="jsonl")

    # the secrets were sent, and echoed in every way
    for server, secret in ((llm, API_KEY), (llm, LLM_HEADER), (crs, CRS_TOKEN), (rasa, RASA_TOKEN)):
        assert any(secret in " ".join([path, *headers.values()]) for path, headers in server.seen), secret
        assert set(MODES) <= set(server.modes), server.modes
    # and the run recorded what the servers did (so the scan below reads real failures and replies)
    records = [json.loads(line) for line in (tmp_path / "http" / "dialogues.jsonl").read_text().splitlines()]
    errors = " ".join(r.get("error") or "" for r in records)
    assert "HTTP 403" in errors and "***" in errors
    assert any("***" in u["text"] for r in records for u in r["utterances"])

    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".yaml"]
    assert any(p.name.endswith(".sqlite") or "cache" in p.parts for p in written)  # the LLM cache was written
    assert any(p.name == "report.html" for p in written)
    judgments = (tmp_path / "http" / "judgments.jsonl").read_text()
    assert "***" in judgments  # the judge's replies echoed the secrets too
    leaks = []
    for path in written:
        data = path.read_bytes()
        for secret in SECRETS:
            if secret.encode() in data or quote(secret).encode() in data:
                leaks.append(f"{path.relative_to(tmp_path)}: {secret}")
    assert not leaks, "\n".join(leaks)
