"""Trust on real inputs: resume re-runs failed conversations, fail-fast preflight, honest exit codes,
the CRS's raw payload kept, ambiguous titles left ambiguous.

The resume test kills a real iEvaLM-protocol CRS server (a subprocess) in the middle of a CLI run,
restarts it on the same port and resumes; the result must equal an uninterrupted run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from crs_connectors.base import ConnectorConfig, CRSConnector, CRSReply
from usersimcrs.analysis.failures import failure_reason
from usersimcrs.analysis.failures import summarize_failures_file as summarize_failures
from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.jsonl import iter_jsonl
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.engine.conversation import RAW_LIMIT_BYTES, bounded_raw
from usersimcrs.pipeline.simulate import simulate
from usersimcrs.simulators.base import SimulatorConfig, Stop, UserSimulator
from usersimcrs.testing.crs_servers import MovieBotApp, serve

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "data" / "tiny_movies.csv"
GENRES = ("action", "comedy", "sci-fi", "horror", "drama", "thriller", "crime", "mystery", "adventure")


# --------------------------------------------------------------------------- plug-ins (loaded by dotted path)


class GenreUserConfig(SimulatorConfig):
    delay_s: float = 0.0


class GenreUser(UserSimulator):
    """Names two seeded genres and asks for more in between, so each conversation's texts differ."""

    Config = GenreUserConfig

    def script(self) -> list[str]:
        first, second = self.rng.sample(GENRES, 2)
        return ["Hello!", f"I like {first} movies", "Something else please", f"Now I want {second}"]

    async def start(self) -> Utterance | None:
        self.lines = self.script()
        await asyncio.sleep(self.config.delay_s)
        return Utterance(participant=USER, text=self.lines[0])

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        await asyncio.sleep(self.config.delay_s)
        said = len(dialogue.user_turns)
        if said >= len(self.lines):
            return Stop(reason="script_done")
        return Utterance(participant=USER, text=self.lines[said])


class FixedReplyConfig(ConnectorConfig):
    titles: list[str] = []
    raw_bytes: int = 0


class FixedReplyCRS(CRSConnector):
    """Recommends the same titles every turn, with a raw payload of about `raw_bytes` bytes."""

    Config = FixedReplyConfig

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        raw = {"blob": "x" * self.config.raw_bytes, "turn": len(history.utterances)}
        return CRSReply(
            text="Have a look at these.", items=[ItemRef(title=t, raw=t) for t in self.config.titles], raw=raw
        )


# --------------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(port: int) -> subprocess.Popen:
    """The iEvaLM test server as a subprocess on `port`; returns once it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "usersimcrs.testing.crs_servers", "ievalm", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert f":{port}/" in line, line
    return proc


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def _run_config(tmp_path: Path, crs: dict[str, Any], **extra: Any) -> Path:
    data = {
        "name": "trust",
        "seed": 13,
        "conversations": 12,
        "concurrency": 2,
        "max_turns": 6,
        "items": {"path": str(TINY), "delimiters": {"genres": "|", "keywords": "|"}},
        "simulator": {"type": "tests.test_engine_trust:GenreUser"},
        "crs": crs,
        "progress": False,
        **extra,
    }
    return _write(tmp_path / "run.yaml", data)


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "usersimcrs", *args], cwd=ROOT, capture_output=True, text=True, **kw)


def _lines(run_dir: Path) -> list[dict]:
    return list(iter_jsonl(run_dir / "dialogues.jsonl"))


def _by_id(run_dir: Path) -> dict[str, tuple]:
    """conversation ID -> (status, end reason, texts, recommended item IDs)."""
    return {
        r["conversation_id"]: (
            r["status"],
            r["end_reason"],
            tuple(u["text"] for u in r["utterances"]),
            tuple(tuple(i.get("id") for i in u["items"]) for u in r["utterances"]),
        )
        for r in _lines(run_dir)
    }


def _ids_on_disk(path: Path) -> list[str]:
    """IDs of the complete lines of `path` right now (what a reader sees)."""
    if not path.exists():
        return []
    ids = []
    for raw in path.read_bytes().splitlines(keepends=True):
        if raw.endswith(b"\n"):
            ids.append(json.loads(raw)["conversation_id"])
    return ids


# --------------------------------------------------------------------------- item 3: resume retries failures


def test_crs_killed_mid_run_then_restarted_and_resumed_equals_an_uninterrupted_run(tmp_path):
    port = _free_port()
    crs = {"type": "crs_arena", "url": f"http://127.0.0.1:{port}/", "retries": 1, "backoff_s": 0.01, "timeout_s": 5}
    config = _run_config(tmp_path, crs, simulator={"type": "tests.test_engine_trust:GenreUser", "delay_s": 0.12})
    server = _start_server(port)
    try:
        reference = _cli("run", str(config), "--output", str(tmp_path / "reference"))
        assert reference.returncode == 0, reference.stderr
        out = tmp_path / "killed"
        run = subprocess.Popen(
            [sys.executable, "-m", "usersimcrs", "run", str(config), "--output", str(out)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.time() + 60
        while len(_ids_on_disk(out / "dialogues.jsonl")) < 3 and time.time() < deadline and run.poll() is None:
            time.sleep(0.01)
        assert run.poll() is None, "the run ended before the CRS could be killed"
        _kill(server)  # the CRS goes down mid-run
        stdout, stderr = run.communicate(timeout=120)
        first = _lines(out)
        failed = [r for r in first if r["status"] == "failed"]
        assert len(first) == 12 and 1 <= len(failed) <= 9, stdout
        assert run.returncode == 3, stderr  # more than max_failed_share (0.2) failed
        assert f"failed conversations: {len(failed)} of 12" in stdout and "cannot connect to <url>" in stdout
        assert stderr.strip().splitlines()[-1].startswith(f"error: {len(failed)} of 12 conversations failed")

        kept = tmp_path / "kept"
        shutil.copytree(out, kept)
        server = _start_server(port)  # the same port again
        # --keep-failed: failed conversations stay as they were
        before = (kept / "dialogues.jsonl").read_bytes()
        keep = _cli("run", str(config), "--output", str(kept), "--resume", "--keep-failed")
        assert keep.returncode == 3 and (kept / "dialogues.jsonl").read_bytes() == before, keep.stderr
        assert "12 already done" in keep.stdout

        # default resume: the failed ones run again; no reader ever sees an ID twice
        resume = subprocess.Popen(
            [sys.executable, "-m", "usersimcrs", "run", str(config), "--output", str(out), "--resume"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        snapshots = 0
        while resume.poll() is None:
            ids = _ids_on_disk(out / "dialogues.jsonl")
            assert len(ids) == len(set(ids)), f"duplicate ID visible: {ids}"
            snapshots += 1
            time.sleep(0.003)
        stdout, stderr = resume.communicate(timeout=60)
        assert resume.returncode == 0, stderr
    finally:
        _kill(server)
    final = _lines(out)
    ids = [r["conversation_id"] for r in final]
    assert len(ids) == 12 and len(set(ids)) == 12 and all(r["status"] == "ok" for r in final)
    assert f"{len(failed)} failed ones re-run" in stdout and f"{12 - len(failed)} already done" in stdout
    assert _by_id(out) == _by_id(tmp_path / "reference")  # same IDs, texts and items as the clean run
    seeds = {r["conversation_id"]: r["seed"] for r in final}
    assert all(seeds[f["conversation_id"]] == f["seed"] for f in failed)  # re-run with the same ID and seed
    manifest = RunFolder(out).read_manifest()
    assert manifest["status"] == "completed" and manifest["dialogues"]["completed"] == 12
    print(f"resume figures: failed after kill {len(failed)}/12, snapshots checked {snapshots}, final ok {len(final)}")


# --------------------------------------------------------------------------- item 4: fail fast, exit honestly


def test_unreachable_crs_stops_run_before_any_conversation(tmp_path):
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    config = _run_config(tmp_path, {"type": "crs_arena", "url": url})
    out = _cli("run", str(config), "--output", str(tmp_path / "out"))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and lines[0].startswith("error: CRS at")
    assert not _lines(tmp_path / "out") and not (tmp_path / "out" / "dialogues.jsonl").exists()
    # without the check the same run writes every conversation as failed and exits 3
    config = _run_config(tmp_path, {"type": "crs_arena", "url": url, "retries": 0}, conversations=3)
    unchecked = _cli("run", str(config), "--output", str(tmp_path / "unchecked"), "--no-crs-check")
    assert unchecked.returncode == 3 and [r["status"] for r in _lines(tmp_path / "unchecked")] == ["failed"] * 3


def test_preflight_skips_in_process_connectors_and_accepts_a_4xx_answer():
    from usersimcrs.engine.preflight import answered, check_crs, check_distinct
    from usersimcrs.testing.crs_servers import GenericJSONApp, LocalCRSServer

    assert asyncio.run(check_crs({"type": "tests.engine_plugins:EchoCRS"})) is None
    assert answered("HTTP 404: Not Found") and not answered("HTTP 503") and not answered("cannot connect to x")
    with LocalCRSServer(GenericJSONApp()) as server:  # GET on its chat route is not a health route
        section = {"type": "http", "url": server.url + "api/chat"}
        assert asyncio.run(check_crs(section)).startswith("HTTP 4")
        assert asyncio.run(check_distinct([(section, "a"), (dict(section), "b"), ({"type": "popularity"}, "c")])) == 2


def test_unreachable_crs_stops_the_matrix_before_any_cell(tmp_path, capsys):
    from usersimcrs.cli import main

    url = f"http://127.0.0.1:{_free_port()}/"
    matrix = _write(
        tmp_path / "matrix.yaml",
        {
            "name": "m",
            "base": {
                "seed": 1,
                "conversations": 2,
                "max_turns": 2,
                "progress": False,
                "items": {"path": str(TINY), "delimiters": {"genres": "|", "keywords": "|"}},
            },
            "simulators": [{"name": "genre", "type": "tests.test_engine_trust:GenreUser"}],
            "crs": [{"name": "pop", "type": "popularity"}, {"name": "arena", "type": "crs_arena", "url": url}],
            "report": False,
        },
    )
    assert main(["matrix", str(matrix), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0]
    assert not (tmp_path / "out" / "cells").exists()


def test_failed_share_over_the_limit_exits_3_with_reasons(tmp_path):
    data = yaml.safe_load(_run_config(tmp_path, {"type": "tests.engine_plugins:EchoCRS", "fail_every": 2}).read_text())
    data["conversations"] = 20
    config = _write(tmp_path / "failing.yaml", data)
    out = _cli("run", str(config), "--output", str(tmp_path / "a"))
    assert out.returncode == 3, out.stderr
    records = _lines(tmp_path / "a")
    failed = sum(r["status"] == "failed" for r in records)
    assert len(records) == 20 and failed == 10  # the folder is fully written before exit 3
    assert RunFolder(tmp_path / "a").read_manifest()["status"] == "completed"
    assert "failed conversations: 10 of 20; top reasons:" in out.stdout
    assert "   10  ConnectorError: HTTP 500" in out.stdout
    assert out.stderr.strip() == "error: 10 of 20 conversations failed (50%), more than max_failed_share 0.2"
    allowed = _cli("run", str(config), "--output", str(tmp_path / "b"), "--set", "max_failed_share=0.5")
    assert allowed.returncode == 0 and "10 failed" in allowed.stdout, allowed.stderr


def test_failure_reasons_group_by_reason_not_by_port_or_count(tmp_path):
    assert failure_reason(
        "ConnectorError: cannot connect to http://127.0.0.1:5005/ (refused) (after 3 attempts)"
    ) == failure_reason("ConnectorError: cannot connect to http://127.0.0.1:6001/ (refused) (after 2 attempts)")
    assert failure_reason("ConnectorError: HTTP 500") != failure_reason("ConnectorError: HTTP 404")
    path = tmp_path / "d.jsonl"
    errors = ["HTTP 500 (after 2 attempts)", "timeout after 5s", "HTTP 500 (after 3 attempts)", None]
    rows = [{"conversation_id": str(i), "status": "failed" if e else "ok", "error": e} for i, e in enumerate(errors)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = summarize_failures(path)
    assert (summary.total, summary.failed) == (4, 3) and summary.share == 0.75
    assert [(r.reason, r.count) for r in summary.reasons] == [
        ("HTTP 500 (after <n> attempts)", 2),
        ("timeout after <n>s", 1),
    ]


def test_simulate_works_inside_a_running_event_loop(tmp_path):
    config = RunConfig.model_validate(
        {
            "name": "inloop",
            "conversations": 3,
            "concurrency": 2,
            "progress": False,
            "items": {"path": str(TINY), "delimiters": {"genres": "|", "keywords": "|"}},
            "simulator": {"type": "tests.test_engine_trust:GenreUser"},
            "crs": {"type": "tests.engine_plugins:EchoCRS"},
        }
    )

    async def notebook_cell():
        return simulate(config, tmp_path / "out")

    result = asyncio.run(notebook_cell())
    assert (result.completed, result.failed, result.exceeds_failed_share) == (3, 0, False)
    assert result.failures.total == 3 and len(_lines(tmp_path / "out")) == 3


# --------------------------------------------------------------------------- item 5: keep what the CRS sent


def test_moviebot_buttons_and_intent_reach_dialogues_jsonl(tmp_path):
    server = serve("moviebot")
    try:
        config = _run_config(tmp_path, {"type": "moviebot", "url": server.url}, conversations=3)
        out = _cli("run", str(config), "--output", str(tmp_path / "run"))
    finally:
        server.stop()
    assert out.returncode == 0, out.stderr
    agent = [u for d in _lines(tmp_path / "run") for u in d["utterances"] if u["participant"] == "AGENT"]
    raws = [u["metadata"].get("crs_raw") for u in agent]
    assert all(isinstance(raw, dict) for raw in raws) and len(raws) >= 6
    offers = [raw for raw in raws if raw["intent"] == "REVEAL.RECOMMEND"]
    assert offers, [raw["intent"] for raw in raws]
    sent = MovieBotApp.buttons()["payload"]["buttons"]
    assert all(raw["buttons"] == sent for raw in offers)  # what the server sent, button for button
    assert all(not u["metadata"].get("crs_raw_truncated") for u in agent)


def test_oversize_raw_is_truncated_with_a_flag(tmp_path):
    config = _run_config(
        tmp_path, {"type": "tests.test_engine_trust:FixedReplyCRS", "raw_bytes": 40_000}, conversations=2
    )
    out = _cli("run", str(config), "--output", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    agent = [u for d in _lines(tmp_path / "run") for u in d["utterances"] if u["participant"] == "AGENT"]
    assert agent and all(u["metadata"]["crs_raw_truncated"] is True for u in agent)
    for u in agent:
        meta = u["metadata"]
        assert isinstance(meta["crs_raw"], str) and len(meta["crs_raw"].encode()) <= RAW_LIMIT_BYTES
        assert meta["crs_raw"].startswith('{"blob": "xxx') and meta["crs_raw_bytes"] > 40_000
    small = bounded_raw({"intent": "X", "buttons": [{"title": "ok"}]})
    assert small == {"crs_raw": {"intent": "X", "buttons": [{"title": "ok"}]}} and bounded_raw(None) == {}
    edge = bounded_raw("é" * RAW_LIMIT_BYTES)  # multi-byte text cut on a character boundary
    assert edge["crs_raw_truncated"] and len(edge["crs_raw"].encode()) <= RAW_LIMIT_BYTES


# --------------------------------------------------------------------------- item 7: ambiguous titles


def test_ambiguous_titles_are_counted_in_the_run_summary(tmp_path):
    items = tmp_path / "items.csv"
    items.write_text(
        "movieId,title,genres\n1,Planet of the Apes (1968),Sci-Fi\n2,Planet of the Apes (2001),Sci-Fi\n"
        "3,Heat (1995),Action\n"
    )
    crs = {
        "type": "tests.test_engine_trust:FixedReplyCRS",
        "titles": ["Planet of the Apes", "Planet of the Apes (2001)", "Heat"],
    }
    config = _run_config(tmp_path, crs, conversations=3, items={"path": str(items), "delimiters": {"genres": "|"}})
    out = _cli("run", str(config), "--output", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    agent = [u for d in _lines(tmp_path / "run") for u in d["utterances"] if u["participant"] == "AGENT"]
    lists = [[(i["id"], i.get("resolution"), i.get("candidates", [])) for i in u["items"]] for u in agent]
    assert all(
        items == [(None, "ambiguous", ["1", "2"]), ("2", "exact", []), ("3", "normalized", [])] for items in lists
    )
    manifest = RunFolder(tmp_path / "run").read_manifest()
    assert manifest["dialogues"]["ambiguous_items"] == len(agent) > 0
    assert f", {len(agent)} ambiguous item titles" in out.stdout
