"""Helpers of the studio tests: study files, stored conversations to show, in-process CRSs, a bot.

Stored conversations are written with the converters' writer (the way a converted corpus is), so the
studio reads them through the one run reader like any other source.
"""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path
from typing import Any

import yaml

from data_converters.base import CellRun, ConversionOutput, ConversionReport
from data_converters.writer import write_output
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.studio.app import build_app
from usersimcrs.studio.config import load_study
from usersimcrs.studio.server import open_service, study_keys
from usersimcrs.studio.store import StudyStore

ROOT = Path(__file__).resolve().parents[1]
TINY_MOVIES = ROOT / "configs" / "data" / "tiny_movies.csv"
SCRIPT_REPLY = "<script>document.title='pwned';alert('x')</script> try <b>Heat</b>"

# ------------------------------------------------------------------ in-process CRSs (python connector)


def script_crs(text: str) -> dict[str, Any]:
    """A CRS whose reply and item title hold markup: the page must show them as text."""
    return {"text": SCRIPT_REPLY, "items": [{"id": "x1", "title": "<img src=x onerror=alert(1)>"}]}


def failing_crs(text: str) -> str:
    raise RuntimeError("model server said 500")


async def slow_crs(history: Any, utterance: Any) -> str:
    await asyncio.sleep(30)
    return "too late"


def flaky_crs_factory() -> Any:
    """A CRS that fails on its first call only (per process)."""
    calls = {"n": 0}

    def reply(text: str) -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("cold start")
        return f"Answer {calls['n']} to: {text}"

    return reply


flaky_crs = flaky_crs_factory()


# ------------------------------------------------------------------ stored conversations


def conversation(cid: str, turns: list[tuple[str, str]], items: list[str] | None = None) -> Dialogue:
    dialogue = Dialogue(conversation_id=cid)
    for user, agent in turns:
        dialogue.add(Utterance(participant="USER", text=user))
        dialogue.add(Utterance(participant="AGENT", text=agent, items=[ItemRef(title=t) for t in items or []]))
    return dialogue


def write_corpus(folder: Path, cells: dict[tuple[str, str], list[Dialogue]]) -> Path:
    """A matrix-like folder with one run folder per (simulator, CRS) cell."""
    runs = [
        CellRun(simulator=sim, crs=crs, dataset="test", dialogues=dialogues, manifest={"config": {"seed": 0}})
        for (sim, crs), dialogues in cells.items()
    ]
    report = ConversionReport(dataset="test")
    write_output(ConversionOutput(dialogues=[d for r in runs for d in r.dialogues], cells=runs), report, folder)
    return folder


def simulated_corpus(folder: Path, n: int = 6) -> Path:
    """Simulated-looking conversations (long, regular user turns) over two CRSs."""
    cells = {}
    for crs in ("alpha", "beta"):
        cells[("agenda", crs)] = [
            conversation(
                f"sim-{crs}-{i}",
                [
                    (f"I would like to watch a comedy movie number {i}.", f"How about Movie {i} (1999)?"),
                    ("I have not seen it. Tell me more about it please.", "It is a comedy."),
                    ("Thank you, I will watch it.", "Enjoy!"),
                ],
                items=[f"Movie {i} (1999)"],
            )
            for i in range(n)
        ]
    return write_corpus(folder, cells)


def human_corpus(folder: Path, n: int = 6) -> Path:
    """Human-looking conversations (short, varied user turns)."""
    texts = ["hi", "any thriller?", "hmm no", "ok cool thx", "lol what", "sci fi pls", "nah", "seen it"]
    dialogues = [
        conversation(f"hum-{i}", [(texts[i % 8], "Try Heat (1995)."), (texts[(i + 3) % 8], "Or Seven (1995).")])
        for i in range(n)
    ]
    return write_corpus(folder, {("human", "gamma"): dialogues})


# ------------------------------------------------------------------ study files


def write_study(folder: Path, *, tasks: dict[str, Any], crs: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    """A study YAML in `folder` with the tiny movie sample as items; returns its path."""
    data: dict[str, Any] = {
        "name": "teststudy",
        "seed": 3,
        "output": str(folder / "study"),
        "items": {"path": str(TINY_MOVIES), "delimiters": {"genres": "|", "keywords": "|"}},
        "crs": crs
        if crs is not None
        else [{"name": "pop", "type": "popularity"}, {"name": "bm25", "type": "retrieval"}],
        "tasks": tasks,
        **extra,
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def full_tasks(folder: Path, n_sim: int = 6) -> dict[str, Any]:
    """Chat, battle, annotate (with an inline gold conversation) and turing over test corpora."""
    sim = simulated_corpus(folder / "sim", n_sim)
    hum = human_corpus(folder / "hum")
    return {
        "chat": {"max_turns": 3},
        "battle": {"max_turns": 2},
        "annotate": {
            "source": str(sim),
            "k": 2,
            "batch": 2,
            "gold": [
                {
                    "utterances": [
                        {"participant": "USER", "text": "A comedy please"},
                        {"participant": "AGENT", "text": "I do not understand."},
                    ],
                    "answers": {"task_completion": 0},
                    "tolerance": 0,
                }
            ],
        },
        "turing": {"human": str(hum), "simulated": str(sim), "batch": 4},
    }


# ------------------------------------------------------------------ the app in-process, and a bot over it


class Studio:
    """A study served in-process; `join()` gives a participant."""

    def __init__(self, path: Path) -> None:
        self.study = load_study(path)
        self.store = StudyStore(self.study.folder)
        self.keys = study_keys(self.study, create=True)
        self.service = open_service(self.study, self.store, self.keys)
        sessions = self.service.sessions
        app = build_app(self.service, on_shutdown=sessions.aclose if sessions else None)
        from starlette.testclient import TestClient

        self.client = TestClient(app, follow_redirects=False)
        self.client.__enter__()

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.store.close()

    def join(self, external: str | None = None) -> Participant:
        url = f"/join/{self.keys.open_key}" + (f"?PROLIFIC_PID={external}" if external else "")
        page = self.client.get(url)
        assert page.status_code == 200
        response = self.client.post(f"/join/{self.keys.open_key}", data=hidden_fields(page.text))
        assert response.status_code == 303, response.text
        return Participant(self, response.headers["location"])


class Participant:
    def __init__(self, studio: Studio, home: str) -> None:
        self.studio = studio
        self.client = studio.client
        self.home = home
        self.token = home.split("/")[2]
        self.id = studio.service.participant_for(self.token)
        self.csrf = studio.keys.csrf(self.id)

    def next(self) -> str | None:
        response = self.client.post(self.home + "next", data={"csrf": self.csrf})
        assert response.status_code == 303
        location = response.headers["location"]
        return location if "/a/" in location else None

    def page(self, url: str) -> Any:
        return self.client.get(url)

    def act(self, url: str, action: str, data: dict[str, str]) -> Any:
        page = self.client.get(url)
        return self.client.post(f"{url}/{action}", data={**hidden_fields(page.text), **data})

    def complete(self, rng: random.Random, *, messages: int = 1, score: str | None = None) -> list[str]:
        """Go through every page answering at random; returns the page kinds seen."""
        seen = []
        while (url := self.next()) is not None:
            for _ in range(60):
                response = self.client.get(url)
                if response.status_code == 303:
                    break
                html = response.text
                actions = re.findall(r'action="[^"]+/(message|end|label|vote|annotate|turing)"', html)
                kind = "chat" if "message" in actions else actions[0]
                seen.append(kind)
                if kind == "chat":
                    sent = html.count('class="turn user"')
                    data = {"text": "a funny comedy please"} if sent < messages else {}
                    action = "message" if sent < messages else "end"
                elif kind == "vote":
                    action, data = "vote", {"outcome": rng.choice("ab"), "feedback": "fine"}
                elif kind == "turing":
                    action, data = "turing", {"answer": rng.choice(["human", "simulated"]), "confidence": "2"}
                else:
                    action, data = kind, answer_all(html, rng, score)
                    if kind == "label":
                        data["satisfaction"] = rng.choice(["satisfied", "frustrated"])
                result = self.act(url, action, data)
                assert result.status_code == 303, (kind, result.status_code, result.text[-800:])
        return seen


def hidden_fields(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">', html))


def answer_all(html: str, rng: random.Random, value: str | None = None) -> dict[str, str]:
    """A value for every radio group of the page (the lowest score when `value` is '0')."""
    out: dict[str, str] = {}
    for name in dict.fromkeys(re.findall(r'type="radio" name="([^"]+)"', html)):
        values = re.findall(rf'type="radio" name="{re.escape(name)}" value="([^"]+)"', html)
        out[name] = value if value is not None and value in values else rng.choice(values)
    return out
