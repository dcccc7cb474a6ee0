"""Exports shaped like another toolkit's published runs, made from the real CRSArena-Dial slice.

The anchor toolkit writes one DialogueKit JSON file per simulator x CRS run, with the simulator's id as
the user id and the CRS's as the agent id, and no human label. These files carry the slice's real
conversations that way (one file per CRS), so an import of many exports can be checked on real text.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

ARENA = ("raw", "crsarena_dial")
CONVERSATIONS = "crs_arena_dial_open_first2_per_crs.json"
VOTES = "votes_open_first25.csv"


def arena_exports(shared_data: Path, folder: Path, simulator: str = "ABUS_ReDial") -> list[Path]:
    """One export per CRS of the slice, named `<simulator>_<crs>.json`, in the slice's CRS order."""
    source = json.loads((shared_data.joinpath(*ARENA) / CONVERSATIONS).read_text(encoding="utf-8"))
    by_crs: dict[str, list[dict]] = defaultdict(list)
    for record in source:
        export = {k: v for k, v in record.items() if k != "metadata"}
        export["user"] = {"id": simulator, "type": "USER"}
        by_crs[record["agent"]["id"]].append(export)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for crs, records in by_crs.items():
        path = folder / f"{simulator.lower()}_{crs}.json"
        path.write_text(json.dumps(records), encoding="utf-8")
        files.append(path)
    return files


def arena_labels_csv(shared_data: Path, path: Path) -> Path:
    """The slice's satisfied/frustrated labels as an outside reference file (conversation_id,name,value)."""
    source = json.loads((shared_data.joinpath(*ARENA) / CONVERSATIONS).read_text(encoding="utf-8"))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["conversation_id", "name", "value"])
        for record in source:
            writer.writerow(
                [record["conversation ID"], "satisfied", int(record["metadata"]["sentiment"] == "satisfied")]
            )
    return path


def arena_votes(shared_data: Path) -> Path:
    """The slice's pairwise votes (CRS Arena CSV)."""
    return shared_data.joinpath(*ARENA) / VOTES
