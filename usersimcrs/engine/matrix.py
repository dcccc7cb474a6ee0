"""Simulator x CRS x dataset matrices: every cell is an ordinary run folder inside the matrix folder.

The matrix YAML holds a base run config and three lists of named overrides::

    base: {seed: 42, conversations: 5, max_turns: 4, items: ..., llm: ...}
    simulators: [{name: agenda, simulator: {type: agenda}}, {name: biased, type: target_biased}]
    crs: [{name: pop, type: popularity}, {name: bm25, crs: {type: retrieval}}]
    datasets: [{name: ml25m, items: {...}, ratings: {...}}]

An entry is deep-merged into the base; the shorthand ``{name, type, ...}`` sets the simulator (or
CRS) section. Cells share the run seed (conversation i meets the same simulated user in every cell)
and one LLM response cache (the matrix folder's, unless the base sets one). A rerun skips completed cells
and resumes interrupted ones; up to `parallel_cells` cells run at once and the conversations in
flight across them stay within `concurrency`.
"""

from __future__ import annotations

import asyncio
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.config import RunConfig, absolutize
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.matrix_folder import MatrixFolder, cell_name
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.validation import validate
from usersimcrs.engine.runner import run_async
from usersimcrs.errors import ConfigError


class NamedOverride(BaseModel):
    """One simulator, CRS or dataset of the matrix: a name and the run-config keys it sets."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

    def overrides(self, section: str | None) -> dict[str, Any]:
        """The run-config patch: extra keys, with `type`/... shorthand moved into `section`."""
        extra = dict(self.model_extra or {})
        run_keys = set(RunConfig.model_fields)
        if section and "type" in extra:
            plugin = {k: v for k, v in extra.items() if k not in run_keys or k == "type"}
            rest = {k: v for k, v in extra.items() if k in run_keys and k != "type"}
            return {**rest, section: plugin}
        return extra


class RunDefaults(RunConfig):
    """The matrix's `base:` run config: every RunConfig key, typed; simulator and CRS come from the axes."""

    simulator: ConfigSection = Field(default_factory=dict)
    crs: ConfigSection = Field(default_factory=dict)


class MatrixDesign(BaseModel):
    """The simulation part of a matrix: base run config and the three axes (what runs, not what is scored)."""

    model_config = ConfigDict(extra="forbid")

    name: str = "matrix"
    base: RunDefaults = Field(default_factory=RunDefaults)
    simulators: list[NamedOverride] = Field(min_length=1)
    crs: list[NamedOverride] = Field(min_length=1)
    datasets: list[NamedOverride] = Field(default_factory=lambda: [NamedOverride(name="default")])
    concurrency: int = Field(4, ge=1, description="conversations in flight over all running cells")
    parallel_cells: int | None = Field(
        None, ge=1, description="cells run at once (default: as many as concurrency allows)"
    )

    def base_overrides(self) -> dict[str, Any]:
        """The keys the matrix file set under `base:` (defaults left out, so each cell's own defaults apply)."""
        return self.base.model_dump(mode="json", exclude_unset=True)


@dataclass
class CellPlan:
    """One cell: names on the three axes, its validated run config and folder."""

    simulator: str
    crs: str
    dataset: str
    config: RunConfig
    run_dir: Path

    @property
    def name(self) -> str:
        return cell_name(self.simulator, self.crs, self.dataset)


@dataclass
class MatrixSummary:
    """What a matrix invocation did per cell."""

    output_dir: Path
    cells: dict[str, str] = field(default_factory=dict)  # name -> completed | skipped | failed: <reason>
    gate: dict[str, list[str]] = field(default_factory=dict)  # name -> exceeded validity thresholds
    wall_s: float = 0.0


PLUGIN_SECTIONS = ("simulator", "crs")


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`patch` over `base`, merging nested mappings (lists and values replace).

    A simulator or CRS section whose `type` differs from the base's replaces it whole, so options of
    the base's plug-in never leak into another plug-in's (strict) options.
    """
    out = copy.deepcopy(base)
    for key, value in patch.items():
        replaces_plugin = (
            key in PLUGIN_SECTIONS
            and isinstance(value, dict)
            and isinstance(out.get(key), dict)
            and value.get("type", out[key].get("type")) != out[key].get("type")
        )
        if isinstance(value, dict) and isinstance(out.get(key), dict) and not replaces_plugin:
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_axis_names(config: MatrixDesign, source: str | Path) -> None:
    """Names on each axis are unique (they name the cell folders)."""
    for axis in ("simulators", "crs", "datasets"):
        names = [entry.name for entry in getattr(config, axis)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"{source}: {axis}: duplicate name(s) {', '.join(duplicates)}")


def plan_cells(config: MatrixDesign, output_dir: str | Path, source: str | Path) -> list[CellPlan]:
    """Every simulator x CRS x dataset cell with its validated, path-resolved run config."""
    matrix = MatrixFolder(Path(output_dir).resolve())
    base_dir = Path(source).resolve().parent
    cells = []
    for dataset in config.datasets:
        for simulator in config.simulators:
            for crs in config.crs:
                data = deep_merge(config.base_overrides(), dataset.overrides(None))
                data = deep_merge(data, simulator.overrides("simulator"))
                data = deep_merge(data, crs.overrides("crs"))
                name = cell_name(simulator.name, crs.name, dataset.name)
                data["name"] = name
                data["output"] = str(matrix.cell_dir(name))
                llm = data.setdefault("llm", {})
                if isinstance(llm, dict) and not llm.get("cache_dir"):
                    llm["cache_dir"] = str(matrix.llm_cache_dir)
                run_config = validate(RunConfig, data, source=f"{source}: cell {name}")
                run_config = absolutize(run_config, base_dir)
                cells.append(CellPlan(simulator.name, crs.name, dataset.name, run_config, matrix.cell_dir(name)))
    return cells


def is_complete(cell: CellPlan) -> bool:
    """A cell whose folder already holds a completed run of the same config."""
    manifest = RunFolder(cell.run_dir).read_manifest()
    return manifest.get("status") == "completed" and manifest.get("config_hash") == cell.config.config_hash()


def cell_budget(config: MatrixDesign, cells: int) -> tuple[int, int]:
    """(cells at once, conversations per cell) so that their product stays within `concurrency`."""
    parallel = min(cells, config.parallel_cells or config.concurrency, config.concurrency) or 1
    return parallel, max(1, config.concurrency // parallel)


async def run_cells(
    config: MatrixDesign,
    cells: list[CellPlan],
    summary: MatrixSummary,
    *,
    progress: bool,
    resources: SharedResources | None = None,
) -> None:
    """Run the unfinished cells, `parallel` at once; a cell that raises is recorded, the others go on.

    `resources`: the matrix command's read-only resources, shared by its cells (items read once, one BM25 index)."""
    todo = [c for c in cells if not is_complete(c)]
    for cell in cells:
        if cell not in todo:
            summary.cells[cell.name] = "skipped (complete)"
    parallel, per_cell = cell_budget(config, len(todo) or 1)
    gate = asyncio.Semaphore(parallel)

    async def one(cell: CellPlan) -> None:
        async with gate:
            run_config = cell.config.model_copy(
                update={"concurrency": min(per_cell, cell.config.concurrency), "progress": progress}
            )
            resume = RunFolder(cell.run_dir).has_dialogues()
            try:
                # each cell's progress is labelled with its name; cells side by side print plain lines (two
                # bars would overwrite each other), every interval even while no conversation finishes
                result = await run_async(
                    run_config,
                    cell.run_dir,
                    resume=resume,
                    source=cell.name,
                    resources=resources,
                    progress_label=cell.name,
                    plain_progress=parallel > 1,
                )
            except Exception as exc:  # a bad cell (unreachable CRS, config change) must not stop the matrix
                summary.cells[cell.name] = f"failed: {type(exc).__name__}: {exc}"
                return
            summary.cells[cell.name] = f"completed ({result.completed} ok, {result.failed} failed)"

    await asyncio.gather(*(one(c) for c in todo))


def write_index(
    output_dir: Path, config: MatrixDesign, cells: list[CellPlan], summary: MatrixSummary, judges: list[dict[str, Any]]
) -> None:
    """The matrix index: the cells (names, axes, folders, status) and the matrix settings."""
    matrix = MatrixFolder(output_dir)
    index = {
        "name": config.name,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "axes": {
            "simulators": [s.name for s in config.simulators],
            "crs": [c.name for c in config.crs],
            "datasets": [d.name for d in config.datasets],
        },
        "cells": [
            {
                "name": c.name,
                "simulator": c.simulator,
                "crs": c.crs,
                "dataset": c.dataset,
                "run_dir": matrix.cell_entry(c.name),
                "config_hash": c.config.config_hash(),
                "status": summary.cells.get(c.name, "not run"),
            }
            for c in cells
        ],
        "judges": judges,
        "wall_s": round(summary.wall_s, 3),
    }
    matrix.write_index(index)
