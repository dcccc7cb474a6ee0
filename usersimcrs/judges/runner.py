"""Judging a run folder: pick valid conversations, skip what is already judged, score concurrently,
append the judgments to the run folder, and account the tokens spent in its manifest."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.jsonl import JsonlWriter
from usersimcrs.core.run_folder import Duplicates, Run, RunFolder
from usersimcrs.core.usage import COUNTERS, Usage, UsageSummary, add_summaries, upgrade_legacy_usage
from usersimcrs.judges.base import FAILED_STATUSES, Judge, Judgment, PlannedCall, gather_all

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

MIN_SYSTEM_TURNS = 2
RETRY_ON_RESUME = ("llm_error",)
"""Statuses that a later `judge` invocation tries again (transient failures); others are final."""


def invalid_reason(dialogue: Dialogue, min_system_turns: int = MIN_SYSTEM_TURNS) -> str | None:
    """Why a conversation should not be judged: it failed, or the system spoke fewer than `min_system_turns` times."""
    if dialogue.status != "ok":
        return "failed"
    if len(dialogue.agent_turns) < min_system_turns:
        return "too_few_system_turns"
    return None


def load_judgments(folder: RunFolder) -> dict[str, list[Judgment]]:
    """Stored judgments by conversation; transient failures are left out (a later invocation retries them)."""
    out: dict[str, list[Judgment]] = {}
    for record in folder.judgment_records():
        judgment = Judgment.model_validate(record)
        if judgment.status in RETRY_ON_RESUME:
            continue
        out.setdefault(judgment.conversation_id, []).append(judgment)
    return out


ModelOf = Callable[[str], str]
"""Judgment name -> the ``backend:model`` that would produce it now."""


def existing_for(
    judge: Judge, records: Iterable[Judgment], model_of: ModelOf, names: Iterable[str] | None = None
) -> dict[str, Judgment]:
    """The stored judgments `judge` should not redo, by name: its own and those of the judges it reuses,
    made by the model that would judge each name now (another model's judgments are not this one's).
    `names`: the names wanted for this conversation (default `judge.all_names()`)."""
    wanted = set(names if names is not None else judge.all_names())
    order = [*judge.reused_judges(), judge.name]  # own records win over reused ones of the same name
    chosen: dict[str, Judgment] = {}
    for judge_name in order:
        for record in records:
            if record.judge == judge_name and record.name in wanted and judge.accepts(record, model_of(record.name)):
                chosen[record.name] = record
    return chosen


def is_done(judge: Judge, existing: Mapping[str, Judgment], names: Iterable[str] | None = None) -> bool:
    """Whether every judgment `judge` needs for a conversation (`names`, default all) is stored already."""
    return all(n in existing for n in (names if names is not None else judge.all_names()))


class JudgeUsage(Usage):
    """The LLM work of one judging as the LLM layer counted it, every backend request once.

    `calls` are the requests the judge made to a backend (cache hits excluded), `retries` the extra
    attempts the LLM layer made for them, so `requests` (= calls + retries) is what the servers saw;
    `errors` are calls that ended without a usable answer; `resamples` are the judge's own re-asks
    after an unusable reply (each is also one of the calls); tokens are those of every attempt."""

    requests: int = 0
    resamples: int = 0

    @classmethod
    def between(cls, before: Mapping[str, Any], after: Mapping[str, Any], resamples: int = 0) -> JudgeUsage:
        """What an LLM usage summary (or one slice of it) grew by from `before` to `after`."""
        counts = {name: int(after.get(name) or 0) - int(before.get(name) or 0) for name in COUNTERS}
        return cls(**counts, requests=counts["calls"] + counts["retries"], resamples=resamples)


def failure_reason(judgment: Judgment) -> str:
    """A judgment's failure as one short line for grouping: its status and, if any, its error."""
    error = " ".join((judgment.error or "").split())[:160]
    return f"{judgment.status}: {error}" if error else judgment.status


@dataclass
class ModelTally:
    """Judgments written and LLM work spent by one judge model in one invocation."""

    judgments: int = 0
    statuses: Counter = field(default_factory=Counter)
    usage: JudgeUsage = field(default_factory=JudgeUsage)


@dataclass
class JudgeRunSummary:
    """What one `judge` invocation did. `usage` comes from the LLM layer's counters (set when
    `judge_run` ends), never from adding up judgments, so a request is counted once."""

    conversations: int = 0
    judged: int = 0
    already_done: int = 0
    skipped_invalid: Counter = field(default_factory=Counter)
    written: int = 0
    statuses: Counter = field(default_factory=Counter)
    failures: Counter = field(default_factory=Counter)
    resamples: int = 0
    usage: JudgeUsage = field(default_factory=JudgeUsage)
    by_model: dict[str, ModelTally] = field(default_factory=dict)

    def add(self, judgment: Judgment) -> None:
        """Count one written judgment, overall and for its model (a batched request's re-asks
        are counted on the judgment that carries its calls, as its usage is)."""
        self.written += 1
        self.statuses[judgment.status] += 1
        if judgment.status in FAILED_STATUSES and judgment.status != "missing_input":
            self.failures[failure_reason(judgment)] += 1
        if judgment.mode != "batched" or judgment.usage.calls + judgment.usage.cache_hits:
            self.resamples += max(0, judgment.attempts - 1)
        tally = self.by_model.setdefault(judgment.model, ModelTally())
        tally.judgments += 1
        tally.statuses[judgment.status] += 1

    @property
    def asked(self) -> int:
        """Judgments written for which a model was asked (a missing input asks nothing)."""
        return self.written - self.statuses.get("missing_input", 0)

    @property
    def failed(self) -> int:
        """Judgments written without a value although the model was asked (parse, range or LLM failures)."""
        return sum(self.failures.values())

    @property
    def failed_share(self) -> float | None:
        """failed / asked; None when nothing was asked."""
        return self.failed / self.asked if self.asked else None

    def settle(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Take this invocation's usage from the LLM layer: overall and per model, `after` minus `before`."""
        self.usage = JudgeUsage.between(before, after, self.resamples)
        models_before, models_after = before.get("by_model") or {}, after.get("by_model") or {}
        for model, counts in models_after.items():
            grown = JudgeUsage.between(models_before.get(model) or {}, counts)
            if model in self.by_model or any(grown.model_dump().values()):
                self.by_model.setdefault(model, ModelTally()).usage = grown

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversations": self.conversations,
            "judged": self.judged,
            "already_done": self.already_done,
            "skipped_invalid": dict(self.skipped_invalid),
            "judgments_written": self.written,
            "statuses": dict(self.statuses),
            "usage": self.usage.model_dump(),
            "by_model": {
                model: {"judgments": t.judgments, "statuses": dict(t.statuses), "usage": t.usage.model_dump()}
                for model, t in sorted(self.by_model.items())
            },
        }


def select(
    dialogues: Iterable[Dialogue],
    judge: Judge,
    stored: Mapping[str, list[Judgment]],
    model_of: ModelOf,
    *,
    include_invalid: bool,
) -> tuple[list[tuple[Dialogue, dict[str, Judgment]]], JudgeRunSummary]:
    """The conversations still to judge (with what is stored for each) and the counts of the rest."""
    summary = JudgeRunSummary()
    todo = []
    for dialogue in dialogues:
        summary.conversations += 1
        reason = invalid_reason(dialogue, judge.min_system_turns)
        if reason is not None and not include_invalid:
            summary.skipped_invalid[reason] += 1
            continue
        names = judge.names_for(dialogue)
        existing = existing_for(judge, stored.get(dialogue.conversation_id, []), model_of, names)
        if is_done(judge, existing, names):
            summary.already_done += 1
            continue
        todo.append((dialogue, existing))
    return todo, summary


def read_dialogues(run_dir: Path, duplicates: Duplicates = "refuse") -> list[Dialogue]:
    """The run's conversations with their profiles, read by the one run reader (a torn last line is ignored;
    repeated conversation IDs are refused unless `duplicates="first"`)."""
    return Run(run_dir, duplicates=duplicates).dialogues


def plan_run(
    judge: Judge, todo: list[tuple[Dialogue, dict[str, Judgment]]], context: RunContext | None = None
) -> list[PlannedCall]:
    """Every call a first attempt would make (for `--dry-run`), with the prompts the LLMs of `context` get."""
    if context is None:
        return [call for dialogue, existing in todo for call in judge.plan(dialogue, existing)]
    return [call for dialogue, existing in todo for call in judge.plan_in(dialogue, existing, context)]


async def judge_run(
    judge: Judge,
    todo: list[tuple[Dialogue, dict[str, Judgment]]],
    context: RunContext,
    folder: RunFolder | Path,
    summary: JudgeRunSummary,
    *,
    concurrency: int = 4,
    on_done: Callable[[Dialogue, list[Judgment]], None] | None = None,
) -> JudgeRunSummary:
    """Judge `todo` with at most `concurrency` conversations in flight, appending as each finishes.

    The first exception (a permanent LLM failure, a configuration error) cancels every conversation
    still in flight and is raised as is; what was written before stays. `folder` is the run folder
    (its judgments file), or a path of a JSONL file of judgments outside any run folder (benchmarks).
    """
    gate = asyncio.Semaphore(max(1, concurrency))
    writers: list[JsonlWriter] = []  # opened at the first judgment: an aborted run leaves no empty file
    before = llm_usage(context)

    async def one(dialogue: Dialogue, existing: dict[str, Judgment]) -> None:
        async with gate:
            judgments = await judge.score(dialogue, context, existing)
        for judgment in judgments:
            if not writers:
                writers.append(folder.judgment_writer() if isinstance(folder, RunFolder) else JsonlWriter(folder))
            writers[0].write(judgment)
            summary.add(judgment)
        summary.judged += 1
        if on_done is not None:
            on_done(dialogue, judgments)

    try:
        await gather_all(*(one(d, e) for d, e in todo))
    finally:
        for writer in writers:
            writer.close()
        summary.settle(before, llm_usage(context))
    return summary


def llm_usage(context: RunContext) -> UsageSummary:
    """The LLM layer's usage summary of `context` so far (empty without a counting provider)."""
    llms = context.llms
    return llms.usage_summary() if llms is not None and hasattr(llms, "usage_summary") else {}


def prefix_chars(llm_usage: UsageSummary, components: Iterable[str]) -> dict[str, int]:
    """Prompt characters and prefix-reused characters of `components`, summed from an LLM usage summary."""
    wanted = set(components)
    out = {"prompt_chars": 0, "prefix_reused_chars": 0}
    for component, counts in (llm_usage.get("by_component") or {}).items():
        if component in wanted:
            for key in out:
                out[key] += int(counts.get(key) or 0)
    return out


def record_usage(
    folder: RunFolder,
    judge_name: str,
    summary: JudgeRunSummary,
    llm_usage: UsageSummary,
    components: Iterable[str] = (),
    http_clients: Mapping[str, dict[str, str]] | None = None,
) -> dict:
    """Add this invocation's LLM work (the `JudgeUsage` the console prints) to ``manifest.json`` under
    ``judges`` (summed over invocations), overall, per judge and per judge model
    (``by_model[backend:model][judge]``), failures by reason, the prompt-prefix
    reuse of the judge's LLM `components` (``prefix_reuse[judge]``, recomputed from the summed characters),
    and the HTTP client of each LLM component (``http_clients``: URL, client and why; core/http_route.py)."""
    current = upgrade_legacy_usage(folder.read_manifest().get("judges", {}))  # older runs: `cached_calls`
    usage = summary.usage.model_dump()
    by_model = {
        model: {judge_name: {**tally.usage.model_dump(), "judgments": tally.judgments}}
        for model, tally in summary.by_model.items()
    }
    patch = {
        "usage": add_summaries(current.get("usage"), usage),
        "by_judge": add_summaries(current.get("by_judge"), {judge_name: usage}),
        "by_model": add_summaries(current.get("by_model"), by_model),
        "llm": add_summaries(current.get("llm"), llm_usage),
        "prefix_reuse": add_summaries(current.get("prefix_reuse"), {judge_name: prefix_chars(llm_usage, components)}),
        "statuses": add_summaries(current.get("statuses"), {judge_name: dict(summary.statuses)}),
        "failures": add_summaries(current.get("failures"), {judge_name: dict(summary.failures)}),
        "skipped_invalid": dict(summary.skipped_invalid),
        "http_clients": {**current.get("http_clients", {}), **(http_clients or {})},
    }
    return folder.update_manifest({"judges": patch})
