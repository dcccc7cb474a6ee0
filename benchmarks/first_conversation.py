"""Time to first conversation: wall time from starting `usersimcrs run` (a fresh process) to the first
line in its dialogues.jsonl. Start-up work (imports, config, data, CRS check) is what it measures::

    python -m benchmarks.first_conversation     # starts its own LLM (50 ms) and iEvaLM CRS servers

A conversation of the LLM user makes about four LLM calls, so about 0.2 s of the figure is the
server's latency; the rest is the toolkit's start-up. Timed starts find the modules compiled (after an
untimed start that compiled them), as after `pip install` or any earlier run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.server import crs_server, llm_counters, llm_server, reset_llm_counters
from benchmarks.setups import LATENCY_S, ROOT, llm_user_config
from usersimcrs.config import RunConfig

POLL_S = 0.002


def first_line_seen(path: Path) -> bool:
    """True once `path` holds at least one complete line."""
    try:
        with path.open("rb") as handle:
            return handle.readline().endswith(b"\n")
    except FileNotFoundError:
        return False


def _write_config(config: RunConfig, work: Path, name: str) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    path = work / name  # JSON is YAML
    path.write_text(json.dumps(config.model_dump(mode="json", exclude_unset=True)), encoding="utf-8")
    return path


def _env(work: Path, pycache: Path | None) -> dict[str, str]:
    """The fresh process's environment. `pycache`: where compiled modules are cached (PYTHONPYCACHEPREFIX),
    whatever PYTHONDONTWRITEBYTECODE says here: a start after an untimed one finds them compiled, as
    after `pip install` (which compiles them) or any earlier run. None: nothing compiled, every module is
    compiled from source on import (the worst first start)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache.resolve())
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="no-bytecode-", dir=work)  # empty: nothing cached
    return env


def time_startup_parts(config: RunConfig, work: Path, pycache: Path | None) -> dict[str, float]:
    """Interpreter start, imports, config, item and rating loading of a fresh process (`benchmarks.startup_child`);
    `pycache`: see `_env`."""
    path = _write_config(config, work, "startup.yaml")
    spawned = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.startup_child", str(path), repr(spawned)],
        capture_output=True,
        text=True,
        check=True,
        env=_env(work, pycache),
        cwd=work,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_to_first_conversation(
    llm_url: str,
    crs_url: str | None,
    work: Path,
    *,
    conversations: int = 4,
    concurrency: int = 4,
    config: RunConfig | None = None,
    pycache: Path | None = None,
) -> dict[str, Any]:
    """Start `python -m usersimcrs run` on the LLM-user config (or `config`) and time the first dialogues.jsonl
    line; with the LLM test server's counters, also the first LLM call (the end of start-up). `pycache`: see
    `_env` (time starts after an untimed one that compiled the modules there)."""
    if config is None:
        config = llm_user_config(
            llm_url, conversations=conversations, concurrency=concurrency, crs_url=crs_url, name="bench-first"
        )
    config_path = _write_config(config, work, "first.yaml")
    out_dir = Path(tempfile.mkdtemp(prefix="first-run-", dir=work))  # fresh: no line of an earlier run
    dialogues = out_dir / "dialogues.jsonl"
    command = [sys.executable, "-m", "usersimcrs", "run", str(config_path), "--output", str(out_dir), "--overwrite"]
    env = _env(work, pycache)
    reset_llm_counters(llm_url)
    spawned = time.time()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=work)
    first_s = None
    while process.poll() is None or first_s is None:
        if first_s is None and first_line_seen(dialogues):
            first_s = time.perf_counter() - started
        if process.poll() is not None and first_s is None:
            first_s = time.perf_counter() - started if first_line_seen(dialogues) else None
            break
        time.sleep(POLL_S)
    _, stderr = process.communicate()
    total_s = time.perf_counter() - started
    if process.returncode != 0 or first_s is None:
        raise RuntimeError(f"usersimcrs run failed ({process.returncode}): {stderr.decode(errors='replace')[-300:]}")
    first_call = llm_counters(llm_url).get("first_chat_unix")
    return {
        "first_conversation_s": round(first_s, 3),
        "first_llm_call_s": None if first_call is None else round(first_call - spawned, 3),
        "process_wall_s": round(total_s, 3),
        "conversations": config.conversations,
    }


def timed_starts(
    llm_url: str, crs_url: str | None, work: Path, repeats: int, *, pycache: Path, config: RunConfig | None = None
) -> list[dict[str, Any]]:
    """`repeats` timed starts (`time_to_first_conversation`) after an untimed one that compiles the modules
    into `pycache`, as `pip install` or any earlier run would have."""
    time_to_first_conversation(llm_url, crs_url, work, config=config, pycache=pycache)
    return [
        time_to_first_conversation(llm_url, crs_url, work, config=config, pycache=pycache)
        for _ in range(max(1, repeats))
    ]


def main() -> int:
    with llm_server(LATENCY_S * 1000) as llm_url, crs_server() as crs_url:
        work = Path(tempfile.mkdtemp(prefix="usersimcrs-first-"))
        for run in timed_starts(llm_url, crs_url, work, 3, pycache=work / "pycache"):
            print(json.dumps(run))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
