"""Runs one annotation task over a converted folder: concurrent, cached (by the LLM layer), resumable.

Every finished unit is appended at once to a progress file next to the data; a run that is killed
and started again applies that file first and only asks the LLM for what is left. At the end the
dialogues are rewritten atomically, the progress file is removed and a report lists what failed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, Field

from data_converters.augment.base import AnnotationTask, Provenance, Unit
from data_converters.augment.folder import ConvertedFolder
from data_converters.writer import DIALOGUEKIT
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import JsonlWriter, iter_jsonl
from usersimcrs.core.usage import UsageSummary
from usersimcrs.errors import LLMError
from usersimcrs.llm.base import LLM


class Failure(BaseModel):
    """One unit the LLM could not annotate, and why."""

    key: str
    conversation_id: str
    utterance_id: str | None = None
    error: str


class AnnotationReport(BaseModel):
    """What one `usersimcrs annotate` run did (written as annotation_report.<task>.json)."""

    task: str
    folder: str
    model: str = ""
    backend: str = ""
    prompt: str = ""
    prompt_version: int | str = ""
    dialogues: int = 0
    units: int = 0
    annotated: int = 0
    resumed: int = 0
    skipped_existing: int = 0
    failed: int = 0
    failures: list[Failure] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    usage: UsageSummary = Field(default_factory=dict)


def progress_path(folder: ConvertedFolder, task: AnnotationTask) -> Path:
    return folder.path / f".annotate-{task.name}.partial.jsonl"


def report_path(folder: ConvertedFolder, task: AnnotationTask) -> Path:
    return folder.path / f"annotation_report.{task.name}.json"


async def annotate(
    folder: ConvertedFolder,
    task: AnnotationTask,
    llm: LLM,
    *,
    concurrency: int = 4,
    limit: int | None = None,
    overwrite: bool = False,
    max_tokens: int = 128,
    component: str = "annotate",
    usage: Callable[[], UsageSummary] | None = None,
) -> AnnotationReport:
    """Annotate the first `limit` dialogues of `folder` (all when None) and save them back."""
    dialogues = folder.dialogues()
    chosen = dialogues if limit is None else dialogues[: max(0, limit)]
    by_id = {d.conversation_id: d for d in dialogues}
    provenance = Provenance(
        task=task.name, model=llm.model, backend=llm.backend, prompt=task.prompt.id, prompt_version=task.prompt.version
    )
    report = AnnotationReport(
        task=task.name,
        folder=str(folder.path),
        model=llm.model,
        backend=llm.backend,
        prompt=task.prompt.id,
        prompt_version=task.prompt.version,
        dialogues=len(chosen),
    )
    done = _resume(folder, task, by_id, report)
    todo: list[tuple[Dialogue, Unit]] = []
    for dialogue in chosen:
        all_units = task.units(dialogue, overwrite=True)
        open_units = {u.key for u in task.units(dialogue, overwrite=overwrite)}
        report.units += len(all_units)
        for unit in all_units:
            if unit.key in done:
                continue
            if unit.key not in open_units:
                report.skipped_existing += 1
                continue
            todo.append((dialogue, unit))
    gate = asyncio.Semaphore(max(1, concurrency))
    with JsonlWriter(progress_path(folder, task)) as progress:

        async def one(dialogue: Dialogue, unit: Unit) -> None:
            async with gate:
                try:
                    reply = await llm.complete(
                        task.messages(dialogue, unit),
                        temperature=0.0,
                        max_tokens=max_tokens,
                        schema=task.schema(dialogue, unit),
                        component=component,
                    )
                    if reply.parse_error is not None:
                        raise ValueError(f"unparseable reply: {reply.parse_error}")
                    result = task.parse(reply.parsed, dialogue, unit)
                except (LLMError, ValueError) as exc:
                    _fail(report, dialogue, unit, f"{type(exc).__name__}: {exc}")
                    return
            step = Provenance.model_validate({**provenance.model_dump(), "model": reply.model or provenance.model})
            task.apply(dialogue, unit, result, step)
            progress.write(
                {
                    "key": unit.key,
                    "conversation_id": unit.conversation_id,
                    "unit": unit.model_dump(),
                    "result": result,
                    "provenance": step.model_dump(),
                }
            )
            report.annotated += 1

        tasks = [asyncio.ensure_future(one(d, u)) for d, u in todo]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for pending in tasks:  # a crash or Ctrl-C: stop the rest before the progress file closes
                pending.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    folder.save_dialogues(dialogues)
    report.files = [folder.folder.dialogues_path.name, DIALOGUEKIT, *task.finish(folder, dialogues)]
    progress_path(folder, task).unlink(missing_ok=True)
    report.failed = len(report.failures)
    report.usage = usage() if usage is not None else {}
    report_path(folder, task).write_text(report.model_dump_json(indent=1), encoding="utf-8")
    return report


def _resume(
    folder: ConvertedFolder, task: AnnotationTask, by_id: dict[str, Dialogue], report: AnnotationReport
) -> set[str]:
    """Apply the progress file of an interrupted run; returns the keys it already covers."""
    done: set[str] = set()
    for record in iter_jsonl(progress_path(folder, task)):
        dialogue = by_id.get(str(record.get("conversation_id")))
        if dialogue is None:
            continue
        unit = Unit.model_validate(record["unit"])
        task.apply(dialogue, unit, record["result"], Provenance.model_validate(record["provenance"]))
        done.add(unit.key)
    report.resumed = len(done)
    return done


def _fail(report: AnnotationReport, dialogue: Dialogue, unit: Unit, error: str) -> None:
    utterance_id = None
    if unit.utterance_index is not None:
        utterance_id = dialogue.utterances[unit.utterance_index].utterance_id
    report.failures.append(
        Failure(key=unit.key, conversation_id=unit.conversation_id, utterance_id=utterance_id, error=error)
    )


def summary_line(report: AnnotationReport) -> str:
    """One line for the terminal."""
    usage = report.usage
    calls = f"; llm calls {usage.get('calls', 0)}, cache hits {usage.get('cache_hits', 0)}" if usage else ""
    return (
        f"{report.task}: {report.annotated} annotated, {report.resumed} resumed, {report.skipped_existing} already "
        f"annotated, {report.failed} failed of {report.units} in {report.dialogues} dialogues{calls}"
    )
