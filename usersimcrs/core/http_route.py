"""Which HTTP client speaks to a URL: the lean one for plain HTTP to a server the user runs, a library otherwise.

The lean client (`core/http_client.py`) pays where many requests are in flight to a server on this
machine or the local network; it speaks plain HTTP and connects directly. An `https://` URL or one the
environment sends through a proxy goes to a well-kept library instead (the official openai/ollama
clients for LLMs, httpx for CRSs): against a remote API its rate limit, not our CPU, bounds the run.
The rule reads the URL text and the proxy settings only (no name lookup), so the choice is known
before the first request and the same on every machine with the same environment (docs/llm.md).
"""

from __future__ import annotations

import ipaddress
import os
import sys
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from usersimcrs.core.secrets import public_url

Client = Literal["lean", "official"]
ClientSetting = Literal["auto", "lean", "official"]

# loopback, private (RFC 1918, IPv6 unique local) and link-local; the unspecified address reaches this machine
LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(network)
    for network in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "0.0.0.0/32",
        "::1/128",
        "::/128",
        "fc00::/7",
        "fe80::/10",
    )
)


@dataclass(frozen=True)
class Route:
    """The client chosen for one URL and why (what the run's manifest records)."""

    url: str
    client: Client
    why: str

    def record(self, library: str = "official") -> dict[str, str]:
        """What the run's manifest keeps: the URL without user info or query, the client (`library` names
        the non-lean one: `official` for LLMs, `httpx` for CRSs) and why."""
        client = self.client if self.client == "lean" else library
        return {"url": public_url(self.url), "client": client, "why": self.why}


def local_host(host: str) -> bool:
    """True for `localhost` and for a loopback, private or link-local IP literal; False for any other name,
    since what a name resolves to is not known without a lookup (and may change)."""
    host = host.lower().rstrip(".")
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) is not part of it
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in LOCAL_NETWORKS)


def proxied(scheme: str, host: str) -> bool:
    """True when the environment sends requests for `scheme://host` through a proxy (HTTP_PROXY,
    HTTPS_PROXY, ALL_PROXY less NO_PROXY, as `urllib.request` reads them; on macOS and Windows the system
    settings too)."""
    if not _proxy_settings_possible():
        return False
    import urllib.request  # only when some proxy is set: the module costs tens of ms to import

    proxies = urllib.request.getproxies()
    if not (proxies.get(scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(host)


def _proxy_settings_possible() -> bool:
    """False only where no proxy can apply: on Linux and the like, no `*_proxy` variable is set."""
    if sys.platform in ("darwin", "win32"):
        return True
    return any(name.lower().endswith("_proxy") for name in os.environ)


def auto_route(url: str) -> Route:
    """The `auto` rule: lean for plain HTTP to `localhost` or a local IP literal with no proxy in between;
    the official client (httpx underneath) for anything else."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return Route(url, "official", "not a URL the lean client can parse")
    scheme = parts.scheme.lower()
    if scheme == "https":
        return Route(url, "official", "https (TLS is left to the library)")
    if scheme != "http":
        return Route(url, "official", f"scheme {scheme or 'missing'} (the lean client speaks http only)")
    if proxied(scheme, host):
        return Route(url, "official", "the environment's proxy settings send it through a proxy")
    if not local_host(host):
        return Route(url, "official", "a host name or public address (the lean client is for local servers)")
    return Route(url, "lean", "plain http to a local address, no proxy")


def choose_route(url: str, setting: ClientSetting, *, key: str) -> Route:
    """The route for `url` under a `client` setting (`key` names it in the reason): an explicit `lean` or
    `official` wins over the rule, except that the lean client cannot speak https (ValueError)."""
    if setting == "auto":
        return auto_route(url)
    if setting == "lean" and urlsplit(url).scheme.lower() == "https":
        raise ValueError(f"{key}: lean speaks plain HTTP only; {public_url(url)} needs {key} auto or official")
    return Route(url, setting, f"set by {key}")
