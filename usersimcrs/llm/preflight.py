"""Before a command's first LLM call: does each LLM server it will call answer, and take our key?

Without this check a server that is down (wrong port, not started) or a refused key turns every
conversation or judgment into a failure after its retries. Each distinct server gets one GET of its
model list (`LLM.preflight_target`: free, no tokens, no model load), one attempt within
`PREFLIGHT_TIMEOUT_S` and no retries (the retry policy is for calls whose answer matters; a refused
connection does not heal in the seconds a retry waits). A refused connection, a timeout, a 5xx, a
redirect or a 401/403 stops the command with one line naming the URL (user info and query left out);
any other answer (404 or 501 from a server without the route, 429) shows a server that is up. The embedded
model has nothing to reach; a backend without a target is not checked. The GET goes the way the calls go
(`PreflightTarget.client`): the lean client to a local plain-HTTP server, httpx (the official clients'
transport: TLS, the environment's proxies and CA bundle) to anything else.
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
BAD_HEADER = "a header value cannot be sent (check the key's environment variable)"


async def probe(target: PreflightTarget, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> str | None:
    """GET the target once; None when the server answered, else why it cannot be used (no secret in it)."""
    headers = {"User-Agent": "usersimcrs", "Accept": "application/json", **target.headers}
    if target.client == "lean":
        status = await _get_lean(target.url, headers, timeout_s)
    else:
        status = await _get_httpx(target.url, headers, timeout_s)
    if isinstance(status, str):
        return status
    if status in (401, 403):
        where = f"${target.key_env}" if target.key_env else "the key"
        return f"HTTP {status}: the server refused the credentials (check {where})"
    if 300 <= status < 400:
        return f"HTTP {status}: redirected, not followed (set base_url to the final address)"
    if status >= 500 and status != 501:  # 501: no GET there, from a server that answers
        return f"HTTP {status}: the server is not working; {START}"
    return None


async def _get_lean(url: str, headers: dict[str, str], timeout_s: float) -> int | str:
    """The status of one GET through the lean client, or why there is none."""
    client = HTTPClient(connections=1, connect_timeout_s=timeout_s)
    try:
        block = encode_headers(headers)
        async with asyncio.timeout(timeout_s):
            return (await client.request("GET", url, block, limit=1 << 20)).status
    except TimeoutError:
        return f"no answer within {timeout_s:g}s; {START}"
    except ValueError:  # a header value that cannot be sent (a newline in the key): never echoed
        return BAD_HEADER
    except InvalidURL as exc:
        return f"{exc.reason}; fix its base_url"
    except ConnectFailed as exc:
        return f"unreachable ({exc.reason}); {START}"
    except (ConnectionLost, OSError) as exc:
        return f"unreachable ({type(exc).__name__}); {START}"
    finally:
        await client.aclose()


async def _get_httpx(url: str, headers: dict[str, str], timeout_s: float) -> int | str:
    """The status of one GET through httpx, as the official clients send (environment proxies and CA
    bundle honoured, redirects not followed), or why there is none."""
    import httpx  # only a command calling an https or proxied LLM server pays for the import

    try:
        async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client:
            async with asyncio.timeout(timeout_s):
                return (await client.get(url, headers=headers)).status_code
    except (TimeoutError, httpx.TimeoutException):
        return f"no answer within {timeout_s:g}s; {START}"
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        return f"invalid URL ({_short(exc)}); fix its base_url"
    except httpx.ProxyError as exc:
        return f"the proxy of the environment failed ({_short(exc)}); check HTTPS_PROXY / HTTP_PROXY / NO_PROXY"
    except httpx.ConnectError as exc:
        return f"unreachable ({_short(exc)}); {START}"
    except httpx.HTTPError as exc:
        return f"unreachable ({type(exc).__name__}); {START}"
    except ValueError:  # a header value httpx will not send (a newline in the key): never echoed
        return BAD_HEADER


def _short(exc: Exception) -> str:
    """The first line of an httpx failure, at most 120 characters (a TLS failure names the certificate)."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:120]


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
