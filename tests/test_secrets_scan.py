"""Secrets never reach disk: a study with a dummy API key and auth headers, then every file is scanned.

The key and headers come only from environment variables. The test proves they were really used
(the local servers received them), then scans every file the run wrote (manifest, logs, dialogues,
metrics, report, judgments, LLM cache database with its WAL) for each secret.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from usersimcrs.testing.crs_servers import FaultPlan, GenericJSONApp, LocalCRSServer
from usersimcrs.testing.llm_server import LLMServer

ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sk-dummy-SECRET-4f9a2c71e0"
LLM_HEADER = "hdr-SECRET-8d1e55b3"
CRS_TOKEN = "crs-SECRET-a7c3e9d2"
SECRETS = [API_KEY, LLM_HEADER, CRS_TOKEN]


def _cli(args: list[str], log: Path, env: dict[str, str]) -> int:
    with log.open("ab") as handle:
        done = subprocess.run(
            [sys.executable, "-m", "usersimcrs", "-v", *args], cwd=ROOT, stdout=handle, stderr=handle, env=env
        )
    return done.returncode


def test_no_secret_in_any_file_the_study_wrote(tmp_path, monkeypatch):
    env = {
        **os.environ,
        "OPENAI_API_KEY": API_KEY,
        "USERSIMCRS_TEST_LLM_HEADER": LLM_HEADER,
        "USERSIMCRS_TEST_CRS_AUTH": f"Bearer {CRS_TOKEN}",
        "USERSIMCRS_CACHE_DIR": str(tmp_path / "cache"),
    }
    run_dir = tmp_path / "run"
    with (
        LLMServer(seed=3) as llm,
        LocalCRSServer(GenericJSONApp(token=CRS_TOKEN), FaultPlan(rates={"http_500": 0.15}, seed=3)) as crs,
    ):
        config = {
            "name": "secrets",
            "seed": 3,
            "conversations": 6,
            "concurrency": 3,
            "max_turns": 3,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "llm": {
                "backend": "openai",
                "model": "test-model",
                "base_url": llm.openai_url,
                "api_key_env": "OPENAI_API_KEY",
                "headers_env": {"X-Api-Token": "USERSIMCRS_TEST_LLM_HEADER"},
                "backoff_s": 0.01,
            },
            "simulator": {"type": "llm_single", "max_tokens": 32},
            "crs": {
                "type": "http",
                "url": crs.url + "api/chat",
                "request_template": {"session": "{conversation_id}", "text": "{message}", "history": "{history}"},
                "text_path": "reply.text",
                "items_path": "reply.recommendations[*]",
                "item_id_field": "movie_id",
                "item_title_field": "name",
                "headers_env": {"Authorization": "USERSIMCRS_TEST_CRS_AUTH"},
                "retries": 0,
            },
            "progress": False,
            "max_failed_share": 1.0,  # faults are injected on purpose; this test is about secrets
        }
        config_path = tmp_path / "study.yaml"
        config_path.write_text(yaml.safe_dump(config))
        log = run_dir / "logs" / "cli.log"
        log.parent.mkdir(parents=True)
        assert _cli(["run", str(config_path), "--output", str(run_dir), "--report"], log, env) == 0, log.read_text()
        _cli(["judge", str(run_dir), "--judge", "quality", "--llm-backend", "openai", "--base-url", llm.openai_url,
              "--model", "test-model", "--limit", "2"], log, env)  # fmt: skip
        llm_headers = [{k.lower(): v for k, v in r.headers.items()} for r in llm.chat_requests]
        crs_headers = [{k.lower(): v for k, v in e.headers.items()} for e in crs.exchanges("/api/chat")]
    # the secrets were really in use ...
    assert any(h.get("authorization") == f"Bearer {API_KEY}" for h in llm_headers)
    assert any(h.get("x-api-token") == LLM_HEADER for h in llm_headers)
    assert crs_headers and all(h.get("authorization") == f"Bearer {CRS_TOKEN}" for h in crs_headers)
    # ... and appear in none of the files written
    written = [p for folder in (run_dir, tmp_path / "cache") for p in folder.rglob("*") if p.is_file()]
    names = {p.name for p in written}
    assert {"manifest.json", "dialogues.jsonl", "cli.log", "report.html", "metrics.csv", "judgments.jsonl"} <= names
    assert any(n.startswith("llm-cache.sqlite3") for n in names)
    leaks = [(str(p), s) for p in written for s in SECRETS if s.encode() in p.read_bytes()]
    assert leaks == []
