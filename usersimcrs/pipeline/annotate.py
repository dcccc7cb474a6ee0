"""Annotate a converted dataset folder with an LLM (dialogue acts, information needs).

Calls are batched concurrently and cached; records that already carry the annotation are skipped,
and an interrupted run resumes where it stopped. Provenance (model, backend, prompt version) is
stored with every annotation; failures go to annotation_report.<task>.json. An LLM server that is
down or refuses the key stops the command before the first call (`usersimcrs.llm.preflight`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from data_converters.augment.base import annotators
from data_converters.augment.folder import ConvertedFolder
from data_converters.augment.prompt_spec import labels_from_yaml, load_prompt
from data_converters.augment.runner import AnnotationReport, annotate, report_path
from usersimcrs.engine.loop import run_blocking
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.preflight import check_llms
from usersimcrs.llm.provider import LLMProvider


class AnnotateRequest(BaseModel):
    """What to annotate, how, and with which model."""

    model_config = ConfigDict(extra="forbid")

    task: str
    folder: str
    llm: LLMConfig = Field(default_factory=LLMConfig)
    limit: int | None = Field(default=None, ge=0)
    concurrency: int = Field(default=4, ge=1)
    max_tokens: int = Field(default=160, ge=1)
    prompt: str | None = None
    intents: str | None = None
    slots: str | None = None
    overwrite: bool = False
    preflight: bool = Field(default=True, description="check the LLM server answers and takes the key first")


class AnnotateResult(BaseModel):
    """The annotation report and where it was written."""

    report: AnnotationReport
    report_path: Path


async def annotate_async(request: AnnotateRequest) -> AnnotateResult:
    """Annotate `request.folder` as the request says; returns the report (counts, failures, usage)."""
    folder = ConvertedFolder(request.folder)
    task_cls = annotators.get(request.task)
    prompt = load_prompt(request.prompt or task_cls.default_prompt)
    if request.intents:
        prompt.intents = labels_from_yaml(request.intents, "intents")
    if request.slots:
        prompt.slots = labels_from_yaml(request.slots, "slots")
    task = task_cls(prompt, folder.items())
    llm = request.llm.model_copy(update={"max_concurrency": request.concurrency})
    provider = LLMProvider(llm)
    try:
        if request.preflight:  # a server down or refusing the key: one line, nothing annotated
            await check_llms(provider, ["annotate"])
        report = await annotate(
            folder,
            task,
            provider.get("annotate"),
            concurrency=request.concurrency,
            limit=request.limit,
            overwrite=request.overwrite,
            max_tokens=request.max_tokens,
            usage=provider.usage_summary,
        )
    finally:
        await provider.aclose()
    return AnnotateResult(report=report, report_path=report_path(folder, task))


def annotate_folder(request: AnnotateRequest) -> AnnotateResult:
    """`annotate_async` from synchronous code (also inside a running event loop)."""
    return run_blocking(annotate_async(request))
