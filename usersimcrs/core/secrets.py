"""The one secret scrubber: values of environment variables a config names, masked wherever they turn up.

Configs hold only the *names* of environment variables that carry secrets (`llm.api_key_env`,
`llm.headers_env`, a connector's `crs.headers_env`, Rasa's `crs.token_env`, ...: every key ending in
`_env`). `Secrets.from_config` reads those variables once; `scrub` replaces each value, in the forms
a server may echo it (as sent; the token after an auth scheme such as ``Bearer``; URL-encoded;
JSON-escaped), by ``***``.

Text is scrubbed on the way in, once, where it enters the toolkit from outside: the bodies and
failure reasons of the CRS transport, every reply and failure of the LLM call site, the failure
reasons the engine records, and (while a run or a judging works) every log record. Everything the
toolkit then writes (dialogues, judgments, manifest, report, LLM cache, exports) is made from that
scrubbed text.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

from pydantic import BaseModel

MASK = "***"
MIN_SECRET_CHARS = 4  # shorter values would mask ordinary text
IMPLICIT_ENV = ("OLLAMA_API_KEY",)
"""Variables a backend reads without the config naming them (the official Ollama client's key)."""
_AUTH_SCHEME = re.compile(r"^(?:bearer|basic|token|digest|apikey|api-key|key)\s+(\S.*)$", re.IGNORECASE)


def env_names(section: Any) -> list[str]:
    """Names of environment variables under every `*_env` key of a config section (nested, in order)."""
    if isinstance(section, BaseModel):
        section = section.model_dump(mode="json")
    names: list[str] = []
    if isinstance(section, Mapping):
        for key, value in section.items():
            if str(key).lower().endswith("_env"):
                if isinstance(value, str):
                    names.append(value)
                elif isinstance(value, Mapping):
                    names += [str(v) for v in value.values() if isinstance(v, str)]
                elif isinstance(value, (list, tuple)):
                    names += [str(v) for v in value if isinstance(v, str)]
            else:
                names += env_names(value)
    elif isinstance(section, (list, tuple)):
        for value in section:
            names += env_names(value)
    return names


def variants(secret: str) -> list[str]:
    """The forms in which `secret` may come back: as is, its token after an auth scheme, URL-encoded, JSON-escaped."""
    forms = [secret]
    scheme = _AUTH_SCHEME.match(secret.strip())
    if scheme:
        forms.append(scheme.group(1).strip())
    for form in list(forms):
        forms += [quote(form, safe=""), quote_plus(form), json.dumps(form)[1:-1]]
    unique = {f for f in forms if len(f) >= MIN_SECRET_CHARS}
    return sorted(unique, key=len, reverse=True)  # longest first, so a token never leaves half a header


class Secrets:
    """A fixed set of secret values and the scrubber that masks them (immutable; cheap when empty)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        forms: set[str] = set()
        for value in values:
            if value and len(value) >= MIN_SECRET_CHARS:
                forms.update(variants(value))
        self._forms = tuple(sorted(forms, key=len, reverse=True))
        self._bytes = tuple(f.encode("utf-8") for f in self._forms)
        self._mask_bytes = MASK.encode()

    @classmethod
    def from_config(cls, section: Any, environ: Mapping[str, str] | None = None) -> Secrets:
        """The values of the environment variables `section` names (plus `IMPLICIT_ENV`) that are set."""
        env = os.environ if environ is None else environ
        names = [*env_names(section), *IMPLICIT_ENV]
        return cls(env[name] for name in names if env.get(name))

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __add__(self, other: Secrets) -> Secrets:
        merged = Secrets()
        forms = set(self._forms) | set(other._forms)
        merged._forms = tuple(sorted(forms, key=len, reverse=True))
        merged._bytes = tuple(f.encode("utf-8") for f in merged._forms)
        return merged

    def scrub(self, text: str) -> str:
        """`text` with every secret form replaced by ***."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        """`data` (a body as received) with every secret form replaced by ***; JSON stays JSON."""
        for form in self._bytes:
            if form in data:
                data = data.replace(form, self._mask_bytes)
        return data

    def scrub_value(self, value: Any) -> Any:
        """Every string inside `value` (mappings and lists, keys too) scrubbed; other values as they are."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, Mapping):
            return {self.scrub_value(k): self.scrub_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub_value(v) for v in value)
        return value


class ScrubbingFilter(logging.Filter):
    """A log filter that masks secrets in the formatted message (and drops the arguments it used)."""

    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = self.secrets.scrub(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_text is None and record.exc_info[1] is not None:
            record.exc_text = self.secrets.scrub(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = self.secrets.scrub(record.exc_text)
        return True


@contextmanager
def scrubbing_logs(secrets: Secrets) -> Iterator[None]:
    """While inside, every handler of the root logger masks `secrets` in what it writes."""
    if not secrets:
        yield
        return
    handlers = list(logging.getLogger().handlers)
    log_filter = ScrubbingFilter(secrets)
    for handler in handlers:
        handler.addFilter(log_filter)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(log_filter)


NO_SECRETS = Secrets()


def public_url(url: str | None) -> str:
    """`url` without user info or query (they may carry credentials), for error messages."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
