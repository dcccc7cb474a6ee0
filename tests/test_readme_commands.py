"""Every command of README.md and docs/quickstart.md, and the recipe of docs/plug-in-your-crs.md, works as written.

The shell blocks are run line by line, in order, in a scratch folder laid out like a checkout (its
`configs/` and `.venv/` are the repository's, `../shared` the shared data), so the commands run as
the README writes them and nothing lands in the repository. The "From Python" block runs as one
script. Skipped, with the reason: commands that need an API key or a server and `make test` (this
suite). Two commands take minutes by design and run only with USERSIMCRS_README_SLOW=1 (not in
`make test`, which must stay within minutes): the demo itself (`make demo` / `usersimcrs
quickstart`; `make demo` is its check, tests/test_report_matrix.py checks that its config plans)
and the benchmark (`bench --quick`: about 5 minutes on 2 cores; tests/test_bench_harness.py runs
the same harness with --tiny and checks --output and a clean checkout). Afterwards `git status` of
the checkout is what it was.

A recipe (a section of another document, `RECIPES`) runs as one test, in order, in its own scratch
checkout: a line that starts a shipped test server (`python -m usersimcrs.testing.crs_servers ...`,
which serves until Ctrl-C) is started as written and kept running until the recipe's last line has
run, then stopped with SIGINT (what Ctrl-C sends); every other line must pass as above.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT, SHARED_DATA

DOCS = ("README.md", "docs/quickstart.md")
RECIPES = {"docs/plug-in-your-crs.md": "## One recipe: my CRS behind HTTP"}
SERVER = re.compile(r"-m usersimcrs\.testing\.crs_servers\b")
SERVER_READY_S = 60
COMMAND_TIMEOUT_S = 900
SLOW = os.environ.get("USERSIMCRS_README_SLOW") == "1"
DEMO = (
    "the demo itself (a few minutes on the embedded model): `make demo` is its check, and "
    "tests/test_report_matrix.py checks that the bundled demo config plans its six cells; "
    "USERSIMCRS_README_SLOW=1 runs it here"
)
BENCH = (
    "the benchmark (bench --quick: about 5 minutes on 2 cores): tests/test_bench_harness.py runs the same "
    "harness with --tiny --output and checks the checkout stays clean; USERSIMCRS_README_SLOW=1 runs it here"
)


@dataclass(frozen=True)
class Command:
    """One command of a document: its block, position and text."""

    doc: str
    block: int
    line: int
    text: str
    language: str

    @property
    def id(self) -> str:
        words = re.sub(r"^\.venv/bin/", "", self.text.split("  #")[0].strip()).split()
        return f"{self.doc}:{self.block}.{self.line}:{' '.join(words[:4])}"[:90]


def commands_in(doc: str, text: str) -> list[Command]:
    """The shell lines and Python blocks of `text` (from `doc`), in order."""
    out = []
    for number, match in enumerate(re.finditer(r"^```(bash|sh|python)\n(.*?)^```", text, re.M | re.S)):
        language, body = match.group(1), match.group(2)
        if language == "python":
            out.append(Command(doc, number, 0, body, "python"))
            continue
        lines = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        out += [Command(doc, number, i, line.strip(), "bash") for i, line in enumerate(lines)]
    return out


def commands() -> list[Command]:
    """The shell lines and Python blocks of the documents, in document order."""
    return [c for doc in DOCS for c in commands_in(doc, (PROJECT_ROOT / doc).read_text(encoding="utf-8"))]


def section(doc: str, heading: str) -> str:
    """The text of `doc` from the line `heading` to the next heading of its level (or the end)."""
    text = (PROJECT_ROOT / doc).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n") + 1
    level = heading.split(" ", 1)[0]
    end = text.find(f"\n{level} ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def recipe_commands(doc: str) -> list[Command]:
    """The commands of the recipe section of `doc` (`RECIPES`), in order."""
    return commands_in(doc, section(doc, RECIPES[doc]))


def skip_reason(command: Command) -> str | None:
    """Why a command is not run here (None: it runs)."""
    text = command.text
    if re.match(r"make test\b", text):
        return "`make test` is this test suite"
    if re.match(r"make demo\b", text):
        return "`make demo` is `usersimcrs quickstart` (the line of the demo) after `make install`"
    if (re.search(r"usersimcrs quickstart\b", text) or "run_matrix(" in text) and not SLOW:
        return DEMO
    if re.search(r"usersimcrs bench\b", text) and not SLOW:
        return BENCH
    openai = re.search(r"--llm-backend openai|llm\.backend=openai|LLM\(\"openai\"", text)
    if openai and "--dry-run" not in text and "base_url" not in text and "--base-url" not in text:
        return "needs an API key (OPENAI_API_KEY)"
    if re.search(r"--llm-backend ollama|llm\.backend=ollama", text):
        return "needs an Ollama server"
    if re.search(r"--url http://", text):
        return "needs a running CRS server"
    if re.search(r"usersimcrs studio\b", text) and "--export" not in text:
        return "serves a web study until stopped (Ctrl-C): a server"
    if "../shared/" in text and not SHARED_DATA.is_dir():
        return f"needs ../shared/data (not found at {SHARED_DATA})"
    return None


@dataclass
class Workspace:
    """Scratch checkouts, one per document (each is read on its own, from a fresh clone), and what ran."""

    base: Path
    done: dict[Command, subprocess.CompletedProcess | str] = field(default_factory=dict)

    def root(self, command: Command) -> Path:
        """checkout-<doc>/ with the repository's configs and virtual environment, and ../shared beside it."""
        root = self.base / f"checkout-{re.sub(r'[^a-z]+', '-', command.doc.lower())}"
        if not root.exists():
            root.mkdir()
            (root / "configs").symlink_to(PROJECT_ROOT / "configs")
            (root / ".venv").symlink_to(sys.prefix)  # the environment running the tests (make test: .venv)
        return root

    def run(self, command: Command) -> subprocess.CompletedProcess | str:
        """Run `command` once (and, first, every earlier command of its block it may build on)."""
        block = [c for c in ALL if c.doc == command.doc and c.block == command.block and c.line < command.line]
        for earlier in block:
            self._once(earlier)
        return self._once(command)

    def _once(self, command: Command) -> subprocess.CompletedProcess | str:
        if command not in self.done:
            reason = skip_reason(command)
            self.done[command] = f"skipped: {reason}" if reason else self._execute(command)
        return self.done[command]

    def _execute(self, command: Command) -> subprocess.CompletedProcess:
        root = self.root(command)
        argv = ["bash", "-c", command.text] if command.language == "bash" else [sys.executable, "-c", command.text]
        return subprocess.run(
            argv, cwd=root, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=self.env(root)
        )

    @staticmethod
    def env(root: Path) -> dict[str, str]:
        """The environment of a command: the checkout's .venv/bin first on PATH, plots without a display."""
        return {**os.environ, "MPLBACKEND": "Agg", "PATH": f"{root / '.venv' / 'bin'}:{os.environ['PATH']}"}

    def start_server(self, command: Command) -> subprocess.Popen:
        """Start a server line as written, in its own process group; return once it says it listens."""
        proc = subprocess.Popen(
            ["bash", "-c", command.text],
            cwd=self.root(command),
            env=self.env(self.root(command)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + SERVER_READY_S
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready and "listening on" in (proc.stdout.readline() if proc.stdout else ""):
                return proc
        stop_server(proc)
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"{command.doc}: `{command.text}` did not start (exit {proc.returncode}): {err[-2000:]}")


def stop_server(proc: subprocess.Popen) -> int:
    """Ctrl-C (SIGINT) to the server's process group, then SIGKILL if it has not ended after 10 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    return proc.returncode


ALL = commands()


def git_status() -> str | None:
    git = shutil.which("git")
    if git is None or not (PROJECT_ROOT / ".git").exists():
        return None
    done = subprocess.run([git, "status", "--porcelain"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Workspace:
    base = tmp_path_factory.mktemp("readme")
    if SHARED_DATA.is_dir():
        (base / "shared").mkdir()
        (base / "shared" / "data").symlink_to(SHARED_DATA)
    return Workspace(base)


@pytest.fixture(scope="module")
def status_before() -> str | None:
    return git_status()


def check(result: subprocess.CompletedProcess | str, command: Command) -> None:
    if isinstance(result, str):
        pytest.skip(result.removeprefix("skipped: "))
    accepted = (0, 1) if re.search(r"usersimcrs bench\b", command.text) else (0,)  # bench: 1 = a goal not met
    assert result.returncode in accepted, (
        f"{command.doc}: `{command.text[:200]}` exited {result.returncode}\n"
        f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}"
    )
    assert "Traceback (most recent call last)" not in result.stderr, result.stderr[-3000:]


def _params() -> list:
    return [pytest.param(command, id=command.id) for command in ALL]


def test_the_documents_have_commands():
    assert len([c for c in ALL if c.language == "bash"]) >= 10
    assert any(c.doc == "README.md" and c.language == "python" for c in ALL)


@pytest.mark.parametrize("command", _params())
def test_command_works_as_written(command, workspace, status_before):
    result = workspace.run(command)
    check(result, command)
    bench = re.search(r"usersimcrs bench\b.*--output (\S+)", command.text)
    if bench:
        assert (workspace.root(command) / bench.group(1) / "results.json").is_file()
        assert git_status() == status_before, "the benchmark changed files of the checkout"


RECIPE = [c for doc in RECIPES for c in recipe_commands(doc)]


def test_the_recipe_runs_as_written(workspace, status_before):
    """The recipe of docs/plug-in-your-crs.md in order: start its CRS server, run every line, stop the server."""
    assert any(SERVER.search(c.text) for c in RECIPE) and any("usersimcrs report" in c.text for c in RECIPE)
    reasons = [reason for c in RECIPE if (reason := skip_reason(c))]
    if reasons:
        pytest.skip(reasons[0])
    servers: list[tuple[Command, subprocess.Popen]] = []
    try:
        for command in RECIPE:
            if SERVER.search(command.text):
                servers.append((command, workspace.start_server(command)))
                continue
            check(workspace._execute(command), command)
    finally:
        stopped = [(command, stop_server(proc)) for command, proc in servers]
    for command, code in stopped:
        assert code == 0, f"{command.doc}: `{command.text}` exited {code} on Ctrl-C"
    if status_before is not None:
        assert git_status() == status_before


def test_the_recipe_shows_the_configs_it_runs():
    """The recipe's YAML block is configs/my_http_crs.yaml, and the matrix's `my_crs` runs that same section."""
    import yaml

    text = section("docs/plug-in-your-crs.md", RECIPES["docs/plug-in-your-crs.md"])
    shown = [yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", text, re.M | re.S)]
    config = yaml.safe_load((PROJECT_ROOT / "configs" / "my_http_crs.yaml").read_text(encoding="utf-8"))
    assert shown == [config]
    matrix = yaml.safe_load((PROJECT_ROOT / "configs" / "matrix_my_http_crs.yaml").read_text(encoding="utf-8"))
    assert [c for c in matrix["crs"] if c["name"] == "my_crs"] == [{"name": "my_crs", "crs": config["crs"]}]
    assert {c.get("type") for c in matrix["crs"] if c["name"] != "my_crs"} == {"retrieval", "popularity"}


def test_the_commands_leave_the_checkout_as_it_was(workspace, status_before):
    if status_before is None:
        pytest.skip("not a git checkout")
    for command in ALL:
        workspace.run(command)
    assert git_status() == status_before


def run_target(command: Command) -> tuple[str, bool] | None:
    """(the folder a `usersimcrs run` line writes, whether it resumes or overwrites it); None for other lines."""
    import shlex

    import yaml

    if command.language != "bash" or not re.search(r"usersimcrs run\b", command.text):
        return None
    words = shlex.split(command.text.split("  #")[0])
    args = words[words.index("run", next(i for i, w in enumerate(words) if w.endswith("usersimcrs"))) + 1 :]
    output = next((args[i + 1] for i, w in enumerate(args[:-1]) if w in ("-o", "--output")), None)
    if output is None:
        config = yaml.safe_load((PROJECT_ROOT / args[0]).read_text(encoding="utf-8"))
        output = config.get("output") or f"runs/{config['name']}"
    return str(Path(output)), bool({"--resume", "--overwrite"} & set(args))


def test_a_reader_who_follows_the_readme_then_the_quickstart_never_hits_a_folder_in_use():
    """Each document runs in its own checkout here, so this reads them as a reader does, one after the other:
    a `run` into a folder an earlier command wrote stops with 'already holds a run'."""
    written: dict[str, str] = {}
    for command in ALL:  # README.md first, then docs/quickstart.md
        target = run_target(command)
        if target is None:
            continue
        folder, reuses = target
        assert reuses or folder not in written, f"{command.id} writes {folder}, which {written.get(folder)} wrote"
        written.setdefault(folder, command.id)
    assert len(written) >= 2


def test_the_bench_line_says_it_exits_1_when_a_target_is_missed():
    lines = [c.text for c in ALL if c.language == "bash" and re.search(r"usersimcrs bench\b", c.text)]
    assert lines and all("exits 1" in line for line in lines), lines
