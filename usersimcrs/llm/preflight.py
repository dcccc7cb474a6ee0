"""Before a command's first LLM call: does each LLM server it will call answer, and take our key?

Without this check a server that is down (wrong port, not started) or a refused key turns every
conversation or judgment into a failure after its retries. Each distinct server gets one GET of its
model list (`LLM.preflight_target`: free, no tokens, no model load), one attempt within
`PREFLIGHT_TIMEOUT_S` and no retries (the retry policy is for calls whose answer matters; a refused
connection does not heal in the seconds a retry waits). A refused connection, a timeout, a 5xx, a
redirect or a 401/403 stops the command with one line naming the URL (user info and query left out);
any other answer (404 or 501 from a server without the route, 429) shows a server that is up. The embedded
model has nothing to reach; a backend without a target is not checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from usersimcrs.core.http_client import ConnectFailed, ConnectionLost, HTTPClient, InvalidURL, encode_headers
from usersimcrs.core.secrets import public_url
from usersimcrs.errors import UserError
from usersimcrs.llm.backends import build_backend
from usersimcrs.llm.base import PreflightTarget
from usersimcrs.llm.provider import LLMProvider

PREFLIGHT_TIMEOUT_S = 10.0
SKIP_HINT = "--no-preflight skips this check"
START = "start it or fix its base_url"


async def probe(target: PreflightTarget, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """GET the target once; None when the server answered, else why it cannot be used (no secret in it)."""
    client = HTTPClient(connections=1, connect_timeout_s=timeout_s)
    try:
        headers = encode_headers({"User-Agent": "usersimcrs", "Accept": "application/json", **target.headers})
        async with asyncio.timeout(timeout_s):
            reply = await client.request("GET", target.url, headers, limit=1 << 20)
    except TimeoutError:
        return f"no answer within {timeout_s:g}s; {START}"
    except ValueError:  # a header value that cannot be sent (a newline in the key): never echoed
        return "a header value cannot be sent (check the key's environment variable)"
    except InvalidURL as exc:
        return f"{exc.reason}; fix its base_url"
    except ConnectFailed as exc:
        return f"unreachable ({exc.reason}); {START}"
    except (ConnectionLost, OSError) as exc:
        return f"unreachable ({type(exc).__name__}); {START}"
    finally:
        await client.aclose()
    if reply.status in (401, 403):
        where = f"${target.key_env}" if target.key_env else "the key"
        return f"HTTP {reply.status}: the server refused the credentials (check {where})"
    if 300 <= reply.status < 400:
        return f"HTTP {reply.status}: redirected, not followed (set base_url to the final address)"
    if reply.status >= 500 and reply.status != 501:  # 501: no GET there, from a server that answers
        return f"HTTP {reply.status}: the server is not working; {START}"
    return None


Checked = dict[tuple[str, tuple[tuple[str, str], ...]], str]
"""(URL, headers) of the servers a command has checked -> URL: each is checked once per command."""


async def check_llms(
    provider: LLMProvider,
    components: Iterable[str],
    *,
    checked: Checked | None = None,
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
) -> list[str]:
    """Preflight the server of each component, each distinct server once (`checked`: those a command has
    checked already, e.g. for other cells); returns the URLs checked by this call.

    Raises `UserError` with one line naming the first server that cannot be used, and who uses it.
    A missing key (`llm.api_key_env` not set) is the backend's own one-line ConfigError."""
    seen: Checked = checked if checked is not None else {}
    here: list[str] = []
    for component in dict.fromkeys(components):
        config = provider.resolved_config(component)
        backend = build_backend(config)
        try:
            target = backend.preflight_target()
        finally:
            await backend.aclose()
        if target is None:
            continue
        key = (target.url, tuple(sorted(target.headers.items())))
        if key in seen:
            continue
        seen[key] = target.url
        here.append(public_url(target.url))
        reason = await probe(target, min(timeout_s, config.timeout_s))
        if reason is not None:
            model = f"{backend.backend}:{backend.model}"
            raise UserError(
                f"LLM server {public_url(target.url)} ({model}, used by {component}): {reason} ({SKIP_HINT})"
            )
    return here
