"""Which HTTP client speaks to a URL (`core/http_route.py`, issue #35): the lean client for plain HTTP to a
local address, the official clients (LLMs) and httpx (CRSs) for https and proxied URLs.

End to end against the repository's local servers: the LLM test server and the iEvaLM test CRS, served
over TLS with a throwaway self-signed certificate (trusted through SSL_CERT_FILE, as a user points httpx
at a private CA), and a proxy setting that points at a port nobody listens on.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from crs_connectors.base import build_connector
from crs_connectors.transport import POOL_KEY, CRSPool
from tests.connectors_support import catalog_items, scripted_conversation
from tests.test_llm_preflight import run_config
from tests.tls_support import TLSFiles, self_signed
from usersimcrs.cli import main
from usersimcrs.core.http_route import auto_route, choose_route, local_host
from usersimcrs.errors import ConfigError, ConnectorError, LLMError, UserError
from usersimcrs.llm import LLMProvider, Message
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.preflight import check_llms
from usersimcrs.runtime.context import RunContext
from usersimcrs.testing import LLMServer
from usersimcrs.testing.crs_servers import IEvaLMApp, LocalCRSServer

BACKENDS = ["openai", "ollama"]
HELLO = [Message(role="user", content="Suggest a comedy")]
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch):
    """Each test starts without proxy variables; the proxy tests set their own."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def tls_files(tmp_path_factory, monkeypatch) -> TLSFiles:
    """A fresh certificate that httpx (and so the official clients) trusts through SSL_CERT_FILE."""
    files = self_signed(tmp_path_factory.mktemp("tls"))
    monkeypatch.setenv("SSL_CERT_FILE", str(files.cert))
    return files


def dead_port() -> int:
    """A port nobody listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def user_agent(headers: dict[str, str]) -> str:
    return {k.lower(): v for k, v in headers.items()}.get("user-agent", "")


async def complete_once(config):
    provider = LLMProvider(config)
    try:
        llm = provider.get("simulator")
        return await llm.complete(HELLO), llm.slot.backend.route
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("url", "client"),
    [
        ("http://127.0.0.1:8000/v1", "lean"),
        ("http://127.9.9.9/", "lean"),
        ("http://localhost:11434", "lean"),
        ("http://[::1]:8000/", "lean"),
        ("http://[::ffff:127.0.0.1]:8000/", "lean"),
        ("http://10.1.2.3:8000/", "lean"),
        ("http://172.16.0.5/", "lean"),
        ("http://172.31.255.255/", "lean"),
        ("http://192.168.1.20:5005/", "lean"),
        ("http://169.254.1.1/", "lean"),
        ("http://[fd12::1]/", "lean"),
        ("http://[fe80::1]/", "lean"),
        ("http://0.0.0.0:8000/", "lean"),
        ("http://172.32.0.1/", "official"),  # just outside 172.16/12
        ("http://8.8.8.8/", "official"),
        ("http://gpu-box.lan:8000/v1", "official"),  # a name: what it resolves to is not known without a lookup
        ("http://host.docker.internal:11434", "official"),
        ("https://127.0.0.1:8000/v1", "official"),  # https always goes to the library
        ("https://api.openai.com/v1", "official"),
    ],
)
def test_the_auto_rule_reads_the_url_alone(url, client):
    assert auto_route(url).client == client


def test_local_hosts_are_localhost_and_local_ip_literals_only():
    assert local_host("LOCALHOST") and local_host("localhost.") and local_host("fe80::1%eth0")
    assert not local_host("localhost.example.org") and not local_host("127.0.0.1.nip.io")


def test_a_proxy_setting_sends_local_urls_to_the_library_unless_no_proxy_names_them(monkeypatch):
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert auto_route("http://127.0.0.1:8000/").client == "lean"  # a proxy for https only
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@127.0.0.1:3128")
    route = auto_route("http://127.0.0.1:8000/")
    assert route.client == "official" and "proxy" in route.why and "pw" not in route.why
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert auto_route("http://127.0.0.1:8000/").client == "lean"
    assert auto_route("http://localhost:8000/").client == "lean"
    assert auto_route("http://10.0.0.1:8000/").client == "official"
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    assert auto_route("http://10.0.0.1:8000/").client == "official"


def test_an_explicit_client_wins_but_lean_cannot_speak_https():
    assert choose_route("http://127.0.0.1/", "official", key="llm.client").client == "official"
    assert choose_route("http://gpu-box:8000/", "lean", key="llm.client").client == "lean"
    with pytest.raises(ValueError, match=r"^llm.client: lean speaks plain HTTP only; https://h/v1 needs"):
        choose_route("https://user:secret@h/v1?key=secret", "lean", key="llm.client")


# ------------------------------------------------------------------------------------------------- LLMs


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_https_llm_url_goes_through_the_official_client(backend, tls_files: TLSFiles):
    with LLMServer(replies=["over TLS"], tls=tls_files.server_context()) as server:
        assert server.url.startswith("https://127.0.0.1:")
        result, route = asyncio.run(complete_once(server.config(backend, cache=False)))
        (request,) = server.chat_requests
    assert result.text == "over TLS"
    assert route is not None and route.client == "official" and route.why.startswith("https")
    assert not user_agent(request.headers).startswith("usersimcrs")  # the SDK's own User-Agent, not the lean one


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loopback_http_llm_url_goes_through_the_lean_client(backend):
    with LLMServer(replies=["plain"]) as server:
        result, route = asyncio.run(complete_once(server.config(backend, cache=False)))
        (request,) = server.chat_requests
    assert result.text == "plain" and route is not None and route.client == "lean"
    assert user_agent(request.headers) == "usersimcrs"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_proxied_llm_url_goes_through_the_official_client_and_its_proxy(backend, monkeypatch):
    """With HTTP_PROXY at a dead port the call fails although the server is up: it went to the proxy."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead_port()}")
    with LLMServer(replies=["never"]) as server:
        config = server.config(backend, cache=False, retries=0)
        with pytest.raises(LLMError, match="connection failed"):
            asyncio.run(complete_once(config))
        assert server.requests == []
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        result, route = asyncio.run(complete_once(config))
    assert result.text == "never" and route is not None and route.client == "lean"


class Redirector(BaseHTTPRequestHandler):
    """Answers every request with a 307 to the same path on another server (`server.target`)."""

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(307)
        self.send_header("Location", f"{self.server.target}{self.path}")  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.parametrize("client", ["official", "lean"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_client_follows_a_redirect_so_the_key_goes_nowhere_else(backend, client, monkeypatch):
    """The official clients follow redirects by default; ours do not, as the lean client (docs/design.md)."""
    monkeypatch.setenv("REDIRECT_KEY", "secret-header-value")
    redirector = ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    threading.Thread(target=redirector.serve_forever, daemon=True).start()
    try:
        with LLMServer() as elsewhere:
            redirector.target = elsewhere.url  # type: ignore[attr-defined]
            base = f"http://127.0.0.1:{redirector.server_address[1]}" + ("/v1" if backend == "openai" else "")
            config = LLMConfig(
                backend=backend, model="m", base_url=base, client=client, retries=0, cache=False,
                headers_env={"X-Api-Key": "REDIRECT_KEY"},
            )  # fmt: skip
            with pytest.raises(LLMError, match=r"HTTP 307: redirected to http://127\.0\.0\.1:\d+/.*, not followed"):
                asyncio.run(complete_once(config))
            assert elsewhere.requests == []
    finally:
        redirector.shutdown()
        redirector.server_close()


def test_client_lean_with_an_https_url_is_a_config_error(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-sent")
    config = LLMConfig(backend="openai", model="m", client="lean", base_url="https://llm.example.org/v1")
    with pytest.raises(ConfigError, match="^llm.client: lean speaks plain HTTP only; https://llm.example.org/v1/chat"):
        LLMProvider(config).get("simulator")


def test_the_preflight_goes_the_way_the_calls_go(tls_files: TLSFiles, monkeypatch):
    async def check(config) -> list[str]:
        provider = LLMProvider(config)
        try:
            return await check_llms(provider, ["simulator"], timeout_s=5)
        finally:
            await provider.aclose()

    with LLMServer(tls=tls_files.server_context()) as server:
        assert asyncio.run(check(server.config("openai"))) == [f"{server.openai_url}/models"]
        assert [r.path for r in server.requests] == ["/v1/models"]
        monkeypatch.delenv("SSL_CERT_FILE")  # the default CA bundle does not know the throwaway certificate
        with pytest.raises(UserError, match=r"unreachable \(.*CERTIFICATE_VERIFY_FAILED"):
            asyncio.run(check(server.config("openai")))


# ------------------------------------------------------------------------------------------------- CRSs


def pooled() -> tuple[RunContext, CRSPool]:
    context = RunContext(items=catalog_items())
    return context, context.shared(POOL_KEY, CRSPool)


def crs_arena_conversations(url: str, **options) -> tuple[list[list[str]], CRSPool]:
    """Two interleaved conversations with a CRS Arena server over one pool; their reply texts."""

    async def main():
        context, pool = pooled()
        section = {"type": "crs_arena", "url": url, **options}
        try:
            first = await scripted_conversation(section, context, ["I like horror", "more please"], "a")
            second = await scripted_conversation(section, context, ["I like comedy"], "b")
            return [[r.text for r in first[1]], [r.text for r in second[1]]], pool
        finally:
            await pool.aclose()

    return asyncio.run(main())


def test_an_https_crs_goes_through_httpx_with_a_cookie_jar_per_conversation(tls_files: TLSFiles):
    server = LocalCRSServer(IEvaLMApp(), tls=tls_files.server_context()).start()
    try:
        texts, pool = crs_arena_conversations(server.url)
        posts = [e for e in server.exchanges() if e.method == "POST"]
    finally:
        server.stop()
    assert all(text for conversation in texts for text in conversation)
    assert [p.info["session_turns"] for p in posts] == [0, 1, 0]  # the session cookie went along, per conversation
    assert [p.info["had_cookie"] for p in posts] == [False, True, False]
    assert pool.routes() == {server.url.rstrip("/"): {"client": "httpx", "why": "https (TLS is left to the library)"}}
    assert pool.client._state is None  # noqa: SLF001 - the lean client never connected


def test_the_crs_wire_request_is_the_same_through_the_lean_client_and_httpx(monkeypatch):
    monkeypatch.setenv("CRS_WIRE_TOKEN", "Bearer wire-secret")
    options = {"headers": {"X-Run": "7"}, "headers_env": {"Authorization": "CRS_WIRE_TOKEN"}}
    sent: dict[str, list[tuple[object, dict[str, str]]]] = {}
    for client in ("lean", "httpx"):
        server = LocalCRSServer(IEvaLMApp()).start()
        try:
            _, pool = crs_arena_conversations(server.url, client=client, **options)
            hop_by_hop = {"host", "content-length", "connection"}
            sent[client] = [
                (e.body, {k: v for k, v in e.headers.items() if k not in hop_by_hop})
                for e in server.exchanges()
                if e.method == "POST"
            ]
        finally:
            server.stop()
        assert next(iter(pool.routes().values()))["client"] == client
    assert sent["lean"] == sent["httpx"] and len(sent["lean"]) == 3
    headers = sent["lean"][1][1]
    assert headers["user-agent"] == "usersimcrs" and headers["authorization"] == "Bearer wire-secret"
    assert headers["accept-encoding"] == "gzip, deflate" and headers["cookie"].startswith("session=")


def test_a_proxied_crs_goes_through_httpx_and_its_proxy(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{dead_port()}")
    server = LocalCRSServer(IEvaLMApp()).start()
    try:
        with pytest.raises(ConnectorError, match="cannot connect to"):
            crs_arena_conversations(server.url, retries=0)
        assert server.exchanges() == []  # the request went to the (dead) proxy, not to the server
    finally:
        server.stop()


def test_crs_client_lean_with_an_https_url_is_a_config_error():
    with pytest.raises(ConfigError, match="crs.client.*lean speaks plain HTTP only; the https url needs"):
        build_connector({"type": "crs_arena", "url": "https://arena.example.org/", "client": "lean"}, RunContext())


# ------------------------------------------------------------------------------------------------- manifest


def test_the_run_manifest_records_the_client_of_each_endpoint(tmp_path, tls_files: TLSFiles):
    crs = LocalCRSServer(IEvaLMApp(), tls=tls_files.server_context()).start()
    try:
        with LLMServer() as llm:
            path = run_config(tmp_path, llm.openai_url, conversations=2, crs={"type": "crs_arena", "url": crs.url})
            assert main(["run", str(path), "-o", str(tmp_path / "run")]) == 0
    finally:
        crs.stop()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    clients = manifest["http_clients"]
    assert clients["llm"]["simulator"] == {
        "url": f"{llm.openai_url}/chat/completions",
        "client": "lean",
        "why": "plain http to a local address, no proxy",
    }
    assert clients["crs"] == {crs.url.rstrip("/"): {"client": "httpx", "why": "https (TLS is left to the library)"}}


def test_auto_hashes_as_lean_so_runs_made_before_it_resume():
    """`auto` (the default since issue #35) decides no conversation: a run made when `lean` was the default
    keeps its config hash, and a resume names no change; `official` still hashes apart, as before."""
    from usersimcrs.config import RunConfig

    def config(client: str) -> RunConfig:
        return RunConfig(simulator={"type": "llm_single"}, crs={"type": "popularity"}, llm={"client": client})

    before = config("lean")
    assert config("auto").config_hash() == before.config_hash() == RunConfig(**before.model_dump()).config_hash()
    assert config("auto").changes_from(before.model_dump(mode="json")) == []
    assert config("official").config_hash() != before.config_hash()
    assert config("auto").llm.client == "auto"  # the config itself keeps what was asked
