"""Plan a study from a pilot: conversations per cell for 80% power, and the tokens and cost of the full matrix.

A pilot is a small matrix (or a ladder) run with the cells of the full study. For one metric (the
headline by default), each CRS and the next in every simulator's ranking gets the conversations
per cell needed to see their observed paired difference with 80% power (`analysis.power`); the
study's size is the largest of these figures (every adjacent pair that differs at all can then be
told apart). Its cost: per cell, the LLM tokens per conversation the pilot's simulation spent
(simulated users, LLM CRSs; from the cell's manifest) and the judges of the matrix, estimated by
the judging dry run (`judges/estimate.py`) — both times the planned conversations, priced where a
price is known (`--price`, the bundled list, free for local backends), else unknown (None), never 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from usersimcrs.analysis.compare import combined_table, compare, comparison_metrics, discover_cells
from usersimcrs.core.matrix_folder import Cell, MatrixFolder
from usersimcrs.core.shared_resources import SharedResources
from usersimcrs.errors import UserError
from usersimcrs.judges.estimate import price_for
from usersimcrs.llm.config import LLMConfig
from usersimcrs.metrics.validity import subset_masks
from usersimcrs.pipeline.judge import JudgeRequest, judge


class PairNeed(BaseModel):
    """A CRS and the next in a simulator's ranking: their difference and the conversations per cell it needs."""

    dataset: str
    simulator: str
    crs: str
    next_crs: str
    n_pairs: int
    mean_difference: float | None
    n_for_80_power: int | None
    power_notes: str | None = None


class Spend(BaseModel):
    """LLM tokens (and cost, None when a price is unknown) per conversation of one cell, for one purpose."""

    purpose: str = Field(description="'simulation' or 'judge <name>'")
    prompt_tokens: float
    completion_tokens: float
    cost_usd: float | None
    source: str = Field(description="where the figure comes from")


class CellCost(BaseModel):
    """What one conversation of a cell is expected to spend."""

    cell: str
    pilot_conversations: int
    per_conversation: list[Spend]


class StudyPlan(BaseModel):
    """Conversations per cell for 80% power on `metric`, and what the full matrix would spend."""

    pilot: str
    metric: str
    pairs: list[PairNeed]
    conversations_per_cell: int | None
    reason: str | None = Field(None, description="why conversations_per_cell is missing")
    cells: list[CellCost]
    total_conversations: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None = Field(None, description="None when a price is unknown or no size could be planned")
    notes: list[str] = Field(default_factory=list)


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def study_size(pairs: list[PairNeed]) -> tuple[int | None, str | None]:
    """The largest figure over the adjacent pairs (None with the reason when no pair has one)."""
    figures = [p.n_for_80_power for p in pairs if p.n_for_80_power is not None]
    if figures:
        return max(figures), None
    reasons = "; ".join(f"{p.crs} vs {p.next_crs}: {p.power_notes}" for p in pairs) or "no two CRSs to compare"
    return None, f"no adjacent pair has a figure ({reasons})"


def scaled(size: int | None, per_conversation: list[float | None]) -> float | None:
    """`size` times the sum of per-conversation figures; None without a size or with an unknown figure."""
    if size is None or None in per_conversation:
        return None
    return size * sum(v for v in per_conversation if v is not None)


def simulation_spend(cell: Cell, price: tuple[float, float] | None) -> Spend:
    """Tokens per conversation the pilot's simulation of `cell` spent (its manifest), priced per model."""
    manifest = cell.folder.read_manifest()
    conversations = max(1, int((manifest.get("dialogues") or {}).get("completed", 0)))
    usage = manifest.get("llm") or {}
    llm = LLMConfig.model_validate((manifest.get("config") or {}).get("llm") or {})
    cost: float | None = 0.0
    for model, used in (usage.get("by_model") or {}).items():
        listed = price_for(llm, str(model).partition(":")[2] or str(model), price)
        spent = (
            listed.cost(int(used.get("prompt_tokens", 0)), int(used.get("completion_tokens", 0))) if listed else None
        )
        cost = None if cost is None or spent is None else cost + spent
    return Spend(
        purpose="simulation",
        prompt_tokens=int(usage.get("prompt_tokens", 0)) / conversations,
        completion_tokens=int(usage.get("completion_tokens", 0)) / conversations,
        cost_usd=None if cost is None else cost / conversations,
        source=f"the pilot's {conversations} conversations (responses from the LLM cache are not counted)",
    )


def judge_spend(cell: Cell, spec: dict[str, Any], price: tuple[float, float] | None) -> Spend:
    """Tokens (and cost) per conversation of one judge on `cell`: the judging dry run over every conversation the
    judge would score, judged in the pilot or not."""
    request = JudgeRequest.model_validate(
        {**spec, "dry_run": True, "as_if_unjudged": True, "price": price or spec.get("price")}
    )
    result = judge(cell.run_dir, request)
    estimate, planned = result.dry_run, max(1, result.to_judge)
    assert estimate is not None  # a dry run always returns its estimate
    return Spend(
        purpose=f"judge {request.judge}",
        prompt_tokens=estimate.prompt_tokens / planned,
        completion_tokens=estimate.completion_tokens / planned,
        cost_usd=None if estimate.cost_usd is None else estimate.cost_usd / planned,
        source=f"judging dry-run estimate over {result.to_judge} conversations",
    )


def plan_study(
    pilot: str | Path,
    *,
    metric: str | None = None,
    price: tuple[float, float] | None = None,
    simulations: int = 2000,
    seed: int = 0,
) -> StudyPlan:
    """The plan of a full study from the pilot matrix (or ladder) folder `pilot` (see module doc)."""
    folder = MatrixFolder(pilot)
    cells = discover_cells(folder.path)
    table, _ = combined_table(cells, None, SharedResources())
    if table.empty:
        raise UserError(f"{pilot}: the pilot has no conversations to plan from")
    table = table[subset_masks(table)["all"]]
    chosen = comparison_metrics(table, [metric] if metric else None)
    if not chosen:
        raise UserError(f"{pilot}: no metric was measured in the pilot; name one with --metric")
    metric = chosen[0]
    comparison = compare(
        table, [metric], tests=("permutation",), n_resamples=2000, seed=seed, power_simulations=simulations
    )
    pairs = [
        PairNeed(
            dataset=str(r["dataset"]),
            simulator=str(r["simulator"]),
            crs=str(r["crs"]),
            next_crs=str(r["next_crs"]),
            n_pairs=int(r["n_pairs"]),
            mean_difference=_number(r["mean_difference"]),
            n_for_80_power=None if pd.isna(r["n_for_80_power"]) else int(r["n_for_80_power"]),
            power_notes=r["power_notes"] or None,
        )
        for r in comparison.power.to_dict("records")
    ]
    size, reason = study_size(pairs)
    judges = (folder.read_index() or {}).get("judges") or []
    costs = [
        CellCost(
            cell=cell.name,
            pilot_conversations=int((cell.folder.read_manifest().get("dialogues") or {}).get("completed", 0)),
            per_conversation=[simulation_spend(cell, price), *(judge_spend(cell, spec, price) for spec in judges)],
        )
        for cell in cells
    ]
    notes = [] if judges else ["the pilot's matrix runs no judges: judging is not in the estimate"]
    spends = [spend for cost in costs for spend in cost.per_conversation]
    prompt = scaled(size, [s.prompt_tokens for s in spends])
    completion = scaled(size, [s.completion_tokens for s in spends])
    cost = scaled(size, [s.cost_usd for s in spends])
    return StudyPlan(
        pilot=str(pilot),
        metric=metric,
        pairs=pairs,
        conversations_per_cell=size,
        reason=reason,
        cells=costs,
        total_conversations=None if size is None else size * len(cells),
        prompt_tokens=None if prompt is None else round(prompt),
        completion_tokens=None if completion is None else round(completion),
        cost_usd=None if cost is None else round(cost, 6),
        notes=notes,
    )


__all__ = ["CellCost", "PairNeed", "Spend", "StudyPlan", "plan_study", "study_size"]
