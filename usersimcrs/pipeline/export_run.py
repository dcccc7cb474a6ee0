"""`export_run_file`: a judge's stored scores as a CRSArena-Eval run file, for the public meta-evaluation
interface or for `meta-eval --judgments`.

Judgment names that are CRSArena-Eval aspects (aliases allowed; turn scores ``<aspect>@<turn_ind>``)
map to themselves; `aspect_map` maps other names (``overall_satisfaction=dialogue_overall``). A
judgment whose recorded scale differs from the aspect's is rescaled linearly onto it (Pearson and
Spearman do not change; the file stays inside the official ranges). Failed judgments (no value)
are left out and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pydantic import BaseModel, Field

from usersimcrs.core.crsarena_eval import (
    BY_NAME,
    OFFICIAL,
    RunFileConversation,
    RunFileTurn,
    canonical,
    split_score_name,
    write_run_file,
)
from usersimcrs.errors import DataError, UserError
from usersimcrs.judges.base import JudgmentRecord
from usersimcrs.pipeline.sources import load_sources


class RunFileExportResult(BaseModel):
    """What `export-run` wrote."""

    output: str
    judge: str
    model: str
    conversations: int
    predictions: dict[str, int] = Field(description="predictions written per aspect")
    failed: int = Field(description="judgments without a value, left out")
    rescaled: int = Field(description="values moved linearly from the judgment's scale onto the aspect's")


def parse_aspect_map(items: Sequence[str]) -> dict[str, str]:
    """``name=aspect`` pairs (comma-separated or repeated) -> {judgment name: aspect}."""
    out: dict[str, str] = {}
    for item in items:
        for part in filter(None, (p.strip() for p in item.split(","))):
            name, sep, target = part.partition("=")
            if not sep or not name.strip() or canonical(target.strip()) not in BY_NAME:
                raise UserError(f"--map {part!r}: expected judgment_name=aspect with an aspect of {', '.join(BY_NAME)}")
            out[name.strip()] = canonical(target.strip())
    return out


def _choose(
    records: list[JudgmentRecord], judge: str | None, model: str | None, names: dict[str, str]
) -> tuple[str, str]:
    def usable(r: JudgmentRecord) -> bool:
        base, _ = split_score_name(str(r.get("name", "")))
        return canonical(base) in BY_NAME or base in names

    pairs = sorted({(str(r.get("judge")), str(r.get("model") or "")) for r in records if usable(r)})
    if judge is not None:
        pairs = [p for p in pairs if p[0] == judge]
    if model is not None:
        pairs = [p for p in pairs if p[1] == model]
    judges = sorted({j for j, _ in pairs})
    if not pairs:
        raise DataError(
            "no judgments of CRSArena-Eval aspects"
            + (f" by judge {judge!r}" if judge else "")
            + (f" with model {model!r}" if model else "")
            + "; map other names with --map name=aspect"
        )
    if len(judges) > 1:
        raise UserError(f"judgments of several judges ({', '.join(judges)}); choose one with --judge")
    if len(pairs) > 1:
        raise UserError(f"judge {judges[0]} ran with several models ({', '.join(m for _, m in pairs)}); choose --model")
    return pairs[0]


def export_run_file(
    run: str | Path,
    output: str | Path,
    *,
    judge: str | None = None,
    model: str | None = None,
    aspect_map: dict[str, str] | None = None,
    all_aspects: bool = False,
) -> RunFileExportResult:
    """Write the chosen judge's aspect scores of every conversation under `run` as a run file."""
    names = aspect_map or {}
    records = [r for source in load_sources(run) for r in source.run.judgments]
    judge_name, model_name = _choose(records, judge, model, names)
    wanted = set(BY_NAME) if all_aspects else set(OFFICIAL)
    turns: dict[str, dict[int, dict[str, float]]] = {}
    dialogues: dict[str, dict[str, float]] = {}
    counts = {a: 0 for a in BY_NAME if a in wanted}
    failed = rescaled = 0
    for record in records:
        if str(record.get("judge")) != judge_name or str(record.get("model") or "") != model_name:
            continue
        base, turn = split_score_name(str(record.get("name", "")))
        aspect = names.get(base, canonical(base))
        spec = BY_NAME.get(aspect)
        if spec is None or aspect not in wanted or (spec.level == "turn") != (turn is not None):
            continue
        value = record.get("value")
        if value is None:
            failed += 1
            continue
        value = float(value)
        scale = record.get("scale")
        if isinstance(scale, (list, tuple)) and len(scale) == 2 and tuple(map(float, scale)) != (spec.low, spec.high):
            low, high = float(scale[0]), float(scale[1])
            if high > low:
                value = spec.low + (value - low) / (high - low) * (spec.high - spec.low)
                rescaled += 1
        cid = str(record["conversation_id"])
        if turn is None:
            dialogues.setdefault(cid, {})[aspect] = value
        else:
            turns.setdefault(cid, {}).setdefault(turn, {})[aspect] = value
        counts[aspect] += 1
    conversations = [
        RunFileConversation(
            conv_id=cid,
            turns=[RunFileTurn(turn_ind=t, turn_level_pred=v) for t, v in sorted(turns.get(cid, {}).items())],
            dial_level_pred=dialogues.get(cid, {}),
        )
        for cid in sorted(set(turns) | set(dialogues))
    ]
    path = write_run_file(output, conversations)
    return RunFileExportResult(
        output=str(path),
        judge=judge_name,
        model=model_name,
        conversations=len(conversations),
        predictions={k: v for k, v in counts.items() if v},
        failed=failed,
        rescaled=rescaled,
    )
