"""Experiment behind docs/benchmarks.md ("What limits B1"): B1 with the `openai` backend's transport
swapped for a minimal asyncio HTTP/1.1 client, to show how much of the per-call CPU is the client
stack rather than the engine. Not used by the toolkit; run it by hand::

    python -m benchmarks.transport_experiment   # official SDK, `client: lean`, then the minimal one

The minimal client keeps one idle-connection pool per event loop and host, sends one request per
connection at a time with `TCP_NODELAY`, and reads `Content-Length` bodies only (enough for the
benchmark server); it has no TLS, redirects, chunked bodies or error mapping.
"""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchmarks.scenarios import CONCURRENCY, LATENCY_S, timed_run
from benchmarks.server import llm_server
from benchmarks.setups import llm_user_config
from usersimcrs.core.usage import Usage
from usersimcrs.llm.backends import openai_chat
from usersimcrs.llm.base import LLMResult, Message


class IdlePool:
    """Keep-alive HTTP/1.1 connections to one host, reused last-in first-out."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        """One POST; returns (status, body)."""
        if self.idle:
            reader, writer = self.idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        status = int((await reader.readline()).split()[1])
        length, close = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
            elif name.strip().lower() == "connection" and value.strip().lower() == "close":
                close = True
        data = await reader.readexactly(length)
        if close:
            writer.close()
        else:
            self.idle.append((reader, writer))
        return status, data


def install_minimal_transport() -> None:
    """Replace `OpenAIChat.complete` with a call through IdlePool (this process only)."""
    pools: dict[tuple[int, str, int], IdlePool] = {}

    async def complete(self: Any, messages: list[Message], *, temperature: float = 0.0, max_tokens: int = 256,
                       seed: int | None = None, schema: dict | None = None, component: str = "default") -> LLMResult:  # fmt: skip
        url = urlparse(self.config.base_url)
        key = (id(asyncio.get_running_loop()), url.hostname or "127.0.0.1", url.port or 80)
        pool = pools.setdefault(key, IdlePool(key[1], key[2]))
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if seed is not None:
            body["seed"] = seed
        if schema is not None:
            body["response_format"] = openai_chat.response_format(schema)
        _, raw = await pool.post(
            url.path.rstrip("/") + "/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        data = json.loads(raw)
        usage = data.get("usage") or {}
        return LLMResult(
            text=data["choices"][0]["message"]["content"] or "",
            usage=Usage(
                prompt_tokens=usage.get("prompt_tokens", 0), completion_tokens=usage.get("completion_tokens", 0)
            ),
            model=self.model,
            backend="openai",
        )

    openai_chat.OpenAIChat.complete = complete  # type: ignore[method-assign]


def measure(label: str, work: Path, client: str = "official") -> None:
    """B1's efficiency and CPU per call at C = 8, 32, 64 (200 conversations each)."""
    with llm_server(LATENCY_S * 1000) as url:
        timed_run(llm_user_config(url, conversations=8, concurrency=4, client=client), work / "warmup")
        for c in CONCURRENCY[1:]:
            r = timed_run(llm_user_config(url, conversations=200, concurrency=c, client=client), work / f"{label}-{c}")
            efficiency = r.llm_calls / r.wall_s / (c / LATENCY_S)
            print(f"{label:8s} C={c:<3d} efficiency {efficiency:.3f}  CPU/call {r.cpu_s / r.llm_calls * 1000:.2f} ms  "
                  f"mean call {r.llm_wait_s / r.llm_calls * 1000:.1f} ms", flush=True)  # fmt: skip


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        measure("sdk", Path(folder))
        measure("lean", Path(folder), client="lean")
        install_minimal_transport()
        measure("minimal", Path(folder))


if __name__ == "__main__":
    main()
