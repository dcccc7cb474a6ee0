"""Human reference statistics: how people write to a recommender, per population, shipped with the package.

Built by ``usersimcrs fidelity-reference`` from public corpora (ReDial and INSPIRED seekers, who talk to
a human recommender; optionally CRS Arena users, who talk to CRSs); the corpora themselves are not
redistributed, only per-conversation feature values and per-turn summaries. `fidelity` compares a run
with them when no human corpus is given, and the LLM users' style controls take their defaults from
`HumanReference.style`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.errors import DataError

REFERENCE_PATH = Path(__file__).resolve().parent / "data" / "human_reference.json"
Context = Literal["human-human", "human-crs"]
HUMAN_HUMAN: Context = "human-human"
HUMAN_CRS: Context = "human-crs"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Summary(_Model):
    """Count, mean, spread and quantiles of one feature (None where there is no value)."""

    n: int
    mean: float | None = None
    sd: float | None = None
    median: float | None = None
    p10: float | None = None
    p25: float | None = None
    p75: float | None = None
    p90: float | None = None


class ReferencePopulation(_Model):
    """One population of human users: where they come from, whom they talked to, and their features."""

    name: str
    label: str
    context: Context
    source: str
    conversations: int
    user_turns: int
    per_conversation: dict[str, list[float | None]] = Field(
        description="feature -> one value per conversation (None where the conversation has none)"
    )
    per_conversation_summary: dict[str, Summary]
    per_turn: dict[str, Summary] = Field(description="per user turn: words, question (0/1), reject, accept, reveals")
    words_per_turn: dict[int, int] = Field(description="histogram: words in a user turn -> turns")
    suggestions_per_conversation: Summary = Field(description="partner turns that name an item, per conversation")


class StyleDefaults(_Model):
    """Defaults of the LLM users' style controls, from the human-human populations."""

    words_per_turn: int = Field(description="median words per user turn")
    max_words: int = Field(description="90th percentile of words per user turn")
    reveal_per_turn: int = Field(description="preferences named per turn, in turns that name any (rounded)")
    reveal_share: float = Field(description="share of user turns that name a title, genre or person")
    patience: int = Field(description="median suggestions per conversation")
    basis: str


class HumanReference(_Model):
    """The bundled reference: populations of human users and the style defaults drawn from them."""

    version: int = 1
    command: str
    features: list[str]
    populations: list[ReferencePopulation]
    style: StyleDefaults

    def population(self, name: str) -> ReferencePopulation:
        for population in self.populations:
            if population.name == name:
                return population
        raise KeyError(name)

    def of_context(self, context: str) -> list[ReferencePopulation]:
        """The populations that talked to a human recommender (human-human) or to CRSs (human-crs)."""
        return [p for p in self.populations if p.context == context]


@lru_cache(maxsize=4)
def load_reference(path: str = str(REFERENCE_PATH)) -> HumanReference:
    """Read a reference file once per process (the bundled one by default)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"{path}: cannot read the human reference ({exc.strerror or exc})") from exc
    try:
        return HumanReference.model_validate_json(text)
    except ValueError as exc:
        raise DataError(f"{path}: not a human reference file ({str(exc).splitlines()[0]})") from exc
