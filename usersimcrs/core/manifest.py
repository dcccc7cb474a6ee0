"""What a manifest records beyond the config: the environment, and the config with secret values removed.

`RunFolder` (core/run_folder.py) reads and writes the manifest itself."""

from __future__ import annotations

import hashlib
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from usersimcrs.version import __version__

_SECRET_PARTS = re.compile(r"(?:^|_)(?:api_?key|token|secret|password|passwd|authorization|auth|cookie|bearer)(?:_|$)")


def is_secret_key(key: object) -> bool:
    """True for keys that name a secret (`api_key`, `access_token`, `X-Auth-Token`); counters such
    as `prompt_tokens` and keys naming env vars (`*_env`) are not secrets."""
    if names_env_vars(key):
        return False
    return bool(_SECRET_PARTS.search(re.sub(r"[^a-z0-9]+", "_", str(key).lower())))


def names_env_vars(key: object) -> bool:
    """Keys like `api_key_env` or `headers_env` hold names of environment variables, never their values."""
    return re.sub(r"[^a-z0-9]+", "_", str(key).lower()).endswith("_env")


def scrub_secrets(value: Any) -> Any:
    """Drop values of keys that look like secrets; sections naming env vars (`*_env`) are kept whole,
    since they hold variable names (e.g. `headers_env: {X-Api-Token: MY_TOKEN_VAR}`)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if names_env_vars(key):
                out[key] = item
            elif is_secret_key(key):
                out[key] = "<removed>"
            else:
                out[key] = scrub_secrets(item)
        return out
    if isinstance(value, list):
        return [scrub_secrets(v) for v in value]
    return value


def file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's content (hex), read in blocks: what the manifest records of each data file,
    so that a process reading "the same" file elsewhere (a Ray node) can tell that it is."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def git_commit(path: Path | None = None) -> str | None:
    """The current git commit of the project checkout, when there is one."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=path or Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    """Versions that decide results: toolkit, Python, platform."""
    return {
        "usersimcrs": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
    }
