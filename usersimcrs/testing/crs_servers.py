"""Real local HTTP servers speaking the wire protocols of CRSs, for tests, demos and `probe-crs`.

Three protocols, as documented for the connectors (docs/plug-in-your-crs.md):

- iEvaLM / CRS Arena (`IEvaLMApp`): one route ``/``; ``GET`` answers "Model is running.";
  ``POST {"context": [...], "message": ...}`` answers ``{"response": ...}``; missing fields give
  400 (text), a non-JSON body 415; conversation state lives in an HMAC-signed ``session`` cookie.
- IAI MovieBot v1.0.1 (`MovieBotApp`): ``GET /`` answers "MovieBot is alive"; ``POST /`` takes the
  Messenger-style ``entry/messaging`` body; ``/start`` opens a session per sender ID and ``/exit``
  closes it with the plain text "Message Processed"; offers read ``Do you like: <Title> <rating>
  <minutes> min`` with a buttons attachment.
- Rasa REST channel (`RasaApp`): ``POST /webhooks/rest/webhook {"sender", "message"}`` answers a
  list of bot messages (``text``, ``buttons``, ``custom`` with the recommended items).

Plus `GenericJSONApp`, a JSON CRS with a bearer token, for the generic `http` connector.

Each "model" is a tiny deterministic recommender over a movie catalog: it asks for a genre, then
recommends unseen movies of the genres the user named. Every reply route can inject faults
(HTTP 500, hang past the client's timeout, non-JSON body, empty text, oversize body, connection
reset) by a scripted sequence or by seeded shares. Each server logs what it received and the
items it sent, so tests can compare parsed lists with what went over the wire.

`LocalCRSServer(..., tls=context)` serves HTTPS (a server-side `ssl.SSLContext`), for tests of the
https route. Run one by hand (it serves until Ctrl-C or SIGTERM; a port in use or a missing catalog is one error line)::

    python -m usersimcrs.testing.crs_servers ievalm --port 5005
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import hmac
import itertools
import json
import random
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import unicodedata
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from usersimcrs.testing.tls import tls_accepted

FAULT_KINDS = ("http_500", "hang", "non_json", "empty_text", "oversize", "reset")


@dataclass(frozen=True)
class Movie:
    """A catalog entry of the test CRSs (MovieLens-style title with year)."""

    id: str
    title: str
    genres: tuple[str, ...]
    rating: float
    minutes: int

    def display(self) -> str:
        """'Usual Suspects, The (1995)' -> 'The Usual Suspects (1995)'."""
        from usersimcrs.core.items import display_title  # lazy: the test server's process starts without pydantic

        return display_title(self.title)

    def bare_title(self) -> str:
        """The display title without its year (how MovieBot prints titles)."""
        from usersimcrs.core.items import split_year  # lazy: the test server's process starts without pydantic

        return split_year(self.display())[0]


DEFAULT_CATALOG: tuple[Movie, ...] = (
    Movie("1", "Toy Story (1995)", ("Adventure", "Animation", "Children", "Comedy", "Fantasy"), 8.3, 81),
    Movie("6", "Heat (1995)", ("Action", "Crime", "Thriller"), 8.3, 170),
    Movie("11", "American President, The (1995)", ("Comedy", "Drama", "Romance"), 6.8, 114),
    Movie("32", "Twelve Monkeys (a.k.a. 12 Monkeys) (1995)", ("Mystery", "Sci-Fi", "Thriller"), 8.0, 129),
    Movie("47", "Seven (a.k.a. Se7en) (1995)", ("Mystery", "Thriller"), 8.6, 127),
    Movie("50", "Usual Suspects, The (1995)", ("Crime", "Mystery", "Thriller"), 8.5, 106),
    Movie("260", "Star Wars: Episode IV - A New Hope (1977)", ("Action", "Adventure", "Sci-Fi"), 8.6, 121),
    Movie("296", "Pulp Fiction (1994)", ("Comedy", "Crime", "Drama", "Thriller"), 8.9, 154),
    Movie("318", "Shawshank Redemption, The (1994)", ("Crime", "Drama"), 9.3, 142),
    Movie("356", "Forrest Gump (1994)", ("Comedy", "Drama", "Romance", "War"), 8.8, 142),
    Movie("480", "Jurassic Park (1993)", ("Action", "Adventure", "Sci-Fi", "Thriller"), 8.2, 127),
    Movie("541", "Blade Runner (1982)", ("Action", "Sci-Fi", "Thriller"), 8.1, 117),
    Movie("589", "Terminator 2: Judgment Day (1991)", ("Action", "Sci-Fi"), 8.6, 137),
    Movie("1097", "E.T. the Extra-Terrestrial (1982)", ("Children", "Drama", "Sci-Fi"), 7.9, 115),
    Movie("1214", "Alien (1979)", ("Horror", "Sci-Fi"), 8.5, 117),
    Movie("1258", "Shining, The (1980)", ("Horror",), 8.4, 146),
    Movie("1270", "Back to the Future (1985)", ("Adventure", "Comedy", "Sci-Fi"), 8.5, 116),
    Movie("1387", "Jaws (1975)", ("Action", "Horror"), 8.1, 124),
    Movie("2571", "Matrix, The (1999)", ("Action", "Sci-Fi", "Thriller"), 8.7, 136),
    Movie("2716", "Ghostbusters (a.k.a. Ghost Busters) (1984)", ("Action", "Comedy", "Sci-Fi"), 7.8, 105),
)


# --------------------------------------------------------------------------- requests and answers


@dataclass
class Request:
    """What a handler gets: method, path, lower-cased headers and the raw body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON (raises ValueError when it is not)."""
        return json.loads(self.body.decode("utf-8"))

    def is_json(self) -> bool:
        return self.headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"

    def cookie(self, name: str) -> str | None:
        for part in self.headers.get("cookie", "").split(";"):
            key, _, value = part.strip().partition("=")
            if key == name:
                return value
        return None


@dataclass
class Answer:
    """A handler's answer."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_json(cls, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
        return cls(status, json.dumps(data).encode("utf-8"), "application/json", dict(headers or {}))

    @classmethod
    def of_text(cls, text: str, status: int = 200, headers: dict[str, str] | None = None) -> Answer:
        return cls(status, text.encode("utf-8"), "text/html; charset=utf-8", dict(headers or {}))


@dataclass
class Exchange:
    """One logged request: who sent what, which fault was injected, which items went out."""

    method: str
    path: str
    body: Any
    fault: str | None = None
    items: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- faults


@dataclass
class FaultPlan:
    """Which requests of the reply route fail, and how.

    `sequence` scripts the first requests (a fault name, or None for a normal answer); after it,
    each request fails with probability `rates[kind]` (drawn from a RNG seeded with `seed`).
    """

    sequence: list[str | None] = field(default_factory=list)
    rates: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    hang_s: float = 3.0
    oversize_bytes: int = 2_000_000

    def __post_init__(self) -> None:
        unknown = [k for k in [*self.rates, *(s for s in self.sequence if s)] if k not in FAULT_KINDS]
        if unknown:
            raise ValueError(f"unknown fault kind(s) {unknown}; known: {', '.join(FAULT_KINDS)}")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError("fault rates add up to more than 1")


class FaultInjector:
    """Draws the fault of each reply request from a FaultPlan; thread-safe and seeded."""

    def __init__(self, plan: FaultPlan | None) -> None:
        self.plan = plan or FaultPlan()
        self._rng = random.Random(self.plan.seed)
        self._count = 0
        self._lock = threading.Lock()

    def draw(self) -> str | None:
        with self._lock:
            index = self._count
            self._count += 1
            if index < len(self.plan.sequence):
                return self.plan.sequence[index]
            roll = self._rng.random()
            for kind in FAULT_KINDS:
                share = self.plan.rates.get(kind, 0.0)
                if roll < share:
                    return kind
                roll -= share
            return None


# --------------------------------------------------------------------------- the tiny recommender


def catalog_genres(catalog: tuple[Movie, ...]) -> list[str]:
    """The catalog's genres, sorted."""
    return sorted({g for m in catalog for g in m.genres})


def genres_named(text: str, genres: list[str]) -> list[str]:
    """Which of `genres` the text names (plural and 'sci-fi'/'science fiction' forms accepted)."""
    lowered = f" {text.lower()} ".replace(",", " ").replace(".", " ").replace("?", " ")
    found = []
    for genre in genres:
        forms = {genre.lower(), genre.lower() + "s", genre.lower().replace("-", " ")}
        if genre == "Sci-Fi":
            forms |= {"science fiction", "scifi"}
        if genre == "Comedy":
            forms.add("comedies")
        if any(f" {form} " in lowered for form in forms):
            found.append(genre)
    return found


def genres_in(text: str, catalog: tuple[Movie, ...]) -> list[str]:
    """Catalog genres named in the text (plural and 'sci-fi'/'science fiction' forms accepted)."""
    return genres_named(text, catalog_genres(catalog))


def pick_movies(catalog: tuple[Movie, ...], genres: list[str], exclude: set[str], k: int) -> list[Movie]:
    """Unseen movies having all named genres (else any), best rated first, ties by catalog order."""
    pool = [m for m in catalog if m.id not in exclude]
    every = [m for m in pool if set(genres) <= set(m.genres)]
    chosen = every or [m for m in pool if set(genres) & set(m.genres)]
    return sorted(chosen, key=lambda m: -m.rating)[:k]


class CatalogIndex:
    """`pick_movies` without a scan of the whole catalog per request, so a 13,816-movie catalog
    costs the server microseconds per reply (its CPU shares the machine with the client under test)."""

    def __init__(self, catalog: tuple[Movie, ...]) -> None:
        self.ranked = sorted(catalog, key=lambda m: -m.rating)  # stable: ties keep catalog order
        self.by_genre: dict[str, list[Movie]] = {}
        for movie in self.ranked:
            for genre in movie.genres:
                self.by_genre.setdefault(genre, []).append(movie)
        self.genres = sorted(self.by_genre)

    def pick(self, genres: list[str], exclude: set[str], k: int, start: float = 0.0) -> list[Movie]:
        """The movies `pick_movies` gives (start=0); `start` in [0, 1) begins that far down the ranking
        and wraps around, so conversations about one genre do not all get its top movies."""
        wanted = set(genres)
        pool = min((self.by_genre.get(g, []) for g in wanted), key=len) if wanted else self.ranked
        every = _first_k(_rotated(pool, start), lambda m: m.id not in exclude and wanted <= set(m.genres), k)
        if every:
            return every
        return _first_k(_rotated(self.ranked, start), lambda m: m.id not in exclude and bool(wanted & set(m.genres)), k)


def _rotated(movies: list[Movie], start: float) -> Iterator[Movie]:
    offset = int(len(movies) * min(max(start, 0.0), 0.999999))
    return itertools.chain(movies[offset:], movies[:offset])


def _first_k(movies: Iterable[Movie], keep: Callable[[Movie], bool], k: int) -> list[Movie]:
    return list(itertools.islice((m for m in movies if keep(m)), k))


def wants_more(text: str) -> bool:
    lowered = text.lower()
    return any(w in lowered for w in ("else", "another", "more", "seen", "no", "different", "other"))


def load_catalog(path: str | Path) -> tuple[Movie, ...]:
    """Movies of a MovieLens-format CSV (`movieId,title,genres`, genres `|`-separated), e.g. the
    13,816-movie sample: the catalog of a test CRS that recommends from a real collection. The file
    has no ratings or running times, so both are drawn from the movie's ID (stable across runs)."""
    movies = []
    with Path(path).open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            genres = tuple(g for g in (row.get("genres") or "").split("|") if g and g != "(no genres listed)")
            draw = int(hashlib.sha256(f"movie:{row['movieId']}".encode()).hexdigest()[:8], 16)
            movies.append(Movie(row["movieId"], row["title"], genres, round(5.0 + (draw % 45) / 10, 1), 80 + draw % 90))
    return tuple(movies)


_AKA = re.compile(r"\s*\(a\.k\.a\. ([^)]*)\)", re.I)
_ALTERNATE = re.compile(r"\s*\([^)]*\)")  # a foreign or alternate title in parentheses before the year
_SEQUEL_MARKS = ("II", "III", "Part 2", "Returns", "Reloaded", "The Next Chapter")


def _unaccented(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def spelling_variants(movie: Movie) -> list[str]:
    """Other ways a CRS writes this movie's title, as real ones do ("Se7en (1995)" for MovieLens's
    "Seven (a.k.a. Se7en) (1995)", "Amelie (2001)" for "Amélie (Fabuleux destin d'Amélie Poulain, Le)
    (2001)"): the a.k.a. name, without the alternate title, without accents, "and" for "&", without
    the year, with two letters swapped."""
    from usersimcrs.core.items import split_year  # lazy: the test server's process starts without pydantic

    name, year = split_year(movie.display())
    dated = (lambda text: f"{text} ({year})") if year else (lambda text: text)
    out: list[str] = []
    aka = _AKA.search(name)
    if aka:
        out.append(dated(aka.group(1).strip()))
    bare = _ALTERNATE.sub("", name).strip()
    if bare and bare != name:
        out.append(dated(_unaccented(bare)))
    if _unaccented(name) != name:
        out.append(dated(_unaccented(name)))
    if "&" in name:
        out.append(dated(name.replace("&", "and")))
    if year:
        out.append(name)
    words = name.split()
    longest = max(range(len(words)), key=lambda i: len(words[i])) if words else -1
    if longest >= 0 and len(words[longest]) >= 6 and words[longest].isalpha():
        word = words[longest]
        words[longest] = word[:2] + word[3] + word[2] + word[4:]
        out.append(dated(" ".join(words)))
    return [v for v in dict.fromkeys(out) if v and v != movie.display()]


@dataclass(frozen=True)
class TitleStyle:
    """How a test CRS writes the titles it recommends. Real CRS servers name a share of their movies
    in spellings the user's collection lacks, and movies it does not hold at all (against CRS Arena's
    iEvaLM server, 46% of the titles recommended were not in the MovieLens collection): a seeded
    `variant_share` of the movies is written in a spelling variant, a `missing_share` as a movie the
    catalog lacks (a sequel of it), the rest as the catalog's display title. Each movie is always
    written the same way."""

    variant_share: float = 0.0
    missing_share: float = 0.0
    seed: int = 0

    def write(self, movie: Movie) -> tuple[str, str]:
        """The title as sent and how it was made: 'catalog', 'variant' or 'missing'."""
        if not self.variant_share and not self.missing_share:
            return movie.display(), "catalog"
        draw = int(hashlib.sha256(f"{self.seed}:{movie.id}".encode()).hexdigest()[:12], 16)
        roll = (draw % 10_000) / 10_000
        if roll < self.missing_share:
            from usersimcrs.core.items import split_year  # lazy: the test server's process starts without pydantic

            name, year = split_year(movie.display())
            mark = _SEQUEL_MARKS[draw % len(_SEQUEL_MARKS)]
            return (f"{name} {mark} ({year + 2 + draw % 7})" if year else f"{name} {mark}"), "missing"
        if roll < self.missing_share + self.variant_share:
            variants = spelling_variants(movie)
            if variants:
                return variants[(draw >> 16) % len(variants)], "variant"
        return movie.display(), "catalog"


def _unit(*parts: object) -> float:
    """A stable draw in [0, 1) from the parts."""
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:12], 16) / 16**12


# --------------------------------------------------------------------------- protocol apps


class ProtocolApp:
    """A CRS protocol: routes requests; `fault` is 'empty_text' when the reply text must be blank
    (the other faults are produced by the server itself)."""

    reply_paths: tuple[str, ...] = ("/",)
    name = "app"

    def __init__(self, catalog: tuple[Movie, ...] = DEFAULT_CATALOG, k: int = 3) -> None:
        self.catalog = catalog
        self.k = k
        self.lock = threading.Lock()
        self.index = CatalogIndex(catalog)
        self.genres = self.index.genres

    def pick(self, genres: list[str], exclude: set[str], start: float = 0.0) -> list[Movie]:
        """Up to k unseen movies of the genres (see `CatalogIndex.pick`)."""
        return self.index.pick(genres, exclude, self.k, start)

    def handle(self, request: Request, fault: str | None, log: Exchange) -> Answer:  # pragma: no cover
        raise NotImplementedError


class IEvaLMApp(ProtocolApp):
    """The iEvaLM model server as CRS Arena runs it: state in a signed session cookie.

    By default it recommends once the user names a genre. `every_turn` makes it recommend on every
    turn after the first, as the iEvaLM models mostly do (a genre the user never named is drawn from
    the message; each conversation starts at its own depth of the genre's ranking); `titles` sets
    how it spells the titles (spelling variants, movies the user's collection lacks).
    """

    name = "ievalm"

    def __init__(
        self,
        catalog: tuple[Movie, ...] = DEFAULT_CATALOG,
        k: int = 3,
        secret: bytes = b"test-secret",
        *,
        every_turn: bool = False,
        titles: TitleStyle | None = None,
    ) -> None:
        super().__init__(catalog, k)
        self.secret = secret
        self.every_turn = every_turn
        self.titles = titles or TitleStyle()

    def sign(self, state: dict[str, Any]) -> str:
        data = base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode().rstrip("=")
        signature = hmac.new(self.secret, data.encode(), hashlib.sha256).hexdigest()[:32]
        return f"{data}.{signature}"

    def unsign(self, cookie: str | None) -> tuple[dict[str, Any], bool]:
        """The session state and whether a (valid) cookie was sent; a bad signature gives a new session."""
        if not cookie or "." not in cookie:
            return {}, False
        data, _, signature = cookie.rpartition(".")
        expected = hmac.new(self.secret, data.encode(), hashlib.sha256).hexdigest()[:32]
        if not hmac.compare_digest(signature, expected):
            return {}, False
        padded = data + "=" * (-len(data) % 4)
        return json.loads(base64.urlsafe_b64decode(padded)), True

    def handle(self, request: Request, fault: str | None, log: Exchange) -> Answer:
        if request.method == "GET":
            return Answer.of_text("Model is running.")
        if request.method != "POST":
            return Answer.of_text("Method Not Allowed", 405)
        if not request.is_json():
            return Answer.of_text("Unsupported Media Type: expected application/json", 415)
        try:
            body = request.json()
        except ValueError:
            return Answer.of_text("Bad Request: body is not valid JSON", 400)
        if not isinstance(body, dict) or "context" not in body or "message" not in body:
            return Answer.of_text("Bad Request: 'context' and 'message' are required", 400)
        state, had_cookie = self.unsign(request.cookie("session"))
        turns = int(state.get("turns", 0))
        shown = list(state.get("shown", []))
        genres = list(state.get("genres", []))
        message = str(body["message"])
        named = genres_named(message, self.genres)
        if named:
            genres = named
        start = float(state.get("start", 0.0))
        if self.every_turn and turns > 0 and not genres and self.genres:
            genres = [self.genres[int(_unit("genre", message, turns) * len(self.genres))]]
            start = _unit("start", message, turns) ** 3  # most conversations near the top, a long tail
        log.info.update(
            session_turns=turns, context_len=len(body["context"]), had_cookie=had_cookie, genres=list(genres)
        )
        if genres and (named or wants_more(message) or self.every_turn):
            movies = self.pick(genres, set(shown), start)
            if not movies and self.every_turn:  # the genre is used up: anything not shown yet
                movies = self.pick([], set(shown), start)
            shown.extend(m.id for m in movies)
            written = [self.titles.write(m) for m in movies]
            lines = "".join(f"{i}: {title}  \n" for i, (title, _) in enumerate(written, start=1))
            text = f"I would recommend the following items:  \n{lines}" if movies else "I have nothing else to suggest."
            log.items = [title for title, _ in written]
            log.info["title_kinds"] = [kind for _, kind in written]
        else:
            text = "Hello! What kind of movies do you like?"
        if fault == "empty_text":
            text = ""
        cookie = self.sign(
            {"turns": turns + 1, "shown": shown, "genres": genres, **({"start": start} if start else {})}
        )
        return Answer.of_json({"response": text}, headers={"Set-Cookie": f"session={cookie}; HttpOnly; Path=/"})


class MovieBotApp(ProtocolApp):
    """IAI MovieBot v1.0.1's Flask server: a session per sender ID, /start and /exit commands."""

    name = "moviebot"
    WELCOME = "Hi there. I am a movie recommender. I will ask you a few questions and find a movie for you."

    def __init__(self, catalog: tuple[Movie, ...] = DEFAULT_CATALOG, k: int = 1) -> None:
        super().__init__(catalog, k)
        self.sessions: dict[str, dict[str, Any]] = {}

    def handle(self, request: Request, fault: str | None, log: Exchange) -> Answer:
        if request.method == "GET":
            return Answer.of_text("MovieBot is alive")
        try:
            body = request.json()
            event = body["entry"][0]["messaging"][0]
            sender = str(event["sender"]["id"])
            text = str(event["message"]["text"])
        except (ValueError, KeyError, IndexError, TypeError):
            return Answer.of_text("Bad Request: expected entry[0].messaging[0] with sender.id and message.text", 400)
        log.info.update(sender=sender, text=text)
        with self.lock:
            if text.lower() == "/exit":
                self.sessions.pop(sender, None)
                return Answer.of_text("Message Processed")
            if text.lower() == "/start" or sender not in self.sessions:
                self.sessions[sender] = {"shown": [], "genres": [], "turns": 0}
            session = self.sessions[sender]
            session["turns"] += 1
            log.info["session_turns"] = session["turns"]
            log.info["open_sessions"] = len(self.sessions)
            message: dict[str, Any]
            if text.lower() == "/start":
                message = {"intent": "WELCOME", "text": self.WELCOME}
            else:
                named = genres_named(text, self.genres)
                if named:
                    session["genres"] = named
                if session["genres"] and (named or wants_more(text)):
                    movies = self.pick(session["genres"], set(session["shown"]))
                    session["shown"].extend(m.id for m in movies)
                    log.items = [m.bare_title() for m in movies]
                    if movies:
                        offers = " ".join(f"Do you like: {m.bare_title()} {m.rating} {m.minutes} min" for m in movies)
                        message = {
                            "intent": "REVEAL.RECOMMEND",
                            "text": offers,
                            "attachment": self.buttons(),
                        }
                    else:
                        message = {"intent": "REVEAL.NONE", "text": "Sorry, I have no more movies like that."}
                else:
                    message = {"intent": "INQUIRE.ELICIT", "text": "Which genres do you prefer?"}
        if fault == "empty_text":
            message["text"] = ""
        return Answer.of_json({"message": message, "recipient": {"id": sender}})

    @staticmethod
    def buttons() -> dict[str, Any]:
        options = [
            ("I like this", "I like this recommendation."),
            ("Seen it", "I have already watched it."),
            ("Something else", "Recommend me something else please."),
        ]
        return {
            "type": "buttons",
            "payload": {"buttons": [{"title": t, "payload": p, "button_type": "postback"} for t, p in options]},
        }


class RasaApp(ProtocolApp):
    """A Rasa bot behind the REST channel; items travel in a `custom` payload (or in the text)."""

    name = "rasa"
    reply_paths = ("/webhooks/rest/webhook",)

    def __init__(self, catalog: tuple[Movie, ...] = DEFAULT_CATALOG, k: int = 3, custom_items: bool = True) -> None:
        super().__init__(catalog, k)
        self.custom_items = custom_items
        self.trackers: dict[str, dict[str, Any]] = {}

    def handle(self, request: Request, fault: str | None, log: Exchange) -> Answer:
        if request.method == "GET" and request.path == "/":
            return Answer.of_text("Hello from Rasa: 3.6.20")
        if request.path != "/webhooks/rest/webhook" or request.method != "POST":
            return Answer.of_text("Not Found", 404)
        try:
            body = request.json()
        except ValueError:
            return Answer.of_json({"error": "Failed when parsing body as json"}, 400)
        if not isinstance(body, dict) or "sender" not in body or "message" not in body:
            return Answer.of_json({"error": "'sender' and 'message' are required"}, 400)
        sender, text = str(body["sender"]), str(body["message"])
        with self.lock:
            tracker = self.trackers.setdefault(sender, {"shown": [], "genres": [], "turns": 0})
            tracker["turns"] += 1
            log.info.update(sender=sender, session_turns=tracker["turns"])
            named = genres_named(text, self.genres)
            if named:
                tracker["genres"] = named
            messages: list[dict[str, Any]]
            if tracker["genres"] and (named or wants_more(text)):
                movies = self.pick(tracker["genres"], set(tracker["shown"]))
                tracker["shown"].extend(m.id for m in movies)
                log.items = [m.id for m in movies] if self.custom_items else [m.display() for m in movies]
                if self.custom_items:
                    messages = [
                        {"recipient_id": sender, "text": "Here are some movies you might enjoy."},
                        {
                            "recipient_id": sender,
                            "custom": {"items": [{"id": m.id, "title": m.display()} for m in movies]},
                        },
                    ]
                else:
                    listing = "\n".join(f"{i}. {m.display()}" for i, m in enumerate(movies, start=1))
                    messages = [{"recipient_id": sender, "text": f"I would recommend the following items:\n{listing}"}]
                messages.append(
                    {
                        "recipient_id": sender,
                        "text": "Would you like more suggestions?",
                        "buttons": [{"title": "More", "payload": "/more"}, {"title": "No thanks", "payload": "/deny"}],
                    }
                )
            else:
                messages = [{"recipient_id": sender, "text": "What genre of movie would you like?"}]
        if fault == "empty_text":
            messages = []
        return Answer.of_json(messages)


class GenericJSONApp(ProtocolApp):
    """A JSON CRS with its own shapes and a bearer token, for the configurable `http` connector."""

    name = "generic"
    reply_paths = ("/api/chat",)

    def __init__(self, catalog: tuple[Movie, ...] = DEFAULT_CATALOG, k: int = 3, token: str | None = None) -> None:
        super().__init__(catalog, k)
        self.token = token
        self.sessions: dict[str, list[str]] = {}

    def handle(self, request: Request, fault: str | None, log: Exchange) -> Answer:
        if request.method == "GET" and request.path == "/health":
            return Answer.of_json({"status": "ok"})
        if request.path != "/api/chat":
            return Answer.of_text("Not Found", 404)
        if self.token is not None and request.headers.get("authorization") != f"Bearer {self.token}":
            return Answer.of_json({"error": "unauthorized"}, 401)
        try:
            body = request.json()
            session, text, history = str(body["session"]), str(body["text"]), list(body.get("history", []))
        except (ValueError, KeyError, TypeError):
            return Answer.of_json({"error": "expected session, text, history"}, 400)
        log.info.update(session=session, history_len=len(history))
        with self.lock:
            shown = self.sessions.setdefault(session, [])
            said = " ".join(
                [str(h.get("text", "")) for h in history if isinstance(h, dict) and h.get("role") == "user"] + [text]
            )
            genres = genres_named(said, self.genres)
            movies = self.pick(genres, set(shown)) if genres else []
            shown.extend(m.id for m in movies)
        log.items = [m.id for m in movies]
        reply_text = f"You might like {movies[0].display()}." if movies else "Tell me a genre you like."
        if fault == "empty_text":
            reply_text = ""
        recs = [{"movie_id": m.id, "name": m.display()} for m in movies]
        return Answer.of_json({"reply": {"text": reply_text, "recommendations": recs}})


APPS: dict[str, Callable[..., ProtocolApp]] = {
    "ievalm": IEvaLMApp,
    "moviebot": MovieBotApp,
    "rasa": RasaApp,
    "generic": GenericJSONApp,
}


# --------------------------------------------------------------------------- the server


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    # keep-alive like the real servers (Flask's threaded dev server, which iEvaLM runs, speaks HTTP/1.1);
    # every answer carries a Content-Length, and the oversize and reset faults close the connection
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence access logs
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.server.owner.dispatch(self, "GET")

    def do_POST(self) -> None:  # noqa: N802
        self.server.owner.dispatch(self, "POST")

    def do_PUT(self) -> None:  # noqa: N802
        self.server.owner.dispatch(self, "PUT")

    def finish(self) -> None:
        try:
            super().finish()
        except (OSError, ValueError):
            pass


class _ClosingHandler(_Handler):
    """HTTP/1.0: the connection is closed after every reply, as Werkzeug's development server does
    unless told otherwise (the iEvaLM server of CRS Arena answered `HTTP/1.0`, a new connection per turn)."""

    protocol_version = "HTTP/1.0"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # socketserver's default listen backlog is 5: at C >= 32 connects overflow it and wait out 1 s
    # SYN retries, so a concurrency test would measure the listen queue (the LLM test server uses 512 too)
    request_queue_size = 512
    owner: LocalCRSServer
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        """The accepted connection, in TLS when serving HTTPS."""
        return tls_accepted(super().get_request(), self.tls)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # faults (reset, client gone) are expected here


class LocalCRSServer:
    """A protocol app served on 127.0.0.1 (ephemeral port by default), in a background thread."""

    def __init__(
        self,
        app: ProtocolApp,
        faults: FaultPlan | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        close_after_reply: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.app = app
        self.tls = tls
        self.faults = FaultInjector(faults)
        self.log: list[Exchange] = []
        self._log_lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd = _HTTPServer((host, port), _ClosingHandler if close_after_reply else _Handler)
        self._httpd.owner = self
        self._httpd.tls = tls
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL with a trailing slash, e.g. ``http://127.0.0.1:54321/`` (``https://`` with `tls`)."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/"

    def start(self) -> LocalCRSServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"crs-{self.app.name}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LocalCRSServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def exchanges(self, path: str | None = None) -> list[Exchange]:
        """Logged requests (optionally of one path), oldest first."""
        with self._log_lock:
            return [e for e in self.log if path is None or e.path == path]

    def wait_for_requests(self, count: int, path: str | None = None, timeout_s: float = 5.0) -> list[Exchange]:
        """The logged requests once `count` have arrived (or the timeout passed): the client may
        give up on a request before this server's thread has logged it."""
        deadline = time.monotonic() + timeout_s
        while True:
            logged = self.exchanges(path)
            if len(logged) >= count or time.monotonic() >= deadline:
                return logged
            time.sleep(0.01)

    def dispatch(self, handler: _Handler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        path = handler.path.split("?", 1)[0]
        request = Request(method, path, {k.lower(): v for k, v in handler.headers.items()}, body)
        fault = self.faults.draw() if method != "GET" and path in self.app.reply_paths else None
        try:
            logged_body: Any = request.json()
        except ValueError:
            logged_body = body.decode("utf-8", errors="replace")
        exchange = Exchange(method, path, logged_body, fault=fault, headers=request.headers)
        with self._log_lock:
            self.log.append(exchange)
        if fault == "reset":
            self._reset(handler)
            return
        if fault == "http_500":
            self._send(handler, Answer.of_text("Internal Server Error", 500))
            return
        if fault == "non_json":
            self._send(handler, Answer(200, b"<html><body>Gateway error</body></html>", "text/html"))
            return
        if fault == "hang":
            self._stop.wait(self.faults.plan.hang_s)
        answer = self.app.handle(request, fault, exchange)
        if fault == "oversize":
            self._send_oversize(handler, answer)
            return
        self._send(handler, answer)

    @staticmethod
    def _send(handler: _Handler, answer: Answer) -> None:
        try:
            handler.send_response(answer.status)
            handler.send_header("Content-Type", answer.content_type)
            handler.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(answer.body)
        except OSError:
            pass

    def _send_oversize(self, handler: _Handler, answer: Answer) -> None:
        """A valid-looking JSON body far over any sane limit, streamed without a Content-Length."""
        try:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"padding": "')
            chunk = b"x" * 65536
            sent = 0
            while sent < self.faults.plan.oversize_bytes and not self._stop.is_set():
                handler.wfile.write(chunk)
                sent += len(chunk)
            handler.wfile.write(b'"}')
        except OSError:
            pass
        handler.close_connection = True

    @staticmethod
    def _reset(handler: _Handler) -> None:
        """Close the socket with SO_LINGER 0, so the client sees a connection reset."""
        try:
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.connection.close()
        except OSError:
            pass
        handler.close_connection = True


def serve(
    protocol: str, *, faults: FaultPlan | None = None, port: int = 0, close_after_reply: bool = False, **options: Any
) -> LocalCRSServer:
    """Start a server for `protocol` (ievalm, moviebot, rasa, generic); stop it with `.stop()`.

    `close_after_reply`: speak HTTP/1.0 and close each connection after its reply (no keep-alive).
    """
    return LocalCRSServer(APPS[protocol](**options), faults, port=port, close_after_reply=close_after_reply).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a test CRS protocol on 127.0.0.1.")
    parser.add_argument("protocol", choices=sorted(APPS))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--fault", action="append", default=[], metavar="KIND=SHARE", help=f"kinds: {', '.join(FAULT_KINDS)}"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--catalog", help="MovieLens-format CSV (movieId,title,genres) to recommend from")
    parser.add_argument("--http10", action="store_true", help="HTTP/1.0: close the connection after each reply")
    parser.add_argument("--every-turn", action="store_true", help="ievalm: recommend on every turn after the first")
    parser.add_argument("--variant-share", type=float, default=0.0, help="ievalm: share of titles spelled otherwise")
    parser.add_argument("--missing-share", type=float, default=0.0, help="ievalm: share of titles not in the catalog")
    args = parser.parse_args(argv)
    rates = {kind: float(share) for kind, _, share in (f.partition("=") for f in args.fault)}
    try:
        options: dict[str, Any] = {"catalog": load_catalog(args.catalog)} if args.catalog else {}
    except OSError as exc:
        print(f"error: --catalog {args.catalog}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    if args.protocol == "ievalm":
        titles = TitleStyle(variant_share=args.variant_share, missing_share=args.missing_share, seed=args.seed)
        options.update(every_turn=args.every_turn, titles=titles)
    try:
        server = serve(
            args.protocol,
            faults=FaultPlan(rates=rates, seed=args.seed),
            port=args.port,
            close_after_reply=args.http10,
            **options,
        )
    except OSError as exc:
        print(f"error: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"{args.protocol} CRS listening on {server.url}", flush=True)
    stop = threading.Event()
    # Ctrl-C or SIGTERM stops it cleanly, also when a shell started it in the background (SIGINT ignored there)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
