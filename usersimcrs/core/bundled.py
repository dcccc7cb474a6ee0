"""Data folders that ship with the toolkit (judge rubrics, the quickstart config and its tiny data).

In a source checkout they are the repository's top-level `rubrics/` and `configs/`; an installed
wheel carries the same files as `usersimcrs/_bundled/<name>/` (see setup.py). One function finds them.
"""

from __future__ import annotations

from pathlib import Path

from usersimcrs.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def bundled_dir(name: str) -> Path:
    """The folder of bundled data `name` ("rubrics" or "configs"), installed copy first."""
    for candidate in (PACKAGE_DIR / "_bundled" / name, PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise ConfigError(f"the toolkit's {name}/ folder is missing from this installation ({PACKAGE_DIR})")
