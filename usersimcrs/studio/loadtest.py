"""`usersimcrs studio STUDY.yaml --load-test`: many simulated participants at once, and a crash mid-test.

A benchmark, not a test: it starts the study's server as a subprocess on 127.0.0.1 (a fresh study
folder unless `--output` is given), gives `participants` bots personal links (the open link once
those are used up) and lets each go
through the study's pages as a person would (typed messages, ratings, votes, guesses, with a pause
between pages), a new bot taking the place of each one that finishes, until `duration_s`. With
`kill_at_s`, the server is killed with SIGKILL at that time and restarted at once on the same port;
bots retry what was in flight (the same form, the same submission ID).

Afterwards it reads the study log and checks: every submission the server acknowledged (answered
with a redirect) is there (lost = 0), and no submission is stored twice (duplicated = 0), including
the deliberate double submissions the bots make. It prints the page times (p50, p95, max), the
requests and their statuses, the restart time and the load average. Traffic never leaves loopback;
every loop is bounded by the deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from usersimcrs.errors import UserError
from usersimcrs.studio.config import load_study
from usersimcrs.studio.server import study_keys
from usersimcrs.studio.service import Pools, StudyService
from usersimcrs.studio.store import LOG, StudyStore

MESSAGES = (
    "Hi! I'd like a funny comedy for tonight.",
    "Something with action, please.",
    "Do you have a good science fiction film?",
    "I liked Toy Story, anything similar?",
    "Not that one, something else please.",
    "Sounds great, I'll watch it.",
    "Maybe a drama instead?",
)
READY_TIMEOUT_S = 120.0


@dataclass
class Form:
    """One form of a page: where it posts, its fields, its radio groups, selects and text areas."""

    action: str
    fields: dict[str, str] = field(default_factory=dict)
    radios: dict[str, list[str]] = field(default_factory=dict)
    selects: dict[str, list[str]] = field(default_factory=dict)
    textareas: list[str] = field(default_factory=list)
    disabled: bool = False


class FormParser(HTMLParser):
    """The forms of one of the studio's pages (enough HTML for a bot to act like a person)."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(action=a.get("action", "")))
        if not self.forms:
            return
        form = self.forms[-1]
        if tag == "input":
            kind, name = a.get("type", "text"), a.get("name", "")
            if kind == "radio":
                form.radios.setdefault(name, []).append(a.get("value", ""))
            elif name:
                form.fields[name] = a.get("value", "")
        elif tag == "textarea":
            form.textareas.append(a.get("name", ""))
        elif tag == "select":
            self._select = a.get("name", "")
            form.selects[self._select] = []
        elif tag == "option" and self._select is not None:
            form.selects[self._select].append(a.get("value", ""))
        elif tag == "button" and "disabled" in a:
            form.disabled = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None


def page_forms(html: str, url: str = "") -> list[Form]:
    """The forms of a page; a form without `action` posts to the page's own `url`."""
    parser = FormParser()
    parser.feed(html)
    for form in parser.forms:
        form.action = form.action or url
    return parser.forms


def fill(form: Form, rng: random.Random, text: str = "") -> dict[str, str]:
    """The form's fields with a random choice for every radio group and select, `text` in text areas."""
    data = dict(form.fields)
    for name, values in form.radios.items():
        data[name] = rng.choice(values)
    for name, values in form.selects.items():
        data[name] = rng.choice(values)
    for name in form.textareas:
        data[name] = text
    return data


def expected_record(action: str, data: dict[str, str], url: str) -> str | None:
    """The record ID a successful post of this form stores (None for navigation forms)."""
    kind = action.rsplit("/", 1)[-1]
    assignment = url.rstrip("/").rsplit("/", 1)[-1]
    ids = {
        "message": f"msg:{data.get('submission_id')}",
        "end": f"end:{data.get('conversation_id')}",
        "label": f"label:{data.get('conversation_id')}",
        "vote": f"vote:{assignment}",
        "annotate": f"ann:{assignment}:{data.get('position')}",
        "turing": f"turing:{assignment}:{data.get('position')}",
    }
    return ids.get(kind)


@dataclass
class LoadTestResult:
    """Figures of one load test."""

    participants: int
    duration_s: float
    kill_at_s: float | None
    folder: str
    requests: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    page_times_s: list[float] = field(default_factory=list)
    connection_errors: int = 0
    acknowledged: int = 0
    double_submissions: int = 0
    lost: int = 0
    duplicated: int = 0
    lost_examples: list[str] = field(default_factory=list)
    finished_participants: int = 0
    joined: int = 0
    records: int = 0
    restart_s: float | None = None
    acknowledged_before_kill: int = 0
    lost_before_kill: int = 0
    loadavg: str = ""

    def percentile(self, q: float) -> float | None:
        if not self.page_times_s:
            return None
        ordered = sorted(self.page_times_s)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    @property
    def ok(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.acknowledged > 0


class ServerProcess:
    """The studio server as a subprocess; start, kill (SIGKILL), restart on the same port, stop."""

    def __init__(self, study_path: str, folder: Path, port: int = 0) -> None:
        self.study_path = study_path
        self.folder = folder
        self.port = port
        self.process: subprocess.Popen[str] | None = None
        self.urls: dict[str, str] = {}
        self.log = folder.parent / f"{folder.name}.server.log"

    def start(self) -> dict[str, str]:
        command = [sys.executable, "-m", "usersimcrs", "studio", self.study_path, "--output", str(self.folder)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        errors = self.log.open("a")
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        errors.close()
        deadline = time.monotonic() + READY_TIMEOUT_S
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the studio server exited before it was ready; see {self.log}")
            key, _, value = line.strip().partition(": ")
            if key in ("admin", "open link"):
                self.urls[key] = value.split()[0]
            if key == "studio":
                self.urls["base"] = value.split(" listening on ")[-1].split()[0] if "listening" in value else ""
            if key == "personal links":
                break
        base = self.urls.get("base", "")
        self.port = int(base.rstrip("/").rsplit(":", 1)[-1]) if base else self.port
        return self.urls

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class Bot:
    """One simulated participant: joins, then answers each page until the study says it is done."""

    def __init__(self, number: int, run: LoadRun) -> None:
        self.number = number
        self.run = run
        self.rng = random.Random(number)

    async def request(self, method: str, url: str, data: dict[str, str] | None = None) -> tuple[int, str, str]:
        """(status, body, redirect target); retried while the server is down (same data, same IDs)."""
        import httpx

        run = self.run
        while time.monotonic() < run.deadline + 30:
            started = time.perf_counter()
            try:
                response = await run.client.request(method, run.base + url, data=data)
            except (httpx.TransportError, httpx.RemoteProtocolError):
                run.result.connection_errors += 1
                await asyncio.sleep(0.2)
                continue
            run.result.requests += 1
            run.result.statuses[str(response.status_code)] = run.result.statuses.get(str(response.status_code), 0) + 1
            if response.status_code == 429:  # over a rate limit: wait as a person would, then try again
                await asyncio.sleep(2.0)
                continue
            run.result.page_times_s.append(time.perf_counter() - started)
            return response.status_code, response.text, response.headers.get("location", "")
        return 0, "", ""

    async def think(self) -> None:
        await asyncio.sleep(self.rng.uniform(0.5, 1.5) * self.run.think_s)

    async def post(self, url: str, form: Form, data: dict[str, str]) -> str | None:
        """Post a form (sometimes twice at once, a double click); returns where it redirected."""
        record = expected_record(form.action, data, url)
        if record is not None and self.rng.random() < 0.1:
            self.run.result.double_submissions += 1
            first, second = await asyncio.gather(
                self.request("POST", form.action, data), self.request("POST", form.action, data)
            )
            answers = [first, second]
        else:
            answers = [await self.request("POST", form.action, data)]
        for status, _, _location in answers:
            if status == 303 and record is not None:
                self.run.acknowledge(record)
        status, _, location = answers[0]
        return location if status == 303 else None

    async def participate(self) -> None:
        """Take a personal link (the open link once they are used up) and go through the study."""
        run = self.run
        if run.tokens:
            location = f"/p/{run.tokens.pop()}/"
        else:
            status, html, location = await self.request("GET", run.join_path)
            if status != 200:
                return
            join = page_forms(html, run.join_path)[0]
            location = await self.post(run.join_path, join, fill(join, self.rng)) or ""
            if not location:
                return
        run.result.joined += 1
        url = location
        chats = 0
        while time.monotonic() < run.deadline:
            status, html, location = await self.request("GET", url)
            if status == 303:
                url = location
                continue
            if status != 200:
                return
            forms = page_forms(html, url)
            if "All done" in html and not forms:
                run.result.finished_participants += 1
                return
            await self.think()
            actions = {f.action.rsplit("/", 1)[-1]: f for f in forms}
            if "next" in actions:
                url = await self.post(url, actions["next"], fill(actions["next"], self.rng)) or url
                continue
            if "message" in actions and (chats < self.rng.randint(1, 3) or "end" not in actions):
                chats += 1
                form = actions["message"]
                url = await self.post(url, form, fill(form, self.rng, self.rng.choice(MESSAGES))) or url
                continue
            if "end" in actions and not actions["end"].disabled:
                chats = 0
                url = await self.post(url, actions["end"], fill(actions["end"], self.rng)) or url
                continue
            for kind in ("label", "vote", "annotate", "turing"):
                if kind in actions:
                    form = actions[kind]
                    url = await self.post(url, form, fill(form, self.rng, "fine")) or url
                    break
            else:
                return


class LoadRun:
    """Shared state of the bots: the client, the deadline, what the server acknowledged."""

    def __init__(self, base: str, join_path: str, duration_s: float, think_s: float, result: LoadTestResult) -> None:
        import httpx

        self.base = base
        self.join_path = join_path
        self.deadline = time.monotonic() + duration_s
        self.think_s = think_s
        self.result = result
        self.acknowledged: set[str] = set()
        self.tokens: list[str] = []
        self.killed = False
        self.acknowledged_before_kill: set[str] = set()
        limits = httpx.Limits(max_connections=result.participants * 2, max_keepalive_connections=result.participants)
        self.client = httpx.AsyncClient(timeout=60, limits=limits, follow_redirects=False)

    def acknowledge(self, record_id: str) -> None:
        self.acknowledged.add(record_id)


async def _drive(
    server: ServerProcess,
    tokens: list[str],
    participants: int,
    duration_s: float,
    kill_at_s: float | None,
    think_s: float,
    result: LoadTestResult,
) -> LoadRun:
    open_link = server.urls.get("open link")
    if not open_link:
        raise RuntimeError("the load test joins through the open link: set participants.open_link: true")
    base = server.urls["base"].rstrip("/")
    run = LoadRun(base, open_link[len(base) :], duration_s, think_s, result)
    run.tokens = list(reversed(tokens))
    started = time.monotonic()

    async def slot(number: int) -> None:
        while time.monotonic() < run.deadline:
            await Bot(number, run).participate()
            number += participants

    async def killer() -> None:
        if kill_at_s is None:
            return
        await asyncio.sleep(max(0.0, kill_at_s - (time.monotonic() - started)))
        run.acknowledged_before_kill = set(run.acknowledged)
        server.kill()
        down = time.perf_counter()
        await asyncio.to_thread(server.start)
        result.restart_s = time.perf_counter() - down

    await asyncio.gather(killer(), *(slot(i) for i in range(participants)))
    await run.client.aclose()
    return run


def count_log(folder: Path) -> tuple[Counter[str], int]:
    """Record IDs in the study log with how often each occurs, and the number of complete lines."""
    counts: Counter[str] = Counter()
    lines = 0
    path = folder / LOG
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # a torn tail is not a record
            counts[json.loads(raw)["record_id"]] += 1
            lines += 1
    return counts, lines


def issue_tokens(study_path: str, folder: Path, count: int) -> list[str]:
    """Personal links for the bots, issued before the server starts (as a researcher sends them out):
    every bot comes from 127.0.0.1, so the open link's per-address join limit would throttle them."""
    study = load_study(study_path, output=folder)
    store = StudyStore(folder)
    try:
        keys = study_keys(study, create=True)
        service = StudyService(study, store, keys, Pools(), None)
        issued = service.issue_links(count)
    finally:
        store.close()
    return [keys.participant_token(participant_id) for participant_id in issued]


def run_load_test(
    study_path: str,
    *,
    participants: int = 50,
    duration_s: float = 120.0,
    kill_at_s: float | None = None,
    output: str | None = None,
    think_s: float = 1.0,
) -> LoadTestResult:
    """Run the load test (see the module docstring) and check the log against what was acknowledged."""
    if participants < 1 or duration_s <= 0:
        raise UserError("--participants and --duration must be positive")
    load_study(study_path)  # a bad study stops here with one line, before any process starts
    folder = Path(output) if output else Path(tempfile.mkdtemp(prefix="studio-load-")) / "study"
    result = LoadTestResult(participants=participants, duration_s=duration_s, kill_at_s=kill_at_s, folder=str(folder))
    tokens = issue_tokens(study_path, folder, participants * 10)
    server = ServerProcess(study_path, folder)
    server.start()
    try:
        run = asyncio.run(_drive(server, tokens, participants, duration_s, kill_at_s, think_s, result))
    finally:
        server.stop()
    counts, lines = count_log(folder)
    result.records = lines
    result.acknowledged = len(run.acknowledged)
    missing = sorted(r for r in run.acknowledged if counts[r] == 0)
    result.lost = len(missing)
    result.lost_examples = missing[:5]
    result.duplicated = sum(n - 1 for n in counts.values() if n > 1)
    result.acknowledged_before_kill = len(run.acknowledged_before_kill)
    result.lost_before_kill = sum(1 for r in run.acknowledged_before_kill if counts[r] == 0)
    result.loadavg = Path("/proc/loadavg").read_text().strip() if Path("/proc/loadavg").exists() else "unknown"
    return result


def print_load_test(result: LoadTestResult) -> None:
    p50, p95 = result.percentile(0.5), result.percentile(0.95)
    slowest = max(result.page_times_s) if result.page_times_s else None

    def ms(value: float | None) -> str:
        return "not measured" if value is None else f"{value * 1000:.0f} ms"

    print(
        f"load test: {result.participants} participants at once for {result.duration_s:g} s "
        f"({result.joined} joined, {result.finished_participants} finished every step)"
    )
    print(
        f"requests: {result.requests} ({', '.join(f'{k}: {v}' for k, v in sorted(result.statuses.items()))}); "
        f"connection errors while the server was down: {result.connection_errors}"
    )
    print(f"page time: p50 {ms(p50)}, p95 {ms(p95)}, max {ms(slowest)}")
    print(
        f"records: {result.records} in the log; {result.acknowledged} submissions acknowledged "
        f"({result.double_submissions} sent twice at once): lost {result.lost}, duplicated {result.duplicated}"
    )
    if result.kill_at_s is not None:
        print(
            f"SIGKILL at {result.kill_at_s:g} s, back in {ms(result.restart_s)}: "
            f"{result.acknowledged_before_kill} acknowledged before the kill, {result.lost_before_kill} of them missing"
        )
    if result.lost_examples:
        print(f"lost, e.g.: {', '.join(result.lost_examples)}")
    print(f"load average: {result.loadavg}; study folder: {result.folder}")
