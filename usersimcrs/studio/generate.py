"""Simulated conversations to annotate, made once into STUDY/conversations by the matrix engine.

`tasks.annotate.generate` is a small matrix design (base, simulators, optional crs and datasets);
the study's items and ratings fill in `base`, its CRSs the `crs` axis. A rerun finds the
completed cells and does nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from usersimcrs.core.validation import validate
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.matrix import is_complete
from usersimcrs.studio.config import Study


def matrix_spec(study: Study) -> dict[str, Any]:
    """The matrix file (as a mapping) that `generate` stands for."""
    task = study.config.tasks.annotate
    assert task is not None and task.generate is not None
    spec = task.generate
    base: dict[str, Any] = {"seed": study.config.seed, "progress": False}
    config = study.config
    if config.items is not None:
        base["items"] = config.items.model_dump(exclude_none=True)
    if config.ratings is not None:
        base["ratings"] = config.ratings.model_dump(exclude_none=True)
    base["llm"] = config.llm.model_dump(exclude_unset=True)
    base.update(spec.base)
    crs = spec.crs or [{"name": c.name, **(c.section() or {"crs": _from_config(study, c.name)})} for c in config.crs]
    out: dict[str, Any] = {
        "name": f"{study.name}-conversations",
        "base": base,
        "simulators": spec.simulators,
        "crs": crs,
        "concurrency": spec.concurrency,
        "report": False,
    }
    if spec.datasets:
        out["datasets"] = spec.datasets
    return out


def _from_config(study: Study, name: str) -> dict[str, Any]:
    return dict(study.run_config(name).crs)


def ensure_annotation_source(study: Study, *, progress: bool = False) -> Path | None:
    """Run the `generate` matrix into STUDY/conversations unless it is complete; returns the folder."""
    # lazy: pandas (the matrix pipeline) only when the study generates its conversations
    from usersimcrs.pipeline.matrix import MatrixConfig, plan_matrix, run_matrix_async

    task = study.config.tasks.annotate
    if task is None or task.generate is None:
        return None
    folder = study.annotate_source()
    assert folder is not None
    config = validate(MatrixConfig, matrix_spec(study), source=f"{study.path}: tasks.annotate.generate")
    if all(is_complete(cell) for cell in plan_matrix(config, folder, study.path)):
        return folder  # made by an earlier start
    run_blocking(run_matrix_async(config, folder, source=study.path, progress=progress))
    return folder
