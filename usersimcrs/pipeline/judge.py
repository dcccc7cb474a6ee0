"""Judging a run folder as a library call: `judge_async` / `judge` score a run's conversations.

Appends to the run folder's judgments, resumable per (conversation, judge, name, model): what the
same model stored is not redone, while another model judges again and its judgments live side by
side. Invalid conversations (failed, fewer than two system turns) are skipped and counted unless
`include_invalid`. Token usage goes to the run's manifest (overall, per judge, per model). Judging
holds the folder's writer lock; a file whose conversation IDs repeat is refused unless `dedupe`. A
matrix (simulated, or a converted human corpus such as CRSArena-Eval's) is judged cell by cell, each
cell's judgments in its own folder, where `export-run` and `meta-eval` read them.

Before the first call each LLM server the judge calls is preflighted (`usersimcrs.llm.preflight`): one
that is down or refuses the key stops the judging with one line naming its URL, nothing written.
A permanent LLM failure (refused key, unknown model, wrong URL) or a configuration error stops the
whole judging at once with a `UserError` naming the model and server: rows already written stay,
nothing is written for the conversations not judged. Transient failures are recorded per judgment
(status ``llm_error``) and retried by the next invocation. `dry_run` counts calls and estimates
tokens without calling any model.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.matrix_folder import MatrixFolder
from usersimcrs.core.run_folder import RunFolder
from usersimcrs.core.secrets import Secrets, scrubbing_logs
from usersimcrs.core.storage import StorageError
from usersimcrs.core.validation import validate
from usersimcrs.engine.loop import run_blocking
from usersimcrs.engine.progress import RunProgress
from usersimcrs.errors import UserError
from usersimcrs.judges.base import Judge, judges
from usersimcrs.judges.components import expand_models_map, load_models_map
from usersimcrs.judges.estimate import PlannedModel, estimate, model_namer, planned_models
from usersimcrs.judges.runner import (
    JudgeUsage,
    judge_run,
    load_judgments,
    plan_run,
    read_dialogues,
    record_usage,
    select,
)
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.failures import PermanentLLMError
from usersimcrs.llm.preflight import check_llms
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext

JUDGE_NAMES_HELP = (
    "quality | core12 | pepper | persuasiveness | crsarena (CRSArena-Eval's aspects) | learned (the zero-LLM "
    "evaluator; --model names its file) | a plug-in"
)


class JudgeRequest(BaseModel):
    """What to judge and how: the options of ``usersimcrs judge`` as one typed value."""

    model_config = ConfigDict(extra="forbid")

    judge: str = Field(description=JUDGE_NAMES_HELP)
    debate: bool = Field(default=False, description="with core12: add CoRE's multi-agent debate score")
    rubric: str | None = Field(default=None, description="a rubric YAML replacing the judge's built-in one")
    debate_roles: str | None = Field(default=None, description="a debate YAML replacing the built-in roles")
    max_rounds: int | None = Field(default=None, description="debate round limit (default 4)")
    criteria: list[str] | None = Field(default=None, description="score only these aspects/factors")
    include_invalid: bool = Field(default=False, description="also judge failed or too-short conversations")
    dedupe: bool = Field(default=False, description="judge the first line of a repeated conversation ID (else refuse)")
    dry_run: bool = Field(default=False, description="count calls and estimate tokens; call nothing")
    as_if_unjudged: bool = Field(
        default=False,
        description="with dry_run: plan every conversation, judged or not (a pilot's cost per conversation)",
    )
    concurrency: int = Field(default=4, description="conversations judged at once")
    limit: int | None = Field(default=None, description="judge at most this many conversations")
    max_attempts: int | None = Field(default=None, description="LLM calls per score before recording a failure")
    max_tokens: int | None = Field(default=None, description="completion cap per call")
    no_cache: bool = Field(default=False, description="do not read or write the LLM response cache")
    llm_backend: str | None = Field(default=None, description="LLM backend (default: the run's, else auto)")
    model: str | None = None
    base_url: str | None = None
    model_path: str | None = None
    items: str | None = Field(default=None, description="--judge learned: the item catalogue, when moved")
    models_file: str | None = Field(default=None, description="YAML: component -> LLM settings (mixture of evaluators)")
    prompts: str | None = Field(default=None, description="YAML replacing keys of the judges' scaffolding texts")
    batch_aspects: bool = Field(default=False, description="score all aspects/factors of a conversation in one call")
    shared_rubric: bool = Field(
        default=True, description="all guidelines in the shared, cacheable system text (off: only the rated one's)"
    )
    price: tuple[float, float] | None = Field(
        default=None, description="US dollars per million prompt and completion tokens, for a dry run's cost"
    )
    max_failed_share: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="`judge` exits 3 when a larger share of the judgments asked for has no value (parse, range or "
        "LLM failures)",
    )
    preflight: bool = Field(
        default=True,
        description="before the first call, one GET shows each LLM server the judge calls answers and takes the key "
        "(a server that cannot be used stops the judging with one line)",
    )


class DryRunEstimate(BaseModel):
    """Calls, estimated tokens and cost of a judging, per model, computed without calling any model."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    models: dict[str, PlannedModel] = Field(default_factory=dict, description="backend:model -> its share of the plan")
    cost_usd: float | None = Field(
        default=None, description="sum over the models; None when a model's price is unknown"
    )
    debate_one_round: dict[str, int] | None = Field(
        default=None, description="lower bound: every debate agrees in round 1"
    )
    note: str | None = None


class ModelTotals(BaseModel):
    """What one judge model wrote and spent in this invocation."""

    judgments: int
    statuses: dict[str, int]
    usage: JudgeUsage


class FailureCount(BaseModel):
    """One failure reason of a judging and how many judgments it left without a value."""

    reason: str
    count: int


class JudgeResult(BaseModel):
    """What one judging did (or, with a dry run, would do)."""

    judge: str
    judgments_path: str
    models: dict[str, str] = Field(description="judgment name -> the backend:model that judges it")
    conversations: int = Field(description="conversations in the run")
    to_judge: int = Field(description="conversations selected for judging (after resume, skips and limit)")
    judged: int = 0
    already_done: int = 0
    skipped_invalid: dict[str, int] = Field(default_factory=dict)
    judgments_written: int = 0
    statuses: dict[str, int] = Field(default_factory=dict)
    failed: int = Field(0, description="judgments asked for that came back without a value")
    asked: int = Field(0, description="judgments written for which a model was asked (missing inputs excluded)")
    failures: list[FailureCount] = Field(default_factory=list, description="failure reasons, most frequent first")
    max_failed_share: float = 0.2
    usage: JudgeUsage = Field(default_factory=JudgeUsage)
    by_model: dict[str, ModelTotals] = Field(default_factory=dict)
    dry_run: DryRunEstimate | None = None

    @property
    def failed_share(self) -> float | None:
        """failed / asked (None when nothing was asked)."""
        return self.failed / self.asked if self.asked else None

    @property
    def exceeds_failed_share(self) -> bool:
        """More of the judgments asked for failed than `max_failed_share` allows (a 100%-failing run always does)."""
        share = self.failed_share
        return share is not None and (share > self.max_failed_share or share == 1.0)

    def report(self) -> dict[str, Any]:
        """The figures the CLI prints (a dry run shows its estimate instead of what was written)."""
        if self.dry_run is not None:
            return {
                "judge": self.judge,
                "conversations": self.to_judge,
                "already_done": self.already_done,
                "skipped_invalid": self.skipped_invalid,
                **self.dry_run.model_dump(exclude_none=True),
                "cost_usd": self.dry_run.cost_usd,  # None (unknown price) is shown, not left out
            }
        return {
            "judge": self.judge,
            "conversations": self.conversations,
            "judged": self.judged,
            "already_done": self.already_done,
            "skipped_invalid": self.skipped_invalid,
            "judgments_written": self.judgments_written,
            "statuses": self.statuses,
            "failed": self.failed,
            "usage": self.usage.model_dump(),
            "by_model": {model: totals.model_dump() for model, totals in self.by_model.items()},
        }


def judge_options(request: JudgeRequest) -> ConfigSection:
    """The judge's config section from the request (only the options given)."""
    options: ConfigSection = {}
    if request.rubric:
        options["rubric"] = request.rubric
    if request.criteria:
        options["criteria"] = [c.strip() for c in request.criteria if c.strip()]
    if request.max_attempts:
        options["max_attempts"] = request.max_attempts
    if request.max_tokens:
        options["max_tokens"] = request.max_tokens
    if request.prompts:
        options["prompts"] = request.prompts
    if request.batch_aspects:
        options["batch"] = True
    if not request.shared_rubric:
        options["shared_rubric"] = False
    if not request.debate:
        return options
    factor_options = {k: v for k, v in options.items() if k != "max_tokens"}
    debate: dict[str, Any] = {"factors": factor_options}
    if request.prompts:
        debate["prompts"] = request.prompts
    if request.max_tokens:
        debate["max_tokens"] = request.max_tokens
    if request.debate_roles:
        debate["debate"] = request.debate_roles
    if request.max_rounds:
        debate["max_rounds"] = request.max_rounds
    return debate


def build_judge(request: JudgeRequest) -> Judge:
    """The judge the request names (the debate wraps the CoRE factor judge)."""
    if request.debate and request.judge != "core12":
        raise UserError("--debate works with --judge core12 (the debate argues from CoRE's factor results)")
    cls = judges.get("debate" if request.debate else request.judge)
    options = judge_options(request)
    if not cls.uses_llm and request.model:  # a judge without an LLM reads --model as its model file
        options["model"] = request.model
    if request.items:
        options["items"] = request.items
    return cls(validate(cls.Config, options, source=f"judge {request.judge}", prefix="option"))


def preflight_components(judge: Judge) -> list[str]:
    """The LLM components a judge calls, whose servers are checked before its first call (none without an LLM)."""
    return (judge.components() or ["default"]) if judge.uses_llm else []


async def check_judge_llms(
    request: JudgeRequest, run_config: dict[str, Any], *, checked: dict[Any, str] | None = None
) -> list[str]:
    """Preflight the LLM servers judging a run of `run_config` (a config as a manifest stores it) would call,
    before that run exists (a matrix checks its judges before its first cell); returns the URLs checked."""
    judge = build_judge(request)
    if not request.preflight or not judge.uses_llm:
        return []
    models = load_models_map(request.models_file) if request.models_file else {}
    provider = LLMProvider(
        base_llm_config(request, {"config": run_config}), expand_models_map(models, judge.component_chains())
    )
    try:
        return await check_llms(provider, preflight_components(judge), checked=checked)
    finally:
        await provider.aclose()


def base_llm_config(request: JudgeRequest, manifest: dict[str, Any]) -> LLMConfig:
    """The run's LLM settings (from its manifest) with the request's overrides applied."""
    data = dict((manifest.get("config") or {}).get("llm") or {})
    for key, value in (
        ("backend", request.llm_backend),
        ("model", request.model),
        ("base_url", request.base_url),
        ("model_path", request.model_path),
    ):
        if value is not None:
            data[key] = value
    if request.no_cache:
        data["cache"] = False
    return validate(LLMConfig, data, source="judge", prefix="llm")


def _dry_run(
    judge: Judge, todo: list, request: JudgeRequest, provider: LLMProvider, context: RunContext
) -> DryRunEstimate:
    """Every call a first attempt would make, counted, estimated and priced per model (debates as upper and
    lower bound)."""
    plan = plan_run(judge, todo, context)
    model_of, config_of = model_namer(provider)
    models = planned_models(plan, model_of, config_of, request.price)
    costs = [m.cost_usd for m in models.values()]
    figures = DryRunEstimate.model_validate(
        {
            **estimate(plan),
            "models": models,
            "cost_usd": round(sum(c for c in costs if c is not None), 6) if None not in costs else None,
        }
    )
    if request.debate:
        figures.debate_one_round = estimate(c for c in plan if c.judge != "debate" or c.name.endswith(":round1"))
        figures.note = (
            "calls/tokens assume every debate runs to the round limit (upper bound); "
            "debate_one_round is the figure if all debates agree in round 1 (lower bound)"
        )
    return figures


async def judge_async(
    run_dir: str | Path,
    request: JudgeRequest,
    *,
    llm: LLMConfig | None = None,
    models: dict[str, dict[str, Any]] | None = None,
    progress: bool = False,
) -> JudgeResult:
    """Judge the run in `run_dir` (each written cell, when it is a matrix) as `request` says; see the module
    docstring.

    `llm` replaces the run's LLM settings (and the request's overrides); `models` is a models map
    (component -> LLM settings) used instead of `request.models_file`; `progress` shows a bar on a
    terminal.
    """
    matrix = MatrixFolder(run_dir)
    if matrix.is_matrix():  # a matrix (simulated, or a converted human corpus): every written cell in turn
        return await _judge_matrix(matrix, request, llm=llm, models=models, progress=progress)
    folder = RunFolder(run_dir)
    if not folder.has_dialogues():
        raise UserError(f"{folder.path}: no {folder.dialogues_path.name} (is this a run folder?)")
    judge = build_judge(request)
    with folder.lock("judge"):
        llm_request = request if judge.uses_llm else request.model_copy(update={"model": None})
        config = llm if llm is not None else base_llm_config(llm_request, folder.read_manifest())
        if models is None:
            models = load_models_map(request.models_file) if request.models_file else {}
        with scrubbing_logs(Secrets.from_config({"llm": config, "models": models})):
            return await _judge_locked(folder, judge, request, config, models, progress)


async def _judge_matrix(
    matrix: MatrixFolder,
    request: JudgeRequest,
    *,
    llm: LLMConfig | None,
    models: dict[str, dict[str, Any]] | None,
    progress: bool,
) -> JudgeResult:
    """Judge each written cell of `matrix` as its own run (its own LLM settings, lock and judgments file);
    `request.limit` counts conversations over all cells."""
    results: list[JudgeResult] = []
    remaining = request.limit
    for cell in matrix.written_cells():
        cell_request = request if remaining is None else request.model_copy(update={"limit": max(0, remaining)})
        result = await judge_async(cell.run_dir, cell_request, llm=llm, models=models, progress=progress)
        results.append(result)
        if remaining is not None:
            remaining -= result.to_judge
    if not results:
        raise UserError(f"{matrix.path}: no cell holds conversations to judge")
    pattern = Path(results[0].judgments_path)
    return merge_results(results, str(matrix.cells_dir / "*" / pattern.name))


def _sum_counts(*mappings: dict[str, int]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for mapping in mappings:
        out.update(mapping)
    return dict(out)


def _sum_usage(usages: list[JudgeUsage]) -> JudgeUsage:
    return JudgeUsage(**{name: sum(getattr(u, name) for u in usages) for name in JudgeUsage.model_fields})


def _sum_planned(planned: list[PlannedModel]) -> PlannedModel:
    costs = [p.cost_usd for p in planned]
    return planned[0].model_copy(
        update={
            **{
                k: sum(getattr(p, k) for p in planned)
                for k in ("calls", "prompt_tokens", "completion_tokens", "total_tokens")
            },
            "cost_usd": None if None in costs else round(sum(c for c in costs if c is not None), 6),
        }
    )


def _merge_dry_runs(estimates: list[DryRunEstimate]) -> DryRunEstimate:
    by_model: dict[str, list[PlannedModel]] = {}
    for e in estimates:
        for model, planned in e.models.items():
            by_model.setdefault(model, []).append(planned)
    costs = [e.cost_usd for e in estimates]
    one_round = [e.debate_one_round for e in estimates if e.debate_one_round is not None]
    return DryRunEstimate(
        calls=sum(e.calls for e in estimates),
        prompt_tokens=sum(e.prompt_tokens for e in estimates),
        completion_tokens=sum(e.completion_tokens for e in estimates),
        total_tokens=sum(e.total_tokens for e in estimates),
        models={model: _sum_planned(planned) for model, planned in by_model.items()},
        cost_usd=None if None in costs else round(sum(c for c in costs if c is not None), 6),
        debate_one_round=_sum_counts(*one_round) if one_round else None,
        note=estimates[0].note,
    )


def merge_results(results: list[JudgeResult], judgments_path: str) -> JudgeResult:
    """One result for the judgings of several run folders (a matrix's cells): counts, usage and plans summed."""
    first = results[0]
    by_model: dict[str, list[ModelTotals]] = {}
    for result in results:
        for model, totals in result.by_model.items():
            by_model.setdefault(model, []).append(totals)
    failures = _sum_counts(*({f.reason: f.count for f in r.failures} for r in results))
    estimates = [r.dry_run for r in results if r.dry_run is not None]
    return JudgeResult(
        judge=first.judge,
        judgments_path=judgments_path,
        models={name: model for r in results for name, model in r.models.items()},
        conversations=sum(r.conversations for r in results),
        to_judge=sum(r.to_judge for r in results),
        judged=sum(r.judged for r in results),
        already_done=sum(r.already_done for r in results),
        skipped_invalid=_sum_counts(*(r.skipped_invalid for r in results)),
        judgments_written=sum(r.judgments_written for r in results),
        statuses=_sum_counts(*(r.statuses for r in results)),
        failed=sum(r.failed for r in results),
        asked=sum(r.asked for r in results),
        failures=[FailureCount(reason=r, count=n) for r, n in Counter(failures).most_common()],
        max_failed_share=first.max_failed_share,
        usage=_sum_usage([r.usage for r in results]),
        by_model={
            model: ModelTotals(
                judgments=sum(t.judgments for t in totals),
                statuses=_sum_counts(*(t.statuses for t in totals)),
                usage=_sum_usage([t.usage for t in totals]),
            )
            for model, totals in by_model.items()
        },
        dry_run=_merge_dry_runs(estimates) if estimates else None,
    )


async def _judge_locked(
    folder: RunFolder,
    judge: Judge,
    request: JudgeRequest,
    config: LLMConfig,
    models: dict[str, dict[str, Any]],
    progress: bool,
) -> JudgeResult:
    run_dir = folder.path
    provider = LLMProvider(config, expand_models_map(models, judge.component_chains()))
    try:
        resolved: dict[str, str] = {}  # judgment name -> backend:model, built on first need

        def model_of(name: str) -> str:
            if name not in resolved:
                resolved[name] = judge.model_for(name, lambda component: provider.get(component).slot.model_key)
            return resolved[name]

        todo, summary = select(
            read_dialogues(run_dir, "first" if request.dedupe else "refuse"),
            judge,
            {} if request.dry_run and request.as_if_unjudged else load_judgments(folder),
            model_of,
            include_invalid=request.include_invalid,
        )
        if request.limit is not None:
            todo = todo[: max(0, request.limit)]
        if todo and not request.dry_run:
            for name in judge.all_names():  # builds every LLM it needs: a missing key stops here, before any call
                model_of(name)
            if request.preflight:  # a server down or refusing the key: one line, nothing written
                await check_llms(provider, preflight_components(judge))
        result = JudgeResult(
            judge=judge.name,
            judgments_path=str(folder.judgments_path),
            models=dict(resolved),
            conversations=summary.conversations,
            to_judge=len(todo),
            already_done=summary.already_done,
            skipped_invalid=dict(summary.skipped_invalid),
        )
        if request.dry_run:
            result.dry_run = _dry_run(judge, todo, request, provider, RunContext(llms=provider, run_dir=run_dir))
            return result
        await _judge_todo(judge, todo, RunContext(llms=provider, run_dir=run_dir), folder, summary, request, progress)
        folder.mark_judged()  # a finished judging leaves the file, even with no rows
    finally:
        await provider.aclose()
    totals = summary.as_dict()
    return result.model_copy(
        update={
            "judged": summary.judged,
            "judgments_written": summary.written,
            "statuses": totals["statuses"],
            "failed": summary.failed,
            "asked": summary.asked,
            "failures": [FailureCount(reason=r, count=n) for r, n in summary.failures.most_common()],
            "max_failed_share": request.max_failed_share,
            "usage": summary.usage,
            "by_model": {m: ModelTotals(**t) for m, t in totals["by_model"].items()},
        }
    )


async def _judge_todo(judge, todo, context, folder, summary, request: JudgeRequest, progress: bool) -> None:
    """Score `todo` with a progress bar; a permanent LLM failure stops everything as one `UserError`."""
    bar = RunProgress(total=len(todo), enabled=progress, llms=context.llms, label=f"judge {judge.name}")

    def advance(dialogue, judgments) -> None:
        bar.advance(failed=any(j.value is None for j in judgments))

    failed = True
    try:
        with bar:
            await judge_run(
                judge,
                todo,
                context,
                folder,
                summary,
                concurrency=max(1, request.concurrency),
                on_done=advance,
            )
        failed = False
    except PermanentLLMError as exc:
        raise UserError(
            f"judge {judge.name} stopped: {exc.reason}; {summary.judged} of {len(todo)} conversations judged before"
        ) from None
    finally:
        components = [*judge.component_chains(), f"judge.{judge.name}", *(f"judge.{n}" for n in judge.reused_judges())]
        try:
            llms = context.llms
            record_usage(folder, judge.name, summary, llms.usage_summary(), components, llms.http_routes())
        except StorageError:
            if not failed:
                raise  # otherwise the judging's own error (e.g. the disk filling up) is the one to report


def judge(
    run_dir: str | Path,
    request: JudgeRequest,
    *,
    llm: LLMConfig | None = None,
    models: dict[str, dict[str, Any]] | None = None,
    progress: bool = False,
) -> JudgeResult:
    """Synchronous `judge_async` (inside a running event loop it runs on its own loop in a worker thread)."""
    return run_blocking(judge_async(run_dir, request, llm=llm, models=models, progress=progress))
