"""Before the first conversation: is the CRS reachable, and each LLM server the run calls? A dead URL
stops the command with one line.

Without this check a CRS or an LLM server that is down (wrong port, server not started) turns every
conversation of a run into a failed record, hours later. Connectors with a `health()` method (the
HTTP ones) get one GET on their health URL, the probe's health step (`usersimcrs probe-crs`);
in-process connectors and baselines have nothing to reach and are skipped. The LLM servers are
those of the components the simulator and the CRS declare (`llm_components()`), checked by
`usersimcrs.llm.preflight` (the embedded model has nothing to reach).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Iterable

from crs_connectors.base import HealthChecked, connector_spec
from usersimcrs.config import RunConfig
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.engine.plugins import llm_components
from usersimcrs.errors import ConnectorError, UserError
from usersimcrs.llm import preflight as llm_preflight
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext

_CLIENT_ERROR = re.compile(r"^HTTP 4\d\d\b")


def answered(reason: str) -> bool:
    """True when a failed health GET still reached a server: a 4xx answer (no health route, GET not
    allowed) shows the CRS is up. Connection errors, timeouts and 5xx mean it is not usable."""
    return bool(_CLIENT_ERROR.match(reason))


async def check_crs(
    section: ConfigSection,
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


async def check_distinct(sections: Iterable[tuple[ConfigSection, str]], *, run_seed: int = 0) -> int:
    """Check each distinct `crs:` section once (a matrix repeats them per cell); returns how many were checked."""
    seen: set[str] = set()
    for section, source in sections:
        key = json.dumps(section, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        await check_crs(section, source=source, run_seed=run_seed)
    return len(seen)


async def check_llms(
    config: RunConfig, *, source: str = "config", checked: llm_preflight.Checked | None = None
) -> list[str]:
    """Preflight the LLM servers the run's simulator and CRS call (each once; `checked`: those a command
    checked for earlier cells); returns the URLs checked. `UserError` naming the URL when one cannot be used."""
    components = llm_components(config, source)
    if not components:
        return []
    provider = LLMProvider(config.llm, config.llm_components)
    try:
        return await llm_preflight.check_llms(provider, components, checked=checked)
    finally:
        await provider.aclose()
