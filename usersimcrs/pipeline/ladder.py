"""The sensitivity ladder as a library call: one simulator against reference CRSs of known quality order.

`run_ladder(CONFIG, DIR)` plans a matrix of the config's simulator x the ladder's rungs (oracle,
oracle_mix30, oracle_mix70, random, broken: `crs_connectors/baselines/ladder.py`) on the config's
data, runs it with the matrix engine (every cell shares the run seed, so conversation i meets the
same user with the same seed on every rung: a paired design), scores the cells with the config's
metrics and judges, and writes DIR/ladder.json (`LadderResult`) and DIR/report.html. CONFIG is a run
config (its simulator) or a matrix config (its metrics and judges; one simulator, the first
dataset). A metric that cannot be computed for some rung stops it with one line naming both.
See docs/ladder.md.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.analysis.compare import LOWER_IS_BETTER, combined_table, comparison_metrics, discover_cells
from usersimcrs.analysis.ladder import LadderResult, score_ladder
from usersimcrs.config import RunConfig, read_yaml, validate_section
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.core.storage import write_atomic
from usersimcrs.engine.loop import run_blocking
from usersimcrs.errors import ConfigError, UserError
from usersimcrs.metrics.validity import subset_masks
from usersimcrs.pipeline.judge import JudgeRequest
from usersimcrs.pipeline.matrix import MatrixConfig, load_matrix_config, run_matrix_async

RUNGS = ("oracle", "oracle_mix30", "oracle_mix70", "random", "broken")
"""The ladder's reference CRSs, best first (their order is known by construction)."""
DEFAULT_CONVERSATIONS = 100
RUN_ONLY_KEYS = ("name", "output", "simulator", "crs")


class LadderRequest(BaseModel):
    """How to run a ladder: its size, the scores to read, judges to add, the statistics' resamples."""

    model_config = ConfigDict(extra="forbid")

    conversations: int | None = Field(
        DEFAULT_CONVERSATIONS, ge=2, description="conversations per rung (None: the config's own number)"
    )
    metrics: list[str] | None = Field(None, description="scores to read (default: headline metrics and judge scores)")
    judges: list[JudgeRequest] = Field(
        default_factory=list, description="judges run on every rung, besides the config's"
    )
    simulator: str | None = Field(None, description="with a matrix config of several simulators: which one")
    rungs: list[str] = Field(default_factory=lambda: list(RUNGS), min_length=3, description="connectors, best first")
    resamples: int = Field(2000, ge=100, description="bootstrap resamples of the CIs and permutation tests")
    simulations: int = Field(2000, ge=100, description="simulated studies per sample size of the power estimate")
    seed: int = Field(0, description="seed of the resampling (the conversations use the config's seed)")
    progress: bool = True


@dataclass
class LadderOutcome:
    """A finished ladder: its figures and where they were written."""

    result: LadderResult
    folder: Path
    json_path: Path
    report_path: Path


def _plugin_name(section: ConfigSection) -> str:
    """A cell-name-safe name for a simulator section (its type; a dotted path keeps its last part)."""
    name = re.split(r"[.:]", str(section.get("type", "simulator")))[-1]
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", name).lstrip("_.-") or "simulator"


def _rung_axis(request: LadderRequest) -> list[dict[str, Any]]:
    """The CRS axis: one entry per rung; the conversation count is set last, so a simulator's own does not win."""
    size = {} if request.conversations is None else {"conversations": request.conversations}
    return [{"name": rung, "crs": {"type": rung}, **size} for rung in request.rungs]


def ladder_design(path: str | Path, request: LadderRequest) -> MatrixConfig:
    """The ladder as a matrix config: the config's simulator (one), its first dataset, the rungs as the CRS axis."""
    data = read_yaml(path)
    judges = [spec.model_dump(exclude_defaults=True) for spec in request.judges]
    if "simulators" in data:  # a matrix config: its metrics and judges
        matrix = load_matrix_config(path)
        simulators = [s for s in matrix.simulators if request.simulator in (None, s.name)]
        if not simulators:
            raise ConfigError(f"{path}: no simulator named {request.simulator!r}")
        if len(simulators) > 1:
            names = ", ".join(s.name for s in simulators)
            raise ConfigError(f"{path}: {len(simulators)} simulators ({names}); choose one with --simulator")
        design = matrix.model_dump(mode="json", exclude_unset=True)
        design.update(
            name=f"ladder-{matrix.name}",
            simulators=[simulators[0].model_dump(mode="json")],
            datasets=[matrix.datasets[0].model_dump(mode="json")],
            judges=[*design.get("judges", []), *judges],
            report=False,
        )
    else:  # a run config: its simulator, default metrics
        validate_section(RunConfig, data, source=str(path))  # errors name the file and key, as `run` does
        section = dict(data["simulator"])
        design = {
            "name": f"ladder-{data.get('name', 'run')}",
            "base": {k: v for k, v in data.items() if k not in RUN_ONLY_KEYS},
            "simulators": [{"name": _plugin_name(section), "simulator": section}],
            "concurrency": data.get("concurrency", 4),
            "judges": judges,
            "report": False,
        }
    design["crs"] = _rung_axis(request)
    config: MatrixConfig = validate_section(MatrixConfig, design, source=str(path), prefix="ladder")
    return config


def ladder_scores(
    table: pd.DataFrame, rungs: list[str], selected: list[str] | None, source: str
) -> tuple[list[str], dict[str, str]]:
    """The scores to read and those left out with why. A selected score that some rung has no value for stops the
    ladder (`UserError` naming the score and the rung); by default (the headline metrics and judge scores measured on
    some rung) such a score is left out and said so (e.g. jaccard when the oracle rung shows one list)."""
    scores, left_out = [], {}
    for score in comparison_metrics(table, selected):
        values = pd.to_numeric(table[score], errors="coerce")
        missing = [rung for rung in rungs if not values[table["crs"] == rung].notna().any()]
        if not missing:
            scores.append(score)
            continue
        rung = missing[0]
        reason = (
            f"cannot be computed for rung {rung} (0 of {int((table['crs'] == rung).sum())} conversations have a value)"
        )
        if selected:
            raise UserError(f"{source}: {score} {reason}; choose other scores with --metrics")
        left_out[score] = reason
    return scores, left_out


async def run_ladder_async(path: str | Path, output: str | Path, request: LadderRequest | None = None) -> LadderOutcome:
    """Run (or resume) the ladder of CONFIG into `output`, then write ladder.json and report.html there."""
    request = request or LadderRequest()
    config = ladder_design(path, request)
    folder = MatrixFolder(output)
    started = time.perf_counter()
    with folder.lock("ladder"):
        summary = await run_matrix_async(config, folder.path, source=path, progress=request.progress)
        failed = {name: status for name, status in summary.cells.items() if status.startswith("failed")}
        if failed:
            name, status = next(iter(failed.items()))
            raise UserError(f"{path}: ladder rung {name} {status}")
        table, _ = combined_table(discover_cells(folder.path), None, SharedResources())
        table = table[subset_masks(table)["all"]]  # every conversation a rung took part in (its failures count)
        scores, left_out = ladder_scores(table, request.rungs, request.metrics, str(path))
        result = LadderResult(
            config=str(path),
            simulator=config.simulators[0].name,
            dataset=config.datasets[0].name,
            rungs=list(request.rungs),
            conversations_per_rung=int(table.groupby("crs").size().max()),
            run_seed=config.base.seed,
            seed=request.seed,
            scores={
                score: score_ladder(
                    table,
                    request.rungs,
                    score,
                    higher_is_better=score not in LOWER_IS_BETTER,
                    n_resamples=request.resamples,
                    simulations=request.simulations,
                    seed=request.seed,
                )
                for score in scores
            },
            left_out=left_out,
            wall_s=0.0,
        )
        result.wall_s = round(time.perf_counter() - started, 3)
        write_atomic(folder.ladder_path, result.model_dump_json(indent=2))
        # lazy: matplotlib only when a report is written
        from usersimcrs.report.ladder_report import build_ladder_report

        report = build_ladder_report(result, folder)
    return LadderOutcome(result=result, folder=folder.path, json_path=folder.ladder_path, report_path=report)


def run_ladder(path: str | Path, output: str | Path, request: LadderRequest | None = None) -> LadderOutcome:
    """Synchronous `run_ladder_async` (inside a running event loop it runs on a worker thread's loop)."""
    return run_blocking(run_ladder_async(path, output, request))


__all__ = ["RUNGS", "LadderOutcome", "LadderRequest", "LadderResult", "ladder_design", "run_ladder", "run_ladder_async"]
