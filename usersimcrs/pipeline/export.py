"""Export a run's dialogues for other tools: DialogueKit JSON (IDs kept) or JSONL."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from usersimcrs.core.dialoguekit_io import write_dialoguekit
from usersimcrs.core.jsonl import write_jsonl
from usersimcrs.core.run_folder import Run, load_run

ExportFormat = Literal["dialoguekit", "jsonl"]


class ExportResult(BaseModel):
    """What an export wrote."""

    output: Path
    format: ExportFormat
    dialogues: int
    left_out_failed: int = 0


def export_run(
    run: Run | str | Path,
    output: str | Path,
    *,
    format: ExportFormat = "dialoguekit",
    only_ok: bool = False,
    dedupe: bool = False,
) -> ExportResult:
    """Write the run's dialogues to `output`; with `only_ok`, failed conversations are left out (and counted).

    The file is written whole or not at all. A run whose conversation IDs repeat is refused with the
    count unless `dedupe` (keep the first line of each ID).
    """
    run = run if isinstance(run, Run) else load_run(run, duplicates="first" if dedupe else "refuse")
    dialogues = run.dialogues
    kept = [d for d in dialogues if d.status == "ok"] if only_ok else dialogues
    output = Path(output)
    if format == "dialoguekit":
        write_dialoguekit(kept, output)
    else:
        write_jsonl(output, kept)
    return ExportResult(output=output, format=format, dialogues=len(kept), left_out_failed=len(dialogues) - len(kept))
