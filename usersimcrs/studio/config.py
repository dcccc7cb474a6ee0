"""The study YAML: which CRSs people talk to, which tasks they do, limits and the study folder.

Validated like every config (`core/yaml_io`, `core/validation`): unknown keys and bad values stop
with one line naming the file and key. Input paths (items, ratings, conversation sources) are
relative to the study file; `output` (the study folder) is relative to the working directory, as a
run config's `output` is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from usersimcrs.config import ItemsConfig, RatingsConfig, RunConfig, absolutize, load_run_config, resolve_path
from usersimcrs.core.json_types import ConfigSection
from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.engine.plugins import connector_factory
from usersimcrs.errors import ConfigError
from usersimcrs.judges.rubrics import Criterion, Rubric, load_rubric
from usersimcrs.llm.config import LLMConfig

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
TaskName = Literal["chat", "battle", "annotate", "turing"]
TASKS: tuple[TaskName, ...] = ("chat", "battle", "annotate", "turing")
HUMAN = "human"  # the simulator type of conversations people held


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StudyCRS(BaseModel):
    """One CRS people may talk to: a name and a connector section (`type` + options), as in a run
    config's `crs:`; or `from_config: RUN.yaml` to take the `crs:` section of an existing run config."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=NAME_PATTERN)
    from_config: str | None = None

    def section(self) -> ConfigSection:
        """The connector section (everything but `name` and `from_config`)."""
        return dict(self.model_extra or {})


class ParticipantsConfig(_Section):
    """How people arrive: per-participant links made by the researcher, and/or one open link."""

    open_link: bool = Field(True, description="an open link that issues a personal link to whoever opens it")
    links: int = Field(0, ge=0, description="personal links issued when the study folder is created")
    max_participants: int = Field(1000, ge=1, description="the open link stops issuing links after this many")


class LimitsConfig(_Section):
    """Input and rate limits, and how long a CRS may take to answer."""

    message_chars: int = Field(500, ge=1, le=20000)
    feedback_chars: int = Field(1000, ge=1, le=20000)
    body_bytes: int = Field(65536, ge=1024, description="largest request body accepted")
    requests_per_minute: int = Field(180, ge=1, description="per participant, every page and form")
    joins_per_minute: int = Field(30, ge=1, description="per client address, on the open link")
    bad_tokens_per_minute: int = Field(30, ge=1, description="per client address, before requests are refused")
    crs_timeout_s: float = Field(30.0, gt=0)
    open_sessions: int = Field(256, ge=1, description="CRS conversations kept open at once (oldest closed first)")
    assignment_expiry_min: float = Field(
        60.0, gt=0, description="an unfinished assignment stops counting for balancing after this long"
    )


class CompletionConfig(_Section):
    """What a participant sees at the end (Prolific-style completion code and return link)."""

    code: str | None = Field(None, max_length=64)
    url: str | None = Field(None, description="a link shown at the end, e.g. a crowdsourcing platform's return URL")
    message: str = "Thank you for taking part."


class ChatTask(_Section):
    """A participant talks to one CRS, ends when they want, then labels and rates the conversation."""

    crs: list[str] = Field(default_factory=list, description="CRS names (default: every study CRS)")
    per_participant: int = Field(1, ge=0)
    max_turns: int = Field(10, ge=1, description="user turns before the conversation must end")
    min_turns: int = Field(1, ge=0, description="user turns before the participant may end it")
    opening: Literal["user", "crs"] = "user"
    rate_aspects: bool = Field(True, description="ask the rubric's dialogue-level aspects after the chat")


class BattleTask(ChatTask):
    """Two anonymous CRSs one after the other, then a vote (A, B, tie) with optional feedback."""

    per_participant: int = Field(1, ge=0)
    label_each: bool = Field(True, description="ask satisfied/frustrated after each of the two conversations")
    rate_aspects: bool = False


class InlineUtterance(_Section):
    participant: Literal["USER", "AGENT"]
    text: str


class GoldConversation(_Section):
    """A conversation with known answers, hidden in each annotation batch to check attention.

    Either `conversation_id` (a conversation of the annotation source) or an inline `utterances` list.
    """

    conversation_id: str | None = None
    utterances: list[InlineUtterance] = Field(default_factory=list)
    answers: dict[str, int] = Field(min_length=1, description="dialogue-level criterion -> expected score")
    tolerance: int = Field(1, ge=0, description="an answer within this many points of the expected one passes")

    @model_validator(mode="after")
    def _one_source(self) -> GoldConversation:
        if (self.conversation_id is None) == (not self.utterances):
            raise ValueError("give either conversation_id or utterances")
        return self


class GenerateConfig(_Section):
    """Simulated conversations made once for annotation: a matrix design over the study's CRSs.

    Keys as in a matrix file (`base`, `simulators`, optional `crs`/`datasets`); the study's items and
    ratings are the defaults of `base`, its CRS list the default of `crs`.
    """

    base: dict[str, Any] = Field(default_factory=dict)
    simulators: list[dict[str, Any]] = Field(min_length=1)
    crs: list[dict[str, Any]] | None = None
    datasets: list[dict[str, Any]] | None = None
    concurrency: int = Field(4, ge=1)


class AnnotateTask(_Section):
    """Rate stored conversations on a rubric: k annotations per conversation, least-annotated first."""

    source: str | None = Field(None, description="a run or matrix folder (simulated or human)")
    generate: GenerateConfig | None = Field(None, description="make the source into STUDY/conversations first")
    rubric: str = "crsarena_eval"
    k: int = Field(3, ge=1, description="annotations wanted per conversation")
    batch: int = Field(3, ge=1, description="conversations per assignment (plus one hidden gold conversation)")
    per_participant: int = Field(1, ge=0)
    gold: list[GoldConversation] = Field(default_factory=list)
    exclude_failed_gold: bool = Field(True, description="leave annotators who failed a gold check out of the export")

    @model_validator(mode="after")
    def _one_source(self) -> AnnotateTask:
        if (self.source is None) == (self.generate is None):
            raise ValueError("give either source or generate")
        return self


class TuringTask(_Section):
    """Show a conversation, ask whether its user was a person or a simulator."""

    human: str = Field(description="a run or matrix folder of conversations held by people")
    simulated: str = Field(description="a run or matrix folder of simulated conversations")
    batch: int = Field(6, ge=2, description="conversations per assignment, half of each kind")
    per_participant: int = Field(1, ge=0)


class Tasks(_Section):
    chat: ChatTask | None = None
    battle: BattleTask | None = None
    annotate: AnnotateTask | None = None
    turing: TuringTask | None = None


class StudyConfig(_Section):
    """One human study: tasks, CRSs, the shared resources their connectors need, limits, output."""

    name: str = Field(pattern=NAME_PATTERN)
    seed: int = 42
    output: str | None = Field(None, description="the study folder (default runs/studio/<name>)")
    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    title: str = "A study of recommender conversations"
    instructions: str = ""
    admin_token_env: str | None = Field(None, description="environment variable holding the admin token")
    participants: ParticipantsConfig = Field(default_factory=ParticipantsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    completion: CompletionConfig = Field(default_factory=CompletionConfig)
    items: ItemsConfig | None = None
    ratings: RatingsConfig | None = None
    llm: LLMConfig = Field(default_factory=LLMConfig)
    llm_components: dict[str, dict[str, Any]] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    crs: list[StudyCRS] = Field(default_factory=list)
    tasks: Tasks


class Study(BaseModel):
    """A loaded study: the validated config, where it came from, and what it resolved."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config: StudyConfig
    path: Path
    folder: Path
    crs_configs: dict[str, RunConfig] = Field(default_factory=dict)
    rubric: Rubric | None = None
    chat_rubric: Rubric | None = None

    @property
    def name(self) -> str:
        return self.config.name

    def input_path(self, value: str) -> Path:
        """A path of the study file, relative to the file's folder."""
        return Path(resolve_path(self.path.parent, value) or value)

    def annotate_source(self) -> Path | None:
        """Where the conversations to annotate are (the generated folder when `generate` is set)."""
        task = self.config.tasks.annotate
        if task is None:
            return None
        return self.folder / "conversations" if task.generate is not None else self.input_path(task.source or "")

    def plan(self) -> list[tuple[TaskName, int]]:
        """Each participant's steps in order: (task, repetition)."""
        steps: list[tuple[TaskName, int]] = []
        for name in TASKS:
            task = getattr(self.config.tasks, name)
            if task is not None:
                steps += [(name, i) for i in range(task.per_participant)]
        return steps

    def run_config(self, crs: str) -> RunConfig:
        return self.crs_configs[crs]


def turn_criteria(rubric: Rubric) -> list[Criterion]:
    """The criteria rated per system turn."""
    return [c for c in rubric.criteria if c.level == "turn"]


def dialogue_criteria(rubric: Rubric) -> list[Criterion]:
    """The criteria rated per conversation."""
    return [c for c in rubric.criteria if c.level == "dialogue"]


def _crs_run_config(study: StudyConfig, entry: StudyCRS, path: Path, index: int) -> RunConfig:
    """The run config a CRS entry stands for: the study's resources plus the CRS's connector section."""
    where = f"{path}: crs[{index}] ({entry.name})"
    if entry.from_config is not None:
        if entry.section():
            raise ConfigError(f"{where}: give either from_config or connector keys, not both")
        source = Path(resolve_path(path.parent, entry.from_config) or entry.from_config)
        crs_section = load_run_config(source).crs
    else:
        crs_section = entry.section()
        if "type" not in crs_section:
            raise ConfigError(f"{path}: missing key 'crs[{index}].type'")
    data = {
        "name": f"{study.name}-{entry.name}",
        "seed": study.seed,
        "items": study.items.model_dump() if study.items else None,
        "ratings": study.ratings.model_dump() if study.ratings else None,
        "llm": study.llm.model_dump(exclude_unset=True),
        "llm_components": study.llm_components,
        "data": study.data,
        "simulator": {"type": HUMAN},
        "crs": crs_section,
        "progress": False,
    }
    config = validate(RunConfig, data, source=where)
    # the study's resources are relative to the study file; a `from_config` section is already absolute
    return absolutize(config, path.parent)


def _check_names(path: Path, key: str, names: list[str], known: list[str]) -> None:
    for name in names:
        if name not in known:
            raise ConfigError(f"{path}: key '{key}': unknown CRS {name!r} (study CRSs: {', '.join(known) or 'none'})")


def _check_gold(path: Path, task: AnnotateTask, rubric: Rubric) -> None:
    criteria = {c.name: c for c in dialogue_criteria(rubric)}
    for number, gold in enumerate(task.gold):
        for name, value in gold.answers.items():
            where = f"{path}: key 'tasks.annotate.gold[{number}].answers.{name}'"
            if name not in criteria:
                raise ConfigError(f"{where}: not a dialogue-level criterion of rubric {rubric.name!r}")
            if value not in rubric.valid_scores(criteria[name]):
                raise ConfigError(f"{where}: {value} is not one of {rubric.valid_scores(criteria[name])}")


def load_study(path: str | Path, *, output: str | Path | None = None) -> Study:
    """Read and check a study YAML; CRS sections are validated by their connectors now.

    `output` overrides the study folder of the file.
    """
    path = Path(path)
    config = validate(StudyConfig, read_yaml(path), source=str(path))
    folder = Path(output or config.output or Path("runs") / "studio" / config.name)
    tasks = config.tasks
    if not any(getattr(tasks, name) is not None for name in TASKS):
        raise ConfigError(f"{path}: key 'tasks': name at least one of {', '.join(TASKS)}")
    names = [c.name for c in config.crs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{path}: key 'crs': repeated CRS name(s) {', '.join(duplicates)}")
    for key in ("chat", "battle"):
        task = getattr(tasks, key)
        if task is None:
            continue
        if not task.crs:
            task.crs = list(names)
        _check_names(path, f"tasks.{key}.crs", task.crs, names)
        if not task.crs:
            raise ConfigError(f"{path}: key 'tasks.{key}.crs': the study has no CRS to talk to (add a 'crs' list)")
        if task.min_turns > task.max_turns:
            raise ConfigError(f"{path}: key 'tasks.{key}.min_turns': above max_turns ({task.max_turns})")
    if tasks.battle is not None and len(set(tasks.battle.crs)) < 2:
        raise ConfigError(f"{path}: key 'tasks.battle.crs': a battle needs at least two CRSs")
    crs_configs = {}
    for index, entry in enumerate(config.crs):
        run_config = _crs_run_config(config, entry, path, index)
        try:
            connector_factory(run_config.crs, source=f"{path}: crs[{index}] ({entry.name})")
        except ConfigError as exc:
            if str(path) in str(exc):
                raise
            raise ConfigError(f"{path}: key 'crs[{index}].type': {exc}") from None
        crs_configs[entry.name] = run_config
    study = Study(config=config, path=path, folder=folder, crs_configs=crs_configs)
    if tasks.annotate is not None:
        study.rubric = _rubric(path, "tasks.annotate.rubric", tasks.annotate.rubric)
        _check_gold(path, tasks.annotate, study.rubric)
        source = study.annotate_source()
        if tasks.annotate.generate is None and source is not None and not source.exists():
            raise ConfigError(f"{path}: key 'tasks.annotate.source': no such folder {source}")
    if tasks.chat is not None or tasks.battle is not None:
        study.chat_rubric = study.rubric or _rubric(path, "tasks.annotate.rubric", "crsarena_eval")
    if tasks.turing is not None:
        for key in ("human", "simulated"):
            folder_path = study.input_path(getattr(tasks.turing, key))
            if not folder_path.exists():
                raise ConfigError(f"{path}: key 'tasks.turing.{key}': no such folder {folder_path}")
    return study


def _rubric(path: Path, key: str, name: str) -> Rubric:
    try:
        return load_rubric(name)
    except ConfigError as exc:
        raise ConfigError(f"{path}: key '{key}': {exc}") from None
