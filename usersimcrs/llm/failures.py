"""How a backend says why a call failed: worth retrying (with an optional wait) or not."""

from __future__ import annotations

from usersimcrs.core.secrets import Secrets
from usersimcrs.errors import LLMError


class TransientLLMError(LLMError):
    """A failure that may go away on retry: 429, 5xx, timeout, lost connection, malformed body."""

    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after_s = retry_after_s


class PermanentLLMError(LLMError):
    """A failure that retrying cannot fix: bad request, unknown model, refused credentials."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


def is_retryable_status(status: int) -> bool:
    """True for HTTP statuses worth retrying: rate limits, timeouts and every 5xx."""
    return status in RETRYABLE_STATUS or status >= 500


def status_error(backend: str, status: int, message: str, retry_after_s: float | None, secrets: list[str]) -> LLMError:
    """The classified error for an HTTP status, with a short message scrubbed of secrets."""
    reason = f"{backend}: HTTP {status}" + (f" {shorten(redact(message, secrets))}" if message else "")
    if is_retryable_status(status):
        return TransientLLMError(reason, retry_after_s)
    return PermanentLLMError(reason)


def redirect_error(backend: str, status: int, location: str | None, secrets: list[str]) -> PermanentLLMError:
    """A 3xx is not followed by any client (the key and headers are never sent on to another address)."""
    where = f" to {redact(location, secrets)}" if location else ""
    return PermanentLLMError(
        f"{backend}: HTTP {status}: redirected{where}, not followed (set llm.base_url to the final address)"
    )


def redact(text: str, secrets: list[str]) -> str:
    """`text` with every secret value replaced by *** (the one scrubber, `core/secrets.py`)."""
    return Secrets(secrets).scrub(text)


def shorten(text: str, limit: int = 160) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
