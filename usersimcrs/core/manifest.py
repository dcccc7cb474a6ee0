"""`manifest.json`: what ran, with which config (secrets removed), versions, seeds, usage, timings."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

from usersimcrs.version import __version__

MANIFEST = "manifest.json"
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


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / MANIFEST
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def write_manifest(run_dir: str | Path, manifest: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) so a crash never leaves half a manifest."""
    path = Path(run_dir) / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(scrub_secrets(manifest), indent=2, sort_keys=False, default=str), encoding="utf-8")
    os.replace(tmp, path)


def update_manifest(run_dir: str | Path, patch: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge `patch` into the manifest of `run_dir` and write it back."""
    merged = _deep_merge(read_manifest(run_dir), patch)
    write_manifest(run_dir, merged)
    return merged
