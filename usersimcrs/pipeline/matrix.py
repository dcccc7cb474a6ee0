"""Run a simulator x CRS x dataset matrix, then judge, score and report every cell.

The whole matrix file is validated before the first cell runs: the base run config and every
cell's merged config, the `metrics:` section, and each `judges:` entry (judge name and options),
so a misspelled judge spec is one line at the start instead of a failure after hours of cells.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from pydantic import Field

from usersimcrs.config import read_yaml, validate_section
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.matrix import (
    CellPlan,
    MatrixDesign,
    MatrixSummary,
    check_axis_names,
    is_complete,
    plan_cells,
    run_cells,
    write_index,
)
from usersimcrs.engine.plugins import plugins_from_config
from usersimcrs.engine.preflight import check_distinct, check_llms
from usersimcrs.engine.runner import data_files, fallback_warnings
from usersimcrs.errors import ConfigError, UserError
from usersimcrs.metrics.config import MetricsConfig
from usersimcrs.pipeline.judge import JudgeRequest, build_judge, check_judge_llms, judge_async
from usersimcrs.pipeline.score import score

log = logging.getLogger("usersimcrs.data")


class MatrixConfig(MatrixDesign):
    """A matrix file: the design (base, axes, concurrency) and what to do with the finished cells."""

    metrics: MetricsConfig = Field(
        default_factory=MetricsConfig, description="the `metrics:` options (docs/metrics.md)"
    )
    judges: list[JudgeRequest] = Field(default_factory=list, description="judges run on every cell (docs/judges.md)")
    report: bool = Field(True, description="write the matrix report.html at the end")


def load_matrix_config(path: str | Path) -> MatrixConfig:
    """Read and validate a matrix YAML, judges included (errors name the file and key)."""
    config: MatrixConfig = validate_section(MatrixConfig, read_yaml(path), source=str(path), prefix="matrix")
    check_axis_names(config, path)
    for number, spec in enumerate(config.judges):
        try:
            build_judge(spec)
        except UserError as exc:  # a judge that cannot be built is a config error of this entry
            raise ConfigError(f"{path}: judges[{number}] ({spec.judge}): {exc}") from None
    return config


def plan_matrix(config: MatrixConfig, output_dir: str | Path, source: str | Path) -> list[CellPlan]:
    """Every cell with its validated run config, simulator and CRS options checked (nothing runs yet)."""
    cells = plan_cells(config, output_dir, source)
    for cell in cells:
        plugins_from_config(cell.config, source=f"{source}: cell {cell.name}")
    return cells


async def evaluate_cell(cell: CellPlan, config: MatrixConfig, resources: SharedResources | None = None) -> list[str]:
    """Judge (resumable) and score one finished cell; returns its gate messages (judgings with too many
    failed judgments, then the metrics' validity gate). `resources`: the matrix command's (items, classifier)."""
    messages = []
    for spec in config.judges:
        judged = await judge_async(cell.run_dir, spec)
        if judged.exceeds_failed_share:
            messages.append(
                f"judge {judged.judge}: {judged.failed} of {judged.asked} judgments failed, "
                f"more than max_failed_share {judged.max_failed_share:g}"
            )
    return messages + score(cell.run_dir, config.metrics, resources=resources).gate


async def run_matrix_async(
    config: MatrixConfig, output_dir: str | Path, *, source: str | Path, progress: bool = True, preflight: bool = True
) -> MatrixSummary:
    """Run (or resume) a matrix: cells, then judges and metrics per cell, then the matrix report.

    Holds the matrix folder's writer lock throughout (each cell's run also holds the cell's). `preflight`:
    check the CRSs and the LLM servers of the cells and judges before the first cell.
    """
    matrix = MatrixFolder(output_dir)
    with matrix.lock("matrix"):
        return await _run_matrix_locked(config, matrix, source=source, progress=progress, preflight=preflight)


async def preflight_matrix(config: MatrixConfig, cells: list[CellPlan], source: str | Path) -> None:
    """Before the first cell: every CRS the cells to run talk to, the LLM servers their simulators and CRSs
    call and those of the judges (each server once); one that cannot be used stops the matrix with one line."""
    await check_distinct([(cell.config.crs, cell.name) for cell in cells])
    checked: dict = {}
    for cell in cells:
        await check_llms(cell.config, source=f"{source}: cell {cell.name}", checked=checked)
        for spec in config.judges:
            await check_judge_llms(spec, cell.config.model_dump(mode="json"), checked=checked)


async def _run_matrix_locked(
    config: MatrixConfig, matrix: MatrixFolder, *, source: str | Path, progress: bool, preflight: bool = True
) -> MatrixSummary:
    output_dir = matrix.path
    resources = SharedResources()  # the cells, their scoring and the report read each item file once
    cells = plan_matrix(config, output_dir, source)
    to_run = [cell for cell in cells if not is_complete(cell)]
    for line in dict.fromkeys(line for cell in to_run for line in fallback_warnings(data_files(cell.config))):
        log.warning(line)  # once per data file, not once per cell
    if preflight:  # an unreachable CRS or LLM server stops the matrix with one line before any cell runs
        await preflight_matrix(config, to_run, source)
    else:  # nor when its cells are judged
        config = config.model_copy(
            update={"judges": [s.model_copy(update={"preflight": False}) for s in config.judges]}
        )
    judges = [spec.model_dump(exclude_defaults=True) for spec in config.judges]
    summary = MatrixSummary(output_dir=output_dir)
    started = time.perf_counter()
    write_index(output_dir, config, cells, summary, judges)
    try:
        await run_cells(config, cells, summary, progress=progress, resources=resources)
    finally:
        summary.wall_s = time.perf_counter() - started
        write_index(output_dir, config, cells, summary, judges)
    finished = [c for c in cells if RunFolder(c.run_dir).has_dialogues()]
    for cell in finished:
        messages = await evaluate_cell(cell, config, resources)
        if messages:
            summary.gate[cell.name] = messages
    summary.wall_s = time.perf_counter() - started
    write_index(output_dir, config, cells, summary, judges)
    if config.report and finished:
        # lazy: matplotlib only when a report is written
        from usersimcrs.report.matrix_report import build_matrix_report

        # every written cell was scored with config.metrics just above: the report reads those tables
        # (config=None) instead of computing each cell's metrics a second time
        build_matrix_report(output_dir, config=None, seed=config.base.seed, resources=resources)
    return summary


def run_matrix(
    path: str | Path, output_dir: str | Path | None = None, *, progress: bool = True, preflight: bool = True
) -> MatrixSummary:
    """Load a matrix YAML and run it into `output_dir` (default runs/<name>); works inside a running loop too.
    `preflight=False` skips the checks of the CRSs and LLM servers before the first cell."""
    config = load_matrix_config(path)
    output = Path(output_dir) if output_dir is not None else Path("runs") / config.name
    cells_loop = config.base.event_loop
    return run_blocking(
        run_matrix_async(config, output, source=path, progress=progress, preflight=preflight), cells_loop
    )


__all__ = ["MatrixConfig", "evaluate_cell", "load_matrix_config", "plan_matrix", "run_matrix", "run_matrix_async"]
