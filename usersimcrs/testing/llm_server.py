"""A real local HTTP server speaking the OpenAI and Ollama chat protocols, for tests and benchmarks.

It answers `/v1/chat/completions` and `/v1/models` the way the official `openai` client expects, and
`/api/chat`, `/api/tags` and `/api/version` the way the official `ollama` client expects. Replies
come from a script (a list, or a callable given the request JSON) or, by default, are derived
deterministically from the prompt: plain text, or a JSON value that satisfies the requested schema.

With `api_key` set, a request without `Authorization: Bearer <api_key>` gets 401, as a hosted API
answers a refused key. Latency, jitter and faults are configurable: by script (one entry per chat request) or by share
(drawn from a seeded RNG). Faults: ``500``, ``429`` (with Retry-After), ``hang`` (no answer past the
client's timeout), ``malformed`` (truncated JSON body), ``empty`` (a valid reply with no text) and
``reset`` (the connection is reset).

With `tls` (a server-side `ssl.SSLContext`) it serves HTTPS, as a hosted API does (tests of the https
route). Use it as a context manager in tests, or as a process for benchmarks::

    python -m usersimcrs.testing.llm_server --port 0 --latency-ms 50 --fault-share 500=0.1
"""

from __future__ import annotations

import argparse
import hashlib
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Sequence

from usersimcrs.testing.tls import tls_accepted

FAULTS = ("500", "429", "hang", "malformed", "empty", "reset")
OPENAI_CHAT = "/v1/chat/completions"
OLLAMA_CHAT = "/api/chat"
COUNTERS_PATH = "/_usersimcrs/counters"  # GET: the counters (benchmarks read them from another process)
RESET_PATH = "/_usersimcrs/reset"  # POST: forget the log and counters

ReplySource = Sequence[str] | Callable[[dict[str, Any]], "str | None"]


@dataclass
class LoggedRequest:
    """One request the server received."""

    path: str
    body: Any
    protocol: str
    model: str | None = None
    fault: str | None = None
    reply: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


def request_schema(protocol: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat request asks the reply to follow ({} for 'any JSON'), or None."""
    if protocol == "openai":
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return (fmt.get("json_schema") or {}).get("schema") or {}
        return {} if fmt.get("type") == "json_object" else None
    fmt = body.get("format")
    if isinstance(fmt, dict):
        return fmt
    return {} if fmt == "json" else None


def prompt_digest(body: dict[str, Any]) -> str:
    """A stable hash of the model and messages of a chat request."""
    blob = json.dumps([body.get("model"), body.get("messages")], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def example_for_schema(schema: dict[str, Any], seed: int, booleans: bool | None = None) -> Any:
    """A JSON value satisfying `schema` (common subset), varied deterministically by `seed`;
    `booleans` fixes every boolean (e.g. an LLM user's `end`) instead of varying it."""
    if not isinstance(schema, dict) or not schema:
        return {"reply": f"ok {seed % 1000}"}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][seed % len(schema["enum"])]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return example_for_schema(schema[key][0], seed, booleans)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: example_for_schema(sub, seed + i + 1, booleans) for i, (name, sub) in enumerate(props.items())}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        count = min(count, int(schema.get("maxItems", count)))
        return [example_for_schema(schema.get("items", {"type": "string"}), seed + i, booleans) for i in range(count)]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 10) - 1)
        low, high = int(low), max(int(low), int(high))
        return low + seed % (high - low + 1)
    if kind == "boolean":
        return booleans if booleans is not None else seed % 2 == 0
    if kind == "null":
        return None
    text = f"text {seed % 1000}"
    if "maxLength" in schema:
        text = text[: int(schema["maxLength"])]
    return text.ljust(int(schema.get("minLength", 0)), "x")


def default_reply(protocol: str, body: dict[str, Any], booleans: bool | None = None) -> str:
    """Deterministic reply text derived from the prompt (schema-valid JSON when a schema was asked)."""
    digest = prompt_digest(body)
    schema = request_schema(protocol, body)
    if schema is not None:
        return json.dumps(example_for_schema(schema, int(digest[:8], 16), booleans))
    messages = body.get("messages") or []
    last_user = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    snippet = " ".join(str(last_user).split())[:60]
    return f"echo {digest[:8]}: {snippet}"


def count_tokens(text: str) -> int:
    """A crude token count (whitespace words) for the usage fields."""
    return len(str(text).split())


def token_cap(protocol: str, body: dict[str, Any]) -> int | None:
    """The completion token cap a chat request sets (OpenAI max_tokens / max_completion_tokens, Ollama num_predict)."""
    if protocol == "openai":
        cap = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        cap = (body.get("options") or {}).get("num_predict")
    return int(cap) if isinstance(cap, (int, float)) and cap > 0 else None


def cut_at_token_cap(text: str, cap: int | None) -> tuple[str, str]:
    """`text` cut after `cap` tokens (whitespace words, as counted in usage) and the finish reason, as servers do."""
    if cap is None or count_tokens(text) <= cap:
        return text, "stop"
    words = re.finditer(r"\S+", text)
    end = [m.end() for _, m in zip(range(cap), words, strict=False)][-1]
    return text[:end], "length"


def prompt_tokens(body: dict[str, Any]) -> int:
    """Crude prompt size of a chat request."""
    return sum(count_tokens(m.get("content", "")) for m in body.get("messages") or [] if isinstance(m, dict))


class LLMServer:
    """A scripted OpenAI/Ollama-compatible chat server on 127.0.0.1 (ephemeral port by default)."""

    def __init__(
        self,
        replies: ReplySource | None = None,
        *,
        latency_ms: float = 0.0,
        jitter_ms: float = 0.0,
        faults: Iterable[str | None] | None = None,
        fault_share: dict[str, float] | None = None,
        retry_after_s: float = 1.0,
        hang_s: float = 30.0,
        seed: int = 0,
        models: Sequence[str] = ("test-model",),
        host: str = "127.0.0.1",
        port: int = 0,
        booleans: bool | None = None,
        api_key: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.api_key = api_key  # when set, other keys (and none) get 401
        self.tls = tls  # a server-side TLS context: HTTPS
        self.booleans = booleans  # fixed booleans in unscripted JSON replies (None: varied by the prompt)
        self.latency_ms = latency_ms
        self.jitter_ms = jitter_ms
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.models = list(models)
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._replies: Callable[[dict[str, Any]], str | None] | None = None
        self._reply_queue: list[str] = []
        self._fault_script: list[str | None] = []
        self._fault_share: dict[str, float] = {}
        self._stop = threading.Event()
        self._log: list[LoggedRequest] = []
        self._counters: dict[str, Any] = {}
        self._in_flight = 0
        self.set_replies(replies)
        self.set_faults(faults, fault_share)
        self.reset_log()
        self._httpd = _Server((host, port), _Handler)
        self._httpd.app = self
        self._httpd.tls = tls
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The bound port."""
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base URL (also the Ollama host)."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        """Base URL for OpenAI-compatible clients (ends in /v1)."""
        return f"{self.url}/v1"

    @property
    def ollama_url(self) -> str:
        """Host for the Ollama client."""
        return self.url

    def start(self) -> LLMServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until stop()."""
        self._httpd.serve_forever(poll_interval=0.1)

    def stop(self) -> None:
        """Release hung requests, stop serving and close the socket."""
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting -------------------------------------------------------------------------
    def set_replies(self, replies: ReplySource | None) -> None:
        """Scripted replies: a list consumed one per answered chat request, or a callable(request)."""
        with self._lock:
            self._replies = replies if callable(replies) else None
            self._reply_queue = list(replies) if replies is not None and not callable(replies) else []

    def set_faults(self, faults: Iterable[str | None] | None = None, share: dict[str, float] | None = None) -> None:
        """A fault script (one entry per chat request; None = answer normally) and/or fault shares."""
        script = list(faults or [])
        shares = dict(share or {})
        unknown = [f for f in script + list(shares) if f is not None and f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
        if sum(shares.values()) > 1.0 + 1e-9:
            raise ValueError("fault shares add up to more than 1")
        with self._lock:
            self._fault_script = script
            self._fault_share = shares

    def config(self, backend: str = "openai", **overrides: Any) -> Any:
        """An LLMConfig pointing at this server for `backend` ('openai' or 'ollama')."""
        from usersimcrs.llm.config import LLMConfig  # lazy: the test server's process starts without pydantic

        base = self.openai_url if backend == "openai" else self.ollama_url
        data = {"backend": backend, "model": self.models[0], "base_url": base, **overrides}
        return LLMConfig.model_validate(data)

    # -- observation -----------------------------------------------------------------------
    @property
    def requests(self) -> list[LoggedRequest]:
        """Every request received so far (a copy)."""
        with self._lock:
            return list(self._log)

    @property
    def chat_requests(self) -> list[LoggedRequest]:
        """Chat requests received so far (either protocol)."""
        return [r for r in self.requests if r.path in (OPENAI_CHAT, OLLAMA_CHAT)]

    @property
    def counters(self) -> dict[str, Any]:
        """Counts: requests, chat, answered, faults by kind, by_model, max_in_flight."""
        with self._lock:
            return json.loads(json.dumps(self._counters))

    def reset_log(self) -> None:
        """Forget logged requests and counters."""
        with self._lock:
            self._log = []
            self._counters = {
                "requests": 0,
                "chat": 0,
                "answered": 0,
                "faults": {},
                "by_model": {},
                "max_in_flight": 0,
                "first_chat_unix": None,  # wall clock (time.time()) of the first chat request since the reset
            }

    # -- decisions made per request (called from handler threads) ---------------------------
    def _begin(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)
            self._counters["requests"] += 1
            if entry.path in (OPENAI_CHAT, OLLAMA_CHAT):
                if not self._counters["chat"]:
                    self._counters["first_chat_unix"] = time.time()
                self._counters["chat"] += 1
                model = entry.model or ""
                self._counters["by_model"][model] = self._counters["by_model"].get(model, 0) + 1
                self._in_flight += 1
                self._counters["max_in_flight"] = max(self._counters["max_in_flight"], self._in_flight)

    def _end_chat(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _choose_fault(self) -> str | None:
        with self._lock:
            if self._fault_script:
                fault = self._fault_script.pop(0)
            else:
                fault = None
                draw = self._rng.random()
                for name, share in self._fault_share.items():
                    if draw < share:
                        fault = name
                        break
                    draw -= share
            if fault is not None:
                self._counters["faults"][fault] = self._counters["faults"].get(fault, 0) + 1
            return fault

    def _delay_s(self) -> float:
        with self._lock:
            jitter = self._rng.uniform(0, self.jitter_ms) if self.jitter_ms else 0.0
        return (self.latency_ms + jitter) / 1000.0

    def _reply_for(self, protocol: str, body: dict[str, Any]) -> str:
        with self._lock:
            self._counters["answered"] += 1
            source = self._replies
            scripted = self._reply_queue.pop(0) if self._reply_queue else None
        if source is not None:
            scripted = source(body)
        return scripted if scripted is not None else default_reply(protocol, body, self.booleans)


class _Server(ThreadingHTTPServer):
    """Threaded server with a deep accept queue (64+ concurrent clients) and quiet disconnects."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 512
    app: LLMServer
    tls: ssl.SSLContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        """The accepted connection, in TLS when serving HTTPS."""
        return tls_accepted(super().get_request(), self.tls)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, resets) are expected here; stay quiet."""


class _Handler(BaseHTTPRequestHandler):
    """Routes one HTTP request to the protocol it belongs to."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        """No access log on stderr."""

    def setup(self) -> None:
        """Send small replies at once (no Nagle delay between headers and body)."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.arrived = time.perf_counter()

    def parse_request(self) -> bool:
        """Note when the request arrived: the latency counts from here, so the server's own work is inside it."""
        self.arrived = time.perf_counter()
        return super().parse_request()

    # -- routing ---------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        app = self.server.app
        path = self.path.split("?", 1)[0]
        app._begin(LoggedRequest(path=path, body=None, protocol=_protocol(path), headers=dict(self.headers)))
        if not self._authorized(app):
            return
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "usersimcrs"} for m in app.models]
            self._send_json(200, {"object": "list", "data": data})
        elif path == "/api/tags":
            self._send_json(200, {"models": [_ollama_model(m) for m in app.models]})
        elif path == "/api/version":
            self._send_json(200, {"version": "0.6.0"})
        elif path in ("/", "/health"):
            self._send_json(200, {"status": "ok"})
        elif path == COUNTERS_PATH:  # for benchmarks in another process: when did the first chat arrive
            self._send_json(200, app.counters)
        else:
            self._send_json(404, {"error": f"no route {path}"})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        app = self.server.app
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = None
        protocol = _protocol(path)
        entry = LoggedRequest(
            path=path,
            body=body,
            protocol=protocol,
            model=body.get("model") if isinstance(body, dict) else None,
            headers=dict(self.headers),
        )
        if path == RESET_PATH:
            app.reset_log()
            self._send_json(200, {"status": "reset"})
            return
        app._begin(entry)
        if path not in (OPENAI_CHAT, OLLAMA_CHAT):
            self._send_json(404, {"error": f"no route {path}"})
            return
        try:
            if not self._authorized(app):
                return
            if not isinstance(body, dict):
                self._send_json(400, _error_body(protocol, "request body is not a JSON object"))
                return
            self._chat(app, protocol, body, entry)
        finally:
            app._end_chat()

    def _authorized(self, app: LLMServer) -> bool:
        """True without an `api_key`, or with its bearer token; else answers 401 as OpenAI does."""
        if app.api_key is None or self.headers.get("Authorization") == f"Bearer {app.api_key}":
            return True
        self._send_json(401, _error_body(_protocol(self.path), "Incorrect API key provided"))
        return False

    # -- chat ------------------------------------------------------------------------------
    def _chat(self, app: LLMServer, protocol: str, body: dict[str, Any], entry: LoggedRequest) -> None:
        fault = app._choose_fault()
        entry.fault = fault
        delay = app._delay_s()
        answer = None
        if fault in (None, "empty"):  # built before the wait, so that it is part of the latency, not added to it
            text = "" if fault == "empty" else app._reply_for(protocol, body)
            entry.reply = text
            answer = self._chat_answer(protocol, body, text)
        remaining = self.arrived + delay - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        if answer is not None:
            self._send_raw(200, *answer)
            return
        if fault == "hang":
            app._stop.wait(app.hang_s)
            self.close_connection = True
            return
        if fault == "reset":
            self._reset()
            return
        if fault == "500":
            self._send_json(500, _error_body(protocol, "injected internal error"))
            return
        if fault == "429":
            headers = {"Retry-After": _format_seconds(app.retry_after_s)}
            self._send_json(429, _error_body(protocol, "injected rate limit"), headers)
            return
        if fault == "malformed":
            self._send_raw(200, b'{"id": "broken", "choices": [{"message": {"role": "assist', "application/json")
            return

    @staticmethod
    def _chat_answer(protocol: str, body: dict[str, Any], text: str) -> tuple[bytes, str]:
        """The body and content type of a successful chat reply in `protocol`, cut at the request's token cap."""
        text, finish = cut_at_token_cap(text, token_cap(protocol, body))
        if protocol == "openai":
            reply = _openai_reply(body, text)
            reply["choices"][0]["finish_reason"] = finish
            return json.dumps(reply).encode("utf-8"), "application/json"
        if body.get("stream"):
            lines = _ollama_stream(body, text)
            lines[-1]["done_reason"] = finish
            return "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8"), "application/x-ndjson"
        reply = _ollama_reply(body, text)
        reply["done_reason"] = finish
        return json.dumps(reply).encode("utf-8"), "application/json"

    # -- writing ---------------------------------------------------------------------------
    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_raw(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if not hasattr(self, "_headers_buffer"):  # HTTP/0.9: no headers at all
            self.wfile.write(data)
            return
        self._headers_buffer.append(b"\r\n" + data)  # head and body in one write: one packet, one wake-up
        self.flush_headers()

    def _reset(self) -> None:
        """Abort the TCP connection (RST) without answering."""
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()


def _protocol(path: str) -> str:
    return "openai" if path.startswith("/v1/") else "ollama"


def _format_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _error_body(protocol: str, message: str) -> dict[str, Any]:
    if protocol == "openai":
        return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    return {"error": message}


def _now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _openai_reply(body: dict[str, Any], text: str) -> dict[str, Any]:
    prompt, completion = prompt_tokens(body), count_tokens(text)
    return {
        "id": f"chatcmpl-{prompt_digest(body)[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "system_fingerprint": "usersimcrs-test",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def _ollama_reply(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "model": body.get("model", ""),
        "created_at": _now_iso(),
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
        "total_duration": 1000,
        "load_duration": 0,
        "prompt_eval_count": prompt_tokens(body),
        "prompt_eval_duration": 0,
        "eval_count": count_tokens(text),
        "eval_duration": 0,
    }


def _ollama_stream(body: dict[str, Any], text: str) -> list[dict[str, Any]]:
    head = {
        "model": body.get("model", ""),
        "created_at": _now_iso(),
        "message": {"role": "assistant", "content": text},
        "done": False,
    }
    tail = _ollama_reply(body, "")
    return [head, tail]


def _ollama_model(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2025-01-01T00:00:00Z",
        "size": 0,
        "digest": hashlib.sha256(name.encode()).hexdigest(),
        "details": {"format": "gguf", "family": "test", "parameter_size": "0", "quantization_level": "none"},
    }


def parse_fault_share(text: str) -> dict[str, float]:
    """'500=0.1,429=0.05' -> {'500': 0.1, '429': 0.05}."""
    shares: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        shares[name.strip()] = float(value)
    return shares


def main(argv: list[str] | None = None) -> int:
    """Run the server in the foreground; prints its URL on the first line of stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m usersimcrs.testing.llm_server", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--fault-share", default="", help="e.g. 500=0.1,429=0.05,malformed=0.1")
    parser.add_argument("--retry-after-s", type=float, default=1.0)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", action="append", dest="models", help="model name to list (repeatable)")
    parser.add_argument(
        "--booleans",
        choices=["varied", "true", "false"],
        default="varied",
        help="booleans in unscripted JSON replies: varied by the prompt, or fixed (false: LLM users never ask to end)",
    )
    args = parser.parse_args(argv)
    server = LLMServer(
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        fault_share=parse_fault_share(args.fault_share),
        retry_after_s=args.retry_after_s,
        hang_s=args.hang_s,
        seed=args.seed,
        models=args.models or ["test-model"],
        host=args.host,
        port=args.port,
        booleans=None if args.booleans == "varied" else args.booleans == "true",
    )
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.stop, daemon=True).start())
    print(f"http://{args.host}:{server.port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
