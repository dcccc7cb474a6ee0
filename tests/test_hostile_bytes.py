"""Hostile bytes from a CRS, an LLM and an imported file: no traceback, no conversation lost to one character.

The CRS and LLM servers are written here from scratch. Their answers cycle through what Python's
JSON reader lets through and no UTF-8 writer takes: lone surrogates (escaped, in the body and inside
a JSON answer), NaN and Infinity, objects where titles and IDs belong, an integer of 5,000 digits,
payloads nested 300 levels (readable, but too deep for the serializer) and 3,000 levels (deeper
than Python reads). Every conversation must end `ok`, each repair counted in the utterance's
`metadata.repairs` (and in the manifest's LLM usage), and the LLM cache must hold the replies.
An import of a DialogueKit file with the same values keeps every dialogue with its repairs counted;
a file nested deeper than Python reads is one `error:` line.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable

import yaml

from usersimcrs.core.run_folder import RunFolder, load_run

ROOT = Path(__file__).resolve().parents[1]
SURROGATE = "\ud800"


def nested(depth: int, leaf: object = 0) -> str:
    return "[" * depth + json.dumps(leaf) + "]" * depth


class Server:
    """A threaded HTTP server answering POSTs with `respond(request number, body)` -> (status, raw body)."""

    def __init__(self, respond: Callable[[int, bytes], tuple[int, bytes]]) -> None:
        self.count = 0
        lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                self._send(200, b'{"status": "ok"}')

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    number = owner.count
                    owner.count += 1
                self._send(*respond(number, body))

            def _send(self, status: int, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


CRS_CYCLE = ("ok", "surrogate", "nan", "too_deep", "non_string", "deep_raw", "huge_int")


def crs_answer(number: int, body: bytes) -> tuple[int, bytes]:
    mode = CRS_CYCLE[number % len(CRS_CYCLE)]
    recs: list[dict] = [{"movie_id": "6", "name": "Heat (1995)"}]
    reply: dict = {"text": "You might like Heat (1995).", "recommendations": recs}
    if mode == "surrogate":  # json.dumps writes a lone surrogate as the escape \ud800
        reply["text"] = f"You might like Heat{SURROGATE} (1995)."
        recs.append({"movie_id": "2", "name": f"Jumanji{SURROGATE}"})
    elif mode == "nan":
        reply["scores"] = [float("nan"), float("inf"), float("-inf")]
    elif mode == "non_string":
        recs.append({"movie_id": ["2"], "name": ["Jumanji", "1995"]})
        recs.append({"movie_id": "3", "name": {"en": "Grumpier Old Men"}})
    elif mode == "huge_int":
        return 200, json.dumps({"reply": reply}).encode()[:-2] + b', "count": 1' + b"0" * 5000 + b"}}"
    elif mode == "deep_raw":
        return 200, json.dumps({"reply": reply}).encode()[:-2] + b', "deep": ' + nested(300).encode() + b"}}"
    elif mode == "too_deep":
        return 200, json.dumps({"reply": reply}).encode()[:-2] + b', "deep": ' + nested(3000).encode() + b"}}"
    return 200, json.dumps({"reply": reply}, allow_nan=True).encode()


LLM_CYCLE = ("ok", "surrogate_in_body", "deep_content", "surrogate_in_answer", "deep_body", "ok")


def completion(content: str) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def llm_answer(number: int, body: bytes) -> tuple[int, bytes]:
    mode = LLM_CYCLE[number % len(LLM_CYCLE)]
    answer = {"end": False, "utterance": f"I like comedies, any ideas? ({number})"}
    if mode == "surrogate_in_body":  # the completion text itself holds the lone surrogate
        answer["utterance"] = f"Something funny{SURROGATE} please ({number})"
        content = json.dumps(answer, ensure_ascii=False)
    elif mode == "surrogate_in_answer":  # the JSON answer inside the text escapes it
        answer["utterance"] = f"A comedy{SURROGATE}, maybe ({number})"
        content = json.dumps(answer)
    elif mode == "deep_content":
        content = nested(3000) + " " + json.dumps(answer)
    elif mode == "deep_body":
        return 200, nested(3000, completion(json.dumps(answer))).encode()
    else:
        content = json.dumps(answer)
    return 200, json.dumps(completion(content)).encode()


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "usersimcrs", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )


def test_hostile_crs_and_llm_replies_are_repaired_and_counted_not_failed(tmp_path):
    crs, llm = Server(crs_answer), Server(llm_answer)
    try:
        config = {
            "name": "hostile",
            "seed": 5,
            "conversations": 8,
            "concurrency": 1,  # one request at a time: each conversation meets the cycles in a fixed order
            "max_turns": 4,
            "items": {
                "path": str(ROOT / "configs/data/tiny_movies.csv"),
                "delimiters": {"genres": "|", "keywords": "|"},
            },
            "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
            "llm": {
                "backend": "openai",
                "model": "test-model",
                "base_url": llm.url + "/v1",
                "retries": 3,
                "backoff_s": 0.01,
                "cache_dir": str(tmp_path / "cache"),
            },
            "simulator": {"type": "llm_single", "max_tokens": 64},
            "crs": {
                "type": "http",
                "url": crs.url + "/api/chat",
                "request_template": {"session": "{conversation_id}", "text": "{message}"},
                "text_path": "reply.text",
                "items_path": "reply.recommendations[*]",
                "item_id_field": "movie_id",
                "item_title_field": "name",
                "retries": 2,
                "backoff_s": 0.01,
            },
            "progress": False,
        }
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        result = _cli("run", str(path), "--output", str(tmp_path / "run"))
    finally:
        crs.close()
        llm.close()
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    run = load_run(tmp_path / "run")
    dialogues = run.dialogues
    assert [d.status for d in dialogues] == ["ok"] * 8, [d.error for d in dialogues]
    repairs: dict[str, int] = {}
    for dialogue in dialogues:
        for utterance in dialogue.utterances:
            for kind, n in (utterance.metadata.get("repairs") or {}).items():
                repairs[kind] = repairs.get(kind, 0) + n
            assert SURROGATE not in utterance.text
            for item in utterance.items:
                assert not (item.title or "").startswith(("[", "{")), item  # never a Python repr of a list
                assert not (item.id or "").startswith(("[", "{")), item
    assert repairs.get("lone_surrogates", 0) >= 2  # the CRS's text and its title
    assert repairs.get("non_finite_numbers", 0) >= 3  # NaN, Infinity, -Infinity, stored as null
    assert repairs.get("too_deep", 0) >= 1  # the 300-level payload, cut
    texts = [u.text for d in dialogues for u in d.utterances]
    assert any("\ufffd" in t for t in texts if "Heat" in t)  # the CRS's repaired text is kept
    assert any("\ufffd" in t for t in texts if "funny" in t or "comedy" in t)  # and the LLM user's
    raws = [json.dumps(u.metadata.get("crs_raw")) for d in dialogues for u in d.utterances]
    assert any('"1' + "0" * 5000 + '"' in raw for raw in raws)  # the 5,000-digit number kept, as its digits
    manifest = RunFolder(tmp_path / "run").read_manifest()
    assert manifest["llm"]["repaired"]["lone_surrogates"] >= 2
    assert any((tmp_path / "cache").rglob("*")), "the LLM cache holds the (repaired) replies"


def test_import_keeps_hostile_values_repaired_and_refuses_unreadable_nesting(tmp_path):
    dialogue = {
        "conversation_id": "c1",
        "conversation": [
            {"participant": "USER", "utterance": f"hello{SURROGATE}", "utterance_id": "c1:0"},
            {"participant": "AGENT", "utterance": "Heat (1995)", "utterance_id": "c1:1"},
        ],
        "metadata": {"score": float("nan"), "deep": json.loads(nested(300)), "note": f"x{SURROGATE}y"},
    }
    good = tmp_path / "hostile.json"
    good.write_text(json.dumps([dialogue, {**dialogue, "conversation_id": "c2"}]), encoding="utf-8")
    result = _cli("import", str(good), "--output", str(tmp_path / "imported"))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "repaired" in result.stdout and "lone_surrogates" in result.stdout
    run = load_run(tmp_path / "imported")
    assert [d.conversation_id for d in run.dialogues] == ["c1", "c2"]
    assert run.dialogues[0].utterances[0].text == "hello\ufffd"
    report = json.loads(RunFolder(tmp_path / "imported").import_report_path.read_text())
    assert report["repairs"] == {"lone_surrogates": 4, "non_finite_numbers": 2, "too_deep": 2}

    deep = tmp_path / "deep.json"
    deep.write_text(nested(100_000), encoding="utf-8")
    result = _cli("import", str(deep), "--output", str(tmp_path / "deep"))
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "nested deeper" in lines[0]
    assert not (tmp_path / "deep").exists()
