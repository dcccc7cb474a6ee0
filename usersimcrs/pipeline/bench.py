"""The performance harness (B1-B6) of a source checkout's `benchmarks/` folder.

`benchmarks` is not installed with the package (a distribution of that name exists on the package
index); from a source checkout it is found next to the `usersimcrs` package.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from usersimcrs.core.bundled import PACKAGE_DIR
from usersimcrs.errors import UserError


def find_harness() -> ModuleType | None:
    """`benchmarks.harness` when importable or when this is a source checkout; else None."""
    try:
        return importlib.import_module("benchmarks.harness")
    except ImportError:
        pass
    root = PACKAGE_DIR.parent
    if not (root / "benchmarks" / "harness.py").is_file():
        return None
    sys.path.insert(0, str(root))
    return importlib.import_module("benchmarks.harness")


def bench(arguments: list[str]) -> int:
    """Run the benchmarks with the harness's own arguments (`--quick`, `--output`, ...); its exit status."""
    harness = find_harness()
    if harness is None:
        raise UserError("the benchmarks ship with the source repository only: run `python -m benchmarks` in a checkout")
    return int(harness.main(arguments))
