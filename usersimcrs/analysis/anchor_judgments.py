"""The anchor toolkit's judge files: ``{agent_id: {ASPECT: [{conversation_id, score, score_explanation}]}}``.

UserSimCRS v2 stores 0.0 when the judge's reply could not be parsed. On its 1-5 scale 0.0 is
impossible, so such scores become missing values with status "parse_error" (the original number
is kept in `raw_value`) rather than entering averages as zeros.
"""

from __future__ import annotations

import json
from pathlib import Path

from usersimcrs.core.json_types import JSON, JSONObject
from usersimcrs.errors import DataError
from usersimcrs.judges.base import JudgmentRecord

ANCHOR_JUDGE = "anchor"
ANCHOR_SCALE = (1.0, 5.0)


def anchor_judgments(
    data: JSON, *, source: str = "judgments", scale: tuple[float, float] = ANCHOR_SCALE
) -> list[JudgmentRecord]:
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


def _anchor_record(
    agent_id: str, aspect: str, entry: JSONObject, scale: tuple[float, float], where: str
) -> JudgmentRecord:
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


def read_anchor_judgments(path: str | Path) -> list[JudgmentRecord]:
    """Read an anchor-layout judge JSON file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    return anchor_judgments(data, source=str(path))


# ---------------------------------------------------------------- report models
