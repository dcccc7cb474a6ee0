"""The performance harness of a source checkout's `benchmarks/` folder (real workload, B1-B7).

`benchmarks` is not installed with the package (a distribution of that name exists on the package
index); from a source checkout it is found next to the `usersimcrs` package. Results go only to the
folder the caller names, never over a file the repository tracks (the committed
`benchmarks/results.json` is replaced only when asked to, by whoever regenerates docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.bundled import PACKAGE_DIR
from usersimcrs.errors import UserError

RESULTS_FILE = "results.json"


class BenchOptions(BaseModel):
    """What `usersimcrs bench` runs and where its results go."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["tiny", "quick", "full"] = "full"
    output: Path | None = Field(None, description="folder for results.json; None: print only")
    jitter_ms: float = Field(0.0, ge=0)
    keep: bool = False
    replace_committed: bool = Field(False, description="allow writing over a results.json the repository tracks")
    toolkit_cpus: str | None = Field(None, description="CPU list (e.g. 0,1) the harness and its runs keep to")
    server_cpus: str | None = Field(None, description="CPU list (e.g. 2-7) the benchmark servers keep to")


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


def tracked_by_git(path: Path) -> bool:
    """Whether git tracks `path` (False outside a repository or without git)."""
    if not path.exists():
        return False
    try:
        done = subprocess.run(
            ["git", "ls-files", "--error-unmatch", path.name],
            cwd=path.parent,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def check_output(options: BenchOptions) -> None:
    """Refuse, before any run, an output folder whose results.json is a committed file (unless asked)."""
    if options.output is None or options.replace_committed:
        return
    target = options.output / RESULTS_FILE
    if tracked_by_git(target):
        raise UserError(
            f"{target} is a committed file; name another folder with --output "
            "(--replace-committed regenerates the committed figures)"
        )


def bench(options: BenchOptions) -> int:
    """Run the benchmarks; their exit status (1 when a target was missed)."""
    harness = find_harness()
    if harness is None:
        raise UserError("the benchmarks ship with the source repository only: run `python -m benchmarks` in a checkout")
    check_output(options)
    settings = options.model_dump(include={"jitter_ms", "keep", "toolkit_cpus", "server_cpus"})
    return int(harness.run(options.mode, options.output, **settings))
