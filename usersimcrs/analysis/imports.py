"""Outside results into a run folder: DialogueKit JSON exports and the anchor toolkit's judge files.

The anchor (UserSimCRS v2) writes judge results as ``{agent_id: {ASPECT: [{"conversation_id",
"score", "score_explanation"}]}}`` and stores 0.0 when the judge's reply could not be parsed. On its
1-5 scale 0.0 is impossible, so such scores become missing values with status "parse_error"
(the original number is kept in `raw_value`) rather than entering averages as zeros.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.errors import DataError, UserError

ANCHOR_JUDGE = "anchor"
ANCHOR_SCALE = (1.0, 5.0)


@dataclass
class ImportResult:
    """What an import wrote."""

    dialogues: int = 0
    failed: int = 0
    judgments: int = 0
    parse_failures: int = 0
    unmatched: list[str] = field(default_factory=list)


def anchor_judgments(
    data: Any, *, source: str = "judgments", scale: tuple[float, float] = ANCHOR_SCALE
) -> list[dict[str, Any]]:
    """Judgment records from the anchor's nested layout; out-of-scale scores (its 0.0) become missing."""
    if not isinstance(data, dict):
        raise DataError(f"{source}: expected {{agent_id: {{aspect: [...]}}}} at the top level")
    records = []
    for agent_id, aspects in data.items():
        if not isinstance(aspects, dict):
            raise DataError(f"{source}: {agent_id}: expected {{aspect: [...]}}")
        for aspect, entries in aspects.items():
            if not isinstance(entries, list):
                raise DataError(f"{source}: {agent_id}.{aspect}: expected a list of scores")
            for i, entry in enumerate(entries):
                where = f"{source}: {agent_id}.{aspect}[{i}]"
                if not isinstance(entry, dict) or "conversation_id" not in entry:
                    raise DataError(f"{where}: needs a conversation_id")
                records.append(_anchor_record(str(agent_id), str(aspect), entry, scale, where))
    return records


def _anchor_record(agent_id: str, aspect: str, entry: dict[str, Any], scale: tuple[float, float], where: str) -> dict[str, Any]:
    raw = entry.get("score")
    try:
        value = None if raw is None else float(raw)
    except (TypeError, ValueError):
        raise DataError(f"{where}: score {raw!r} is not a number") from None
    in_scale = value is not None and scale[0] <= value <= scale[1]
    return {
        "conversation_id": str(entry["conversation_id"]),
        "judge": ANCHOR_JUDGE,
        "name": aspect,
        "value": value if in_scale else None,
        "scale": list(scale),
        "status": "ok" if in_scale else "parse_error",
        "model": entry.get("model"),
        "rationale": entry.get("score_explanation"),
        "raw_value": raw,
        "agent_id": agent_id,
        "source": "imported",
    }


def read_anchor_judgments(path: str | Path) -> list[dict[str, Any]]:
    """Read an anchor-layout judge JSON file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    return anchor_judgments(data, source=str(path))


def import_run(
    dialogues_file: str | Path,
    output: str | Path,
    *,
    judgments_file: str | Path | None = None,
    simulator: str | None = None,
    crs: str | None = None,
    overwrite: bool = False,
) -> ImportResult:
    """Write a run folder (dialogues.jsonl, judgments.jsonl, manifest.json) from outside results."""
    from usersimcrs.core.manifest import environment, write_manifest

    output = Path(output)
    target = output / "dialogues.jsonl"
    if target.exists() and target.stat().st_size and not overwrite:
        raise UserError(f"{output} already holds a run; pass --overwrite to replace it")
    dialogues = read_dialoguekit(dialogues_file)
    _check_unique(dialogues, str(dialogues_file))
    records = read_anchor_judgments(judgments_file) if judgments_file else []
    known = {d.conversation_id for d in dialogues}
    joined = [r for r in records if r["conversation_id"] in known]
    result = ImportResult(
        dialogues=len(dialogues),
        failed=sum(d.status == "failed" for d in dialogues),
        judgments=len(joined),
        parse_failures=sum(r["value"] is None for r in joined),
        unmatched=sorted({r["conversation_id"] for r in records if r["conversation_id"] not in known}),
    )
    output.mkdir(parents=True, exist_ok=True)
    for name in ("dialogues.jsonl", "judgments.jsonl", "metrics.csv", "metrics_summary.csv", "metrics_by_turn.csv"):
        (output / name).unlink(missing_ok=True)
    with JsonlWriter(target) as writer:
        for dialogue in dialogues:
            writer.write(dialogue)
    if joined:
        with JsonlWriter(output / "judgments.jsonl") as writer:
            for record in joined:
                writer.write(record)
    agents = sorted({d.agent_id for d in dialogues})
    write_manifest(
        output,
        {
            "name": output.name,
            "status": "imported",
            "source": {
                "dialogues": str(dialogues_file),
                "judgments": str(judgments_file) if judgments_file else None,
                "format": "dialoguekit",
            },
            "config": {
                "simulator": {"type": simulator or "imported"},
                "crs": {"type": crs or (agents[0] if len(agents) == 1 else "imported")},
            },
            "dialogues": {"completed": result.dialogues - result.failed, "failed": result.failed},
            "judgments": {"records": result.judgments, "parse_failures": result.parse_failures,
                          "unmatched_conversations": len(result.unmatched)},
            "environment": environment(),
        },
    )
    return result


def _check_unique(dialogues: list[Dialogue], source: str) -> None:
    seen: set[str] = set()
    for d in dialogues:
        if d.conversation_id in seen:
            raise DataError(f"{source}: conversation_id {d.conversation_id!r} occurs twice")
        seen.add(d.conversation_id)
