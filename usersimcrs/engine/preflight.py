"""Before the first conversation: is the CRS reachable? A dead URL stops the command with one line.

Without this check a CRS that is down (wrong port, server not started) turns every conversation
of a run into a failed record, hours later. Connectors with a `health()` method (the HTTP ones)
get one GET on their health URL, the probe's health step (`usersimcrs probe-crs`); in-process
connectors and baselines have nothing to reach and are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Iterable

from crs_connectors.base import HealthChecked, connector_spec
from usersimcrs.errors import ConnectorError, UserError
from usersimcrs.runtime.context import RunContext

_CLIENT_ERROR = re.compile(r"^HTTP 4\d\d\b")


def answered(reason: str) -> bool:
    """True when a failed health GET still reached a server: a 4xx answer (no health route, GET not
    allowed) shows the CRS is up. Connection errors, timeouts and 5xx mean it is not usable."""
    return bool(_CLIENT_ERROR.match(reason))


async def check_crs(
    section: dict[str, Any],
    *,
    source: str = "config",
    run_seed: int = 0,
    overrides: Mapping[str, str] | None = None,
) -> str | None:
    """Health-check the CRS a `crs:` section describes; returns its health answer (None: no check).

    Raises `UserError` with one line naming the URL when the CRS cannot be reached (`overrides`: the
    keys set with `--set`, blamed on the flag when their option is wrong).
    """
    spec = connector_spec(section, source, overrides)
    if not callable(getattr(spec.cls, "health", None)):
        return None
    connector = spec.build(RunContext(run_seed=run_seed), record=False)  # its own short-lived HTTP client
    if not isinstance(connector, HealthChecked):
        return None
    url = connector.health_url()
    try:
        return str(await connector.health())
    except ConnectorError as exc:
        reason = " ".join(str(exc).split())
        if answered(reason):
            return reason
        raise UserError(f"CRS at {url} is unreachable ({reason}); start it or fix crs.url") from None
    finally:
        await connector.close()


async def check_distinct(sections: Iterable[tuple[dict[str, Any], str]], *, run_seed: int = 0) -> int:
    """Check each distinct `crs:` section once (a matrix repeats them per cell); returns how many were checked."""
    seen: set[str] = set()
    for section, source in sections:
        key = json.dumps(section, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        await check_crs(section, source=source, run_seed=run_seed)
    return len(seen)
