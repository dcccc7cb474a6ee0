"""The judge seam: one result record (`Judgment`), the `Judge` interface and the judge registry."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Awaitable, Callable, ClassVar, Literal, Mapping, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.json_types import JSON, JSONObject
from usersimcrs.core.usage import Usage, upgrade_legacy_usage
from usersimcrs.llm.base import Message
from usersimcrs.registry import Registry

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

Status = Literal["ok", "parse_error", "out_of_range", "llm_error", "missing_input"]
"""Why a judgment has (or lacks) a value. Anything but "ok" comes with ``value=None``."""

FAILED_STATUSES = ("parse_error", "out_of_range", "llm_error", "missing_input")

T = TypeVar("T")


class Judgment(BaseModel):
    """One score of one conversation by one judge; a failed score is ``None`` with its status, never 0.

    `model` is the ``backend:model`` that produced it (a comma-joined list for the debate's roles);
    judgments of several models live side by side, keyed by `key()`. Imported records (e.g. the
    anchor toolkit's) carry `raw_value`, `agent_id` and `source`; any other unknown field is kept
    in `provenance` rather than rejected.
    """

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    judge: str = Field(description="the judge that produced it: quality, core12, debate, pepper, persuasiveness")
    name: str = Field(description="the aspect, factor or measure (e.g. 'coherence'; 'overall' for the debate)")
    value: float | None
    scale: tuple[float, float]
    rationale: str = ""
    status: Status = "ok"
    error: str | None = None
    model: str = ""
    usage: Usage = Field(default_factory=Usage)
    attempts: int = 0
    mode: Literal["per_criterion", "batched"] | None = Field(
        default=None, description="how a rubric judge asked: one call per criterion or all criteria in one call"
    )
    raw: JSON = None  # the judge's own record (the replies of a failed score, a debate's rounds), as JSON
    raw_value: JSON = Field(default=None, description="the original score of an imported record (before range checks)")
    agent_id: str | None = Field(default=None, description="the CRS an imported record is about")
    source: str | None = Field(
        default=None, description="where a record came from when not judged here, e.g. 'imported'"
    )
    provenance: JSONObject = Field(default_factory=dict, description="fields of other producers, kept as is")

    @model_validator(mode="before")
    @classmethod
    def _tolerate_foreign_fields(cls, data: Any) -> Any:
        """None for text fields becomes ""; unknown keys move into `provenance` (nothing is dropped);
        a usage written before the single `Usage` (with `cached_calls`) is read in today's terms."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("usage"), dict):
            data["usage"] = upgrade_legacy_usage(data["usage"])
        for key in ("model", "rationale"):
            if key in data and data[key] is None:
                data[key] = ""
        unknown = {k: data.pop(k) for k in list(data) if k not in cls.model_fields}
        if data.get("mode") not in (None, "per_criterion", "batched"):  # another producer's 'mode'
            unknown["mode"] = data.pop("mode")
        if unknown:
            data["provenance"] = {**(data.get("provenance") or {}), **unknown}
        return data

    def key(self) -> tuple[str, str, str, str]:
        """(conversation, judge, name, model): what makes a judgment unique in `judgments.jsonl`."""
        return (self.conversation_id, self.judge, self.name, self.model)


JudgmentRecord: TypeAlias = dict[str, Any]
"""One judgment as a plain dict: a `judgments.jsonl` line as read back (a `Judgment` dumped to JSON, which
`Judgment.model_validate` reads again) or another producer's record with the same fields. Tables and
reports read these without validating each line."""


class PlannedCall(BaseModel):
    """A call a judge would make, for `--dry-run` cost estimates."""

    model_config = ConfigDict(extra="forbid")

    judge: str
    name: str
    component: str
    messages: list[Message]
    max_tokens: int
    expected_completion_tokens: int
    note: str = ""


class JudgeOptions(BaseModel):
    """Options every rubric judge shares (a judge's nested `Config` may extend them)."""

    model_config = ConfigDict(extra="forbid")

    rubric: str | None = Field(
        default=None, description="built-in rubric name or path to a YAML file of the same schema"
    )
    criteria: list[str] | None = Field(default=None, description="rate only these criteria (default: all)")
    max_attempts: int = Field(3, ge=1, le=10, description="LLM calls per score before giving up")
    temperature: float = 0.0
    max_tokens: int = Field(256, ge=16)
    rationale_chars: int = Field(400, ge=20, description="longest rationale the output schema allows")
    seed: int | None = 0
    prompts: str | None = Field(default=None, description="YAML replacing keys of the judges' scaffolding texts")
    batch: bool = Field(default=False, description="score all criteria of a conversation in one structured call")
    shared_rubric: bool = Field(
        default=True,
        description="every criterion's guideline in the shared system text (cacheable prefix); off: only the "
        "rated criterion's, after the conversation (shorter prompts for small context windows)",
    )


class Judge(ABC):
    """Scores stored conversations. Built as ``Cls(Cls.Config.model_validate(section))``."""

    name: ClassVar[str] = "abstract"
    Config: ClassVar[type[JudgeOptions]] = JudgeOptions
    uses_llm: ClassVar[bool] = True
    """False for a judge that calls no LLM (a learned model): `--model` then names its model file."""
    min_system_turns: ClassVar[int] = 2
    """Conversations with fewer system turns are skipped unless asked (see `judges.runner.invalid_reason`)."""

    def __init__(self, config: JudgeOptions | None = None) -> None:
        self.config = config if config is not None else self.Config()

    @abstractmethod
    async def score(
        self,
        dialogue: Dialogue,
        context: RunContext,
        existing: Mapping[str, Judgment] | None = None,
    ) -> list[Judgment]:
        """Judge `dialogue`; names already in `existing` are not scored again (resume)."""

    @abstractmethod
    def names(self) -> list[str]:
        """The judgment names this judge produces for one conversation."""

    @abstractmethod
    def plan(self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None = None) -> list[PlannedCall]:
        """The calls `score` would make on a first attempt (for `--dry-run`)."""

    def names_for(self, dialogue: Dialogue) -> list[str]:
        """The names that must be stored for `dialogue` to count as judged (per-turn judges list one per turn)."""
        return self.all_names()

    def plan_in(
        self, dialogue: Dialogue, existing: Mapping[str, Judgment] | None, context: RunContext
    ) -> list[PlannedCall]:
        """`plan` with the LLMs of `context` in view (a judge whose prompts depend on the model's context
        window plans the prompts it would really send); by default the same as `plan`."""
        return self.plan(dialogue, existing)

    def all_names(self) -> list[str]:
        """Every judgment name that must be stored for a conversation to count as done (own and reused)."""
        return list(self.names())

    def reused_judges(self) -> list[str]:
        """Other judges whose stored judgments this one builds on and does not redo (none by default)."""
        return []

    def name_components(self) -> dict[str, list[str]]:
        """Judgment name -> the LLM components that produce it (for per-model resume)."""
        return {}

    def model_for(self, name: str, resolve: Callable[[str], str]) -> str:
        """The ``backend:model`` that would produce judgment `name`, as it is recorded on the judgment."""
        return ",".join(sorted({resolve(c) for c in self.name_components().get(name, [])}))

    def accepts(self, stored: Judgment, model: str) -> bool:
        """Whether a stored judgment counts as done when `model` would judge it now (records written
        before judgments carried the backend name the bare model name)."""
        return stored.model == model or (":" not in stored.model and stored.model == model.partition(":")[2])

    def component_chains(self) -> dict[str, list[str]]:
        """LLM component -> the names a models map may set it under, most specific first."""
        return {}

    def components(self) -> list[str]:
        """LLM component names this judge asks for (so a model map can be expanded for them)."""
        return list(self.component_chains())


async def _awaited(aw: Awaitable[T]) -> T:
    """`aw` as a coroutine (a TaskGroup takes coroutines, `gather_all` any awaitable)."""
    return await aw


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """Await all in parallel; the first failure cancels the rest and is raised as is (not wrapped)."""
    tasks: list[asyncio.Task] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_awaited(aw)) for aw in aws]
    except BaseExceptionGroup as grouped:
        raise _first_leaf(grouped) from None
    return [task.result() for task in tasks]


def _first_leaf(grouped: BaseExceptionGroup) -> BaseException:
    """The first non-group exception inside `grouped`."""
    first = grouped.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


judges: Registry[type[Judge]] = Registry(
    "judges",
    {
        "quality": "usersimcrs.judges.quality:QualityJudge",
        "core12": "usersimcrs.judges.core12:Core12Judge",
        "debate": "usersimcrs.judges.debate:DebateJudge",
        "pepper": "usersimcrs.judges.pepper:PepperJudge",
        "persuasiveness": "usersimcrs.judges.persuasiveness:PersuasivenessJudge",
        "crsarena": "usersimcrs.judges.crsarena:CRSArenaJudge",
        "learned": "usersimcrs.judges.learned.judge:LearnedJudge",
    },
)
