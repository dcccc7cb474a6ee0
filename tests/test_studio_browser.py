"""A participant completes every task of a study in a real headless browser (Debian's chromium driven by
Playwright), against a built-in CRS, an in-process one and a real local CRS server (the iEvaLM protocol
over HTTP), then the researcher exports from the admin page. A CRS reply holding `<script>` shows as
text and runs nothing.

Set STUDIO_SCREENSHOTS=docs/images to refresh the screenshots of docs/studio.md.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the 'studio' extra is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the 'dev' extra)")

from tests.studio_support import ROOT, full_tasks, write_study  # noqa: E402
from usersimcrs.studio.loadtest import ServerProcess  # noqa: E402
from usersimcrs.studio.store import read_state  # noqa: E402

CHROMIUM = Path(os.environ.get("STUDIO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = os.environ.get("STUDIO_SCREENSHOTS")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no chromium at {CHROMIUM} (apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def crs_server():
    """The iEvaLM-protocol test CRS as a real HTTP server in its own process."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "usersimcrs.testing.crs_servers", "ievalm", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None and f":{port}/" in proc.stdout.readline()
    yield f"http://127.0.0.1:{port}/"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def studio(tmp_path, crs_server):
    tasks = full_tasks(tmp_path, n_sim=2)
    tasks["chat"] = {"crs": ["arena"], "max_turns": 3}
    tasks["battle"] = {"crs": ["pop", "evil"], "max_turns": 2}
    tasks["turing"]["batch"] = 2
    crs = [
        {"name": "arena", "type": "crs_arena", "url": crs_server, "timeout_s": 10},
        {"name": "pop", "type": "popularity"},
        {"name": "evil", "type": "python", "target": "tests.studio_support:script_crs"},
    ]
    path = write_study(
        tmp_path,
        tasks=tasks,
        crs=crs,
        title="Finding a film with a recommender",
        instructions="Talk to movie recommenders and rate conversations. Your answers are saved as you go.",
        completion={"code": "USC-1234", "url": "https://example.org/done"},
    )
    server = ServerProcess(str(path), tmp_path / "study")
    urls = server.start()
    yield server, urls
    server.stop()


def _shot(page, name: str) -> None:
    """A screenshot for docs/studio.md: the top of the page (at most 1,300 px), in 64 colours to stay small."""
    if not SHOTS:
        return
    from PIL import Image

    path = Path(SHOTS) / f"studio-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    height = min(1300, page.evaluate("document.documentElement.scrollHeight"))
    page.screenshot(path=str(path), clip={"x": 0, "y": 0, "width": 980, "height": height}, full_page=True)
    image = Image.open(path).convert("RGB").quantize(colors=64)
    image.save(path, optimize=True)


def _answer_radios(page, value: str = "0") -> None:
    """Choose `value` in every radio group of the page (the first choice where `value` is not offered)."""
    names = page.eval_on_selector_all("input[type=radio]", "els => [...new Set(els.map(e => e.name))]")
    for name in names:
        choice = page.locator(f'input[name="{name}"][value="{value}"]')
        (choice if choice.count() else page.locator(f'input[name="{name}"]').first).check()


def _chat(page, messages: list[str], shot: str | None = None) -> None:
    for text in messages:
        page.fill("textarea[name=text]", text)
        page.click("button:has-text('Send')")
        page.wait_for_load_state()
    if shot:
        _shot(page, shot)
    page.click("button:has-text('End the conversation')")
    page.wait_for_load_state()


def _label(page, shot: str | None = None) -> None:
    assert page.locator("h1").inner_text().startswith("How did it go")
    page.check('input[name="satisfaction"][value="satisfied"]')
    _answer_radios(page, "1")
    if shot:
        _shot(page, shot)
    page.click("button:has-text('Save')")
    page.wait_for_load_state()


def test_a_participant_completes_chat_battle_annotate_and_turing_in_a_browser(browser, studio):
    server, urls = studio
    context = browser.new_context(viewport={"width": 980, "height": 760})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    started = time.perf_counter()

    page.goto(urls["open link"])
    _shot(page, "join")
    page.click("button:has-text('Start the study')")
    page.wait_for_load_state()
    assert "/p/" in page.url
    home = page.url
    _shot(page, "home")
    page.click("button:has-text('Start')")

    # 1. chat with the real local CRS server: its numbered list shows as the turn's items
    page.wait_for_load_state()
    _chat(page, ["Hi, I would like a thriller please", "Something else, a comedy maybe"], shot="chat")
    _label(page, shot="label")

    # 2. battle: two anonymous systems, one of which replies with markup
    page.click("button:has-text('Continue')")
    page.wait_for_load_state()
    for side in "AB":
        assert page.locator("h1").inner_text() == f"Conversation with System {side}"
        _chat(page, ["A comedy, please"])
        _label(page)
    assert page.locator("h1").inner_text() == "Which system was better?"
    assert "<script>document.title" in page.locator(".pair").inner_text()  # shown as text
    _shot(page, "vote")
    page.check('input[name="outcome"][value="tie"]')
    page.fill("textarea[name=feedback]", "Both were <i>fine</i>")
    page.click("button:has-text('Vote')")
    page.wait_for_load_state()

    # 3. annotate: 2 conversations and a hidden gold one, turn and dialogue aspects
    page.click("button:has-text('Continue')")
    page.wait_for_load_state()
    for number in range(3):
        assert page.locator("h1").inner_text().startswith("Rate this conversation")
        _answer_radios(page, "0")
        if number == 0:
            _shot(page, "annotate")
        page.click("button:has-text('Save and continue')")
        page.wait_for_load_state()

    # 4. turing: person or program?
    page.click("button:has-text('Continue')")
    page.wait_for_load_state()
    for number in range(2):
        assert page.locator("h1").inner_text().startswith("Person or program?")
        if number == 0:
            _shot(page, "turing")
        page.check('input[name="answer"][value="human"]')
        page.select_option("select[name=confidence]", "2")
        page.click("button:has-text('Save and continue')")
        page.wait_for_load_state()

    assert page.locator("h1").inner_text() == "All done"
    assert page.locator(".completion-code").inner_text() == "USC-1234"
    _shot(page, "done")
    assert dialogs == [] and page.title() == "Finding a film with a recommender"  # no script ran

    # the researcher's side: the admin page and its export button
    page.goto(urls["admin"])
    page.click("button:has-text('Export now')")
    page.wait_for_load_state()
    assert "Exported" in page.locator("section.exported").inner_text()
    _shot(page, "admin")
    elapsed = time.perf_counter() - started
    context.close()

    state = read_state(server.folder)
    (participant,) = state.participants
    assert participant in state.completions
    chat = next(c for c in state.conversations.values() if c.crs == "arena")
    assert chat.user_turns == 2 and all(e.items for e in chat.exchanges[1:])  # recommendations parsed from text
    assert len(state.votes) == 1 and next(iter(state.votes.values())).feedback == "Both were <i>fine</i>"
    assert len(state.annotations) == 3 and len(state.turing) == 2
    assert (server.folder / "export" / "votes.jsonl").exists()
    assert page.url.startswith(home.split("/p/")[0])
    assert elapsed < 60, f"the browser walk took {elapsed:.1f} s"
