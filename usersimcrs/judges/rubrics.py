"""Judge rubrics as data: the schema and loader of the YAML files in the top-level `rubrics/` folder.

Two kinds of file share one loader:

* ``kind: rubric`` — a set of criteria (quality aspects, CoRE factors, PEPPER measures, ...),
  each with a definition, an anchored scoring standard, evaluation steps and the inputs it needs;
* ``kind: debate`` — the roles of a multi-agent debate, the factors each role argues from, the
  overall score scale and the round limit.

A user replaces a built-in rubric by passing a path to a YAML file with the same schema.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from usersimcrs.core.bundled import bundled_dir
from usersimcrs.core.validation import validate
from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.errors import ConfigError

InputKind = Literal["text", "recommendations", "ground_truth", "preferences"]
"""What a criterion needs besides the dialogue text: the session recommendation list, the
ground-truth (target) items, or the user's general preferences."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Level(_Model):
    """One anchored point of a scoring standard."""

    score: int
    anchor: str = Field(min_length=1)


class Criterion(_Model):
    """One thing a judge rates: an aspect, a factor or a measure."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    dimension: str | None = None
    definition: str = Field(min_length=1)
    levels: list[Level] = Field(min_length=1)
    steps: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    inputs: list[InputKind] = Field(
        default_factory=lambda: list[InputKind](["text"]),
        description="inputs shown to the judge; a missing one skips the criterion",
    )
    optional_inputs: list[InputKind] = Field(
        default_factory=list, description="inputs shown when the conversation has them"
    )
    allowed: list[int] | None = Field(
        default=None, description="the only valid scores when the standard uses a subset of the scale"
    )
    level: Literal["dialogue", "turn"] = Field(
        default="dialogue", description="rated once per conversation, or once per system turn (a per-turn judge)"
    )


class Dimension(_Model):
    """A group of criteria (CoRE's four evaluation dimensions)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    description: str


class Rubric(_Model):
    """A judge rubric: scale, task statement and criteria."""

    kind: Literal["rubric"] = "rubric"
    name: str
    title: str
    source: str = Field(description="where the facts (scale, counts) come from")
    scale: tuple[int, int]
    task: str = Field(min_length=1, description="what the judge is asked to do, in our words")
    dimensions: list[Dimension] = Field(default_factory=list)
    criteria: list[Criterion] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        low, high = self.scale
        if low >= high:
            raise ValueError(f"scale: lower bound {low} must be below upper bound {high}")
        names = [c.name for c in self.criteria]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"criteria: duplicate names {duplicates}")
        dimension_names = {d.name for d in self.dimensions}
        for criterion in self.criteria:
            where = f"criteria.{criterion.name}"
            scores = [level.score for level in criterion.levels]
            if len(set(scores)) != len(scores):
                raise ValueError(f"{where}.levels: a score appears twice")
            for score in scores + list(criterion.allowed or []):
                if not low <= score <= high:
                    raise ValueError(f"{where}: score {score} outside the scale {low}-{high}")
            if criterion.allowed is not None and set(scores) - set(criterion.allowed):
                raise ValueError(f"{where}: a level's score is not in 'allowed'")
            if self.dimensions and criterion.dimension not in dimension_names:
                raise ValueError(f"{where}.dimension: {criterion.dimension!r} is not a declared dimension")
        return self

    def criterion(self, name: str) -> Criterion:
        """The criterion called `name`; a ConfigError listing the known names otherwise."""
        for criterion in self.criteria:
            if criterion.name == name:
                return criterion
        known = ", ".join(c.name for c in self.criteria)
        raise ConfigError(f"rubric {self.name!r} has no criterion {name!r}; known: {known}")

    def valid_scores(self, criterion: Criterion) -> list[int]:
        """The integer scores a judge may give for `criterion`."""
        if criterion.allowed is not None:
            return sorted(criterion.allowed)
        return list(range(self.scale[0], self.scale[1] + 1))


class DebateRole(_Model):
    """One debater: who they are, what they care about and which factor results they receive."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    persona: str = Field(min_length=1)
    focus: list[str] = Field(min_length=1)
    factors: list[str] = Field(min_length=1)


class DebateRubric(_Model):
    """The multi-agent debate: roles, the overall scale with its anchors, rounds and instructions."""

    kind: Literal["debate"] = "debate"
    name: str
    title: str
    source: str
    factor_rubric: str = Field(description="the rubric whose criteria the roles' factors name")
    scale: tuple[int, int]
    anchors: list[Level] = Field(min_length=2)
    max_rounds: int = Field(4, ge=1)
    task: str = Field(min_length=1)
    first_round: str = Field(min_length=1)
    later_rounds: str = Field(min_length=1)
    roles: list[DebateRole] = Field(min_length=2)

    @model_validator(mode="after")
    def _consistent(self) -> DebateRubric:
        low, high = self.scale
        if low >= high:
            raise ValueError(f"scale: lower bound {low} must be below upper bound {high}")
        for anchor in self.anchors:
            if not low <= anchor.score <= high:
                raise ValueError(f"anchors: score {anchor.score} outside the scale {low}-{high}")
        names = [r.name for r in self.roles]
        if len(set(names)) != len(names):
            raise ValueError("roles: duplicate role names")
        return self

    def role(self, name: str) -> DebateRole:
        for role in self.roles:
            if role.name == name:
                return role
        raise ConfigError(f"debate {self.name!r} has no role {name!r}")

    def check_factors(self, rubric: Rubric) -> None:
        """Every factor a role argues from must exist in `rubric` (raises ConfigError)."""
        known = {c.name for c in rubric.criteria}
        for role in self.roles:
            missing = [f for f in role.factors if f not in known]
            if missing:
                raise ConfigError(
                    f"debate {self.name!r}: role {role.name!r} names unknown factors {missing}; "
                    f"rubric {rubric.name!r} has {sorted(known)}"
                )


def builtin_names() -> list[str]:
    """Names of the rubric files shipped in this folder (without `.yaml`)."""
    return sorted(p.stem for p in bundled_dir("rubrics").glob("*.yaml"))


def rubric_path(name_or_path: str | Path) -> Path:
    """A built-in rubric name (e.g. ``core12``) or a path to a user's YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} or candidate.exists():
        if not candidate.exists():
            raise ConfigError(f"{candidate}: rubric file not found")
        return candidate
    builtin = bundled_dir("rubrics") / f"{name_or_path}.yaml"
    if not builtin.exists():
        raise ConfigError(f"unknown rubric {str(name_or_path)!r}; built-in: {', '.join(builtin_names())}")
    return builtin


def load_any(name_or_path: str | Path) -> Rubric | DebateRubric:
    """Load and validate a rubric or debate file, dispatching on its ``kind``."""
    path = rubric_path(name_or_path)
    data = read_yaml(path)
    kind = data.get("kind", "rubric")
    if kind == "rubric":
        return validate(Rubric, data, source=str(path))
    if kind == "debate":
        return validate(DebateRubric, data, source=str(path))
    raise ConfigError(f"{path}: key 'kind': expected 'rubric' or 'debate', got {kind!r}")


def load_rubric(name_or_path: str | Path) -> Rubric:
    """Load a ``kind: rubric`` file (built-in name or path)."""
    rubric = load_any(name_or_path)
    if not isinstance(rubric, Rubric):
        raise ConfigError(f"{rubric_path(name_or_path)}: expected kind 'rubric', got {rubric.kind!r}")
    return rubric


def load_debate(name_or_path: str | Path = "debate_roles") -> DebateRubric:
    """Load a ``kind: debate`` file (built-in name or path)."""
    debate = load_any(name_or_path)
    if not isinstance(debate, DebateRubric):
        raise ConfigError(f"{rubric_path(name_or_path)}: expected kind 'debate', got {debate.kind!r}")
    return debate


__all__ = [
    "Criterion",
    "DebateRole",
    "DebateRubric",
    "Dimension",
    "Level",
    "Rubric",
    "builtin_names",
    "load_any",
    "load_debate",
    "load_rubric",
    "rubric_path",
]
