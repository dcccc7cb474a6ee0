"""The test servers' real-workload modes (issue #22): HTTP/1.0, recommendations from a catalogue file on
every turn, titles written as real CRSs write them, and the LLM server's counters over HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import random
from pathlib import Path

from crs_connectors.transport import CRSPool, HTTPOptions, HTTPTransport
from usersimcrs.core.items import ItemCollection, normalize_title
from usersimcrs.testing.crs_servers import (
    DEFAULT_CATALOG,
    CatalogIndex,
    Movie,
    TitleStyle,
    catalog_genres,
    load_catalog,
    pick_movies,
    serve,
    spelling_variants,
)
from usersimcrs.testing.llm_server import COUNTERS_PATH, RESET_PATH, LLMServer

TINY = Path(__file__).resolve().parents[1] / "configs" / "data" / "tiny_movies.csv"


def test_the_catalog_index_picks_what_the_scan_picks():
    index = CatalogIndex(DEFAULT_CATALOG)
    rng = random.Random(3)
    genres = catalog_genres(DEFAULT_CATALOG) + ["Western"]  # one genre no movie has
    ids = [m.id for m in DEFAULT_CATALOG]
    for _ in range(500):
        wanted = rng.sample(genres, rng.randint(0, 2))
        exclude = set(rng.sample(ids, rng.randint(0, 12)))
        assert index.pick(wanted, exclude, 3) == pick_movies(DEFAULT_CATALOG, wanted, exclude, 3)
    deeper = index.pick(["Sci-Fi"], set(), 3, start=0.5)
    assert deeper and deeper != index.pick(["Sci-Fi"], set(), 3) and all("Sci-Fi" in m.genres for m in deeper)


def test_titles_are_written_as_real_crss_write_them():
    seven = Movie("47", "Seven (a.k.a. Se7en) (1995)", ("Thriller",), 8.6, 127)
    amelie = Movie("4973", "Amélie (Fabuleux destin d'Amélie Poulain, Le) (2001)", ("Comedy",), 8.3, 122)
    assert "Se7en (1995)" in spelling_variants(seven) and "Amelie (2001)" in spelling_variants(amelie)
    catalog = load_catalog(TINY)
    items = ItemCollection.from_csv(TINY)
    style = TitleStyle(variant_share=0.3, missing_share=0.4, seed=1)
    written = [style.write(m) for m in catalog]
    assert written == [style.write(m) for m in catalog]  # each movie always written the same way
    kinds = [kind for _, kind in written]
    assert {"catalog", "variant", "missing"} <= set(kinds)
    for (title, kind), movie in zip(written, catalog):
        if kind == "catalog":
            assert items.find_by_title(title, fuzzy=False).id == movie.id
        elif kind == "missing":  # a movie the collection lacks: no exact or normalised hit
            assert items.match_title(title, fuzzy=False).resolution in ("unresolved", "ambiguous")
        else:
            assert normalize_title(title) != normalize_title(movie.title) or title != movie.display()
    assert TitleStyle().write(catalog[0]) == (catalog[0].display(), "catalog")  # the default changes nothing


def _post(port: int, body: dict, cookie: str | None = None) -> tuple[http.client.HTTPResponse, dict, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Content-Type": "application/json", **({"Cookie": cookie} if cookie else {})}
    connection.request("POST", "/", json.dumps(body), headers)
    response = connection.getresponse()
    data = response.read()
    return response, json.loads(data), data


def test_http10_server_closes_each_connection_and_recommends_every_turn_from_a_catalogue_file():
    server = serve("ievalm", close_after_reply=True, every_turn=True, catalog=load_catalog(TINY))
    try:
        first, payload, _ = _post(server.port, {"context": [], "message": "hello"})
        assert first.version == 10 and first.getheader("Connection", "close").lower() == "close"
        assert "recommend" not in payload["response"]  # the first turn greets
        cookie = first.getheader("Set-Cookie").split(";")[0]
        second, payload, _ = _post(server.port, {"context": ["hello", "hi"], "message": "text 7"}, cookie)
        assert second.version == 10 and "I would recommend the following items" in payload["response"]
        logged = server.exchanges("/")[-1]
        assert logged.info["session_turns"] == 1 and 1 <= len(logged.items) <= 3
        assert all(item in {m.display() for m in load_catalog(TINY)} for item in logged.items)
    finally:
        server.stop()


def test_the_crs_transport_keeps_a_conversation_across_new_connections():
    server = serve("ievalm", close_after_reply=True, every_turn=True)

    async def talk() -> list[str]:
        pool = CRSPool()

        class Context:
            cache = {"crs_connectors.transport:CRSPool": pool}
            run_seed = 0

        transport = HTTPTransport(HTTPOptions(type="crs_arena", url=server.url), Context(), keep_cookies=True)
        texts = []
        for turn in range(4):
            body = {"context": [], "message": f"turn {turn}"}
            texts.append(await transport.call("POST", server.url, lambda a: a.json()["response"], json_body=body))
        await pool.aclose()
        return texts

    try:
        texts = asyncio.run(talk())
        assert [e.info["session_turns"] for e in server.exchanges("/")] == [0, 1, 2, 3]  # the cookie carried state
        assert all("recommend" in text for text in texts[1:]), texts
    finally:
        server.stop()


def test_the_llm_server_reports_its_first_chat_over_http():
    with LLMServer(latency_ms=0) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("GET", COUNTERS_PATH)
        assert json.loads(connection.getresponse().read())["first_chat_unix"] is None
        body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}
        connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        connection.getresponse().read()
        connection.request("GET", COUNTERS_PATH)
        counters = json.loads(connection.getresponse().read())
        assert counters["chat"] == 1 and counters["first_chat_unix"] > 0
        connection.request("POST", RESET_PATH, "{}", {"Content-Type": "application/json"})
        connection.getresponse().read()
        connection.request("GET", COUNTERS_PATH)
        assert json.loads(connection.getresponse().read())["first_chat_unix"] is None


def test_the_server_command_says_in_one_line_what_stops_it(tmp_path, capsys):
    from usersimcrs.testing.crs_servers import main

    busy = serve("generic")  # the recipe's server line on a port that is taken
    try:
        assert main(["generic", "--port", str(busy.port)]) == 2
    finally:
        busy.stop()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: cannot listen on 127.0.0.1:{busy.port}" in err
    assert main(["generic", "--catalog", str(tmp_path / "none.csv")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "none.csv" in err
