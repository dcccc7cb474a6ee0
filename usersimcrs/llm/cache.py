"""Persistent response cache: SQLite in WAL mode, one committed row per completed call.

WAL with a commit per write survives `kill -9` (a half-written transaction is rolled back on the
next open) and lets several processes share one cache folder. The cache stores only the reply
(text, parsed JSON, token counts) and the backend/model names: never headers or keys.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path

from pydantic import BaseModel
from tenacity import retry, retry_if_exception, stop_after_delay, wait_random

from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.core.usage import Usage
from usersimcrs.errors import DataError
from usersimcrs.llm.base import Message

CACHE_FILE = "llm-cache.sqlite3"
log = logging.getLogger("usersimcrs.llm")


class CachedReply(BaseModel):
    """What the cache keeps of one completion."""

    text: str
    parsed: JSON = None
    truncated: bool = False
    usage: Usage = Usage()
    model: str = ""
    backend: str = ""


def default_cache_dir(configured: str | None) -> Path:
    """The cache folder: the configured one, else $USERSIMCRS_CACHE_DIR, else ~/.cache/usersimcrs."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get("USERSIMCRS_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "usersimcrs"


def cache_key(
    *,
    backend: str,
    model: str,
    base_url: str | None,
    messages: list[Message],
    temperature: float,
    max_tokens: int,
    seed: int | None,
    schema: JSONSchema | None,
) -> str:
    """sha256 over everything that determines a reply (canonical JSON, sorted keys)."""
    payload = {
        "backend": backend,
        "model": model,
        "base_url": (base_url or "").rstrip("/"),
        "messages": [[m.role, m.content] for m in messages],
        "temperature": round(float(temperature), 6),
        "max_tokens": int(max_tokens),
        "seed": seed,
        "schema": schema,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def is_cacheable(temperature: float, seed: int | None) -> bool:
    """Greedy calls always; sampled calls only when a seed pins the sample."""
    return temperature <= 0 or seed is not None


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


@retry(retry=retry_if_exception(_locked), stop=stop_after_delay(30), wait=wait_random(0.01, 0.2), reraise=True)
def _set_up(db: sqlite3.Connection) -> None:
    """WAL mode and the table. Two processes opening one new cache at once can get "database is locked"
    from the switch to WAL without SQLite's busy handler being called, so the set-up is tried again."""
    db.execute("PRAGMA busy_timeout=30000")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS replies ("
        " key TEXT PRIMARY KEY, backend TEXT, model TEXT, text TEXT NOT NULL, parsed TEXT,"
        " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL, truncated INTEGER NOT NULL DEFAULT 0)"
    )
    columns = {row[1] for row in db.execute("PRAGMA table_info(replies)")}
    if "truncated" not in columns:  # a cache written before the column existed
        try:
            db.execute("ALTER TABLE replies ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):  # another process added it first
                raise


class ResponseCache:
    """A SQLite key -> reply store, safe for concurrent asyncio tasks and several processes."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / CACHE_FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            _set_up(self._db)
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise DataError(f"{self.path}: not a usable LLM cache ({exc}); delete it or set llm.cache_dir") from None

    def get(self, key: str) -> CachedReply | None:
        """The stored reply for `key`, or None (also when the cache cannot be read: it is only a cache)."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text, parsed, prompt_tokens, completion_tokens, model, backend, truncated"
                    " FROM replies WHERE key = ?",
                    (key,),
                ).fetchone()
        except sqlite3.Error as exc:
            log.warning("llm cache %s unreadable (%s); treating as a miss", self.path, exc)
            return None
        if row is None:
            return None
        text, parsed, prompt_tokens, completion_tokens, model, backend, truncated = row
        return CachedReply(
            text=text,
            parsed=json.loads(parsed) if parsed is not None else None,
            truncated=bool(truncated),
            usage=Usage(prompt_tokens=prompt_tokens or 0, completion_tokens=completion_tokens or 0),
            model=model or "",
            backend=backend or "",
        )

    def put(self, key: str, reply: CachedReply) -> None:
        """Store `reply` under `key` and commit at once (first writer wins)."""
        parsed = json.dumps(reply.parsed, ensure_ascii=False) if reply.parsed is not None else None
        try:
            with self._lock:
                self._insert(key, reply, parsed)
        except sqlite3.Error as exc:
            log.warning("llm cache %s not written (%s)", self.path, exc)

    def _insert(self, key: str, reply: CachedReply, parsed: str | None) -> None:
        """One autocommitted INSERT (call with the lock held)."""
        row = (
            key,
            reply.backend,
            reply.model,
            reply.text,
            parsed,
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            time.time(),
            int(reply.truncated),
        )
        self._db.execute(
            "INSERT OR IGNORE INTO replies (key, backend, model, text, parsed, prompt_tokens, completion_tokens,"
            " created, truncated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        """Close the connection (the data is already committed)."""
        with self._lock:
            self._db.close()
