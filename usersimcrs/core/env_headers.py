"""HTTP header values taken from environment variables, so secrets never sit in a config file."""

from __future__ import annotations

import os

from usersimcrs.errors import ConfigError


def headers_from_env(headers_env: dict[str, str], *, section: str) -> dict[str, str]:
    """`{header: ENV_NAME}` -> `{header: value}`; an unset variable is a one-line ConfigError naming
    `section.headers_env.header` (e.g. `llm.headers_env.X-Org`)."""
    headers = {}
    for header, env_name in headers_env.items():
        value = os.environ.get(env_name)
        if value is None:
            raise ConfigError(f"{section}.headers_env.{header}: environment variable {env_name} is not set")
        headers[header] = value
    return headers
