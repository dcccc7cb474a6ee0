"""The converter seam: raw benchmark files in, unified records and a conversion report out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.matrix_folder import cell_name
from usersimcrs.core.profile import InformationNeed, UserProfile
from usersimcrs.errors import DataError
from usersimcrs.registry import Registry

_MAX_EXAMPLES = 5


class ConvertOptions(BaseModel):
    """Options shared by every converter (the CLI flags)."""

    model_config = ConfigDict(extra="forbid")

    skip_bad: bool = False
    domain: Literal["movie", "all"] = "movie"
    seed: int = 42
    holdout: float = Field(0.2, ge=0.0, lt=1.0, description="share of a user's items held out as targets")


class DroppedRecord(BaseModel):
    """A raw record left out of the output, with where it was and why."""

    where: str
    reason: str
    record_id: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)


class WarningSummary(BaseModel):
    """How often one kind of oddity occurred, with the first few examples."""

    count: int = 0
    examples: list[str] = Field(default_factory=list)


class PartialOutput(BaseModel):
    """Records read but written only in part on purpose (not malformed): how many, and why."""

    what: str
    read: int
    written: int
    reason: str
    counts: dict[str, int] = Field(default_factory=dict, description="a breakdown of `written`")


class ConversionReport(BaseModel):
    """What went in, what came out, what was dropped and why (written as conversion_report.json)."""

    dataset: str
    inputs: list[str] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)
    counts_in: dict[str, int] = Field(default_factory=dict)
    counts_out: dict[str, int] = Field(default_factory=dict)
    counts_dropped: dict[str, int] = Field(default_factory=dict)
    dropped: list[DroppedRecord] = Field(default_factory=list)
    warnings: dict[str, WarningSummary] = Field(default_factory=dict)
    partial: list[PartialOutput] = Field(
        default_factory=list, description="outputs smaller than their input, by design"
    )
    files: list[str] = Field(default_factory=list)
    parts: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="counts per input file, where a corpus ships in parts that are merged (CRSArena-Dial's "
        "open and closed files)",
    )

    def count_in(self, key: str, n: int = 1) -> None:
        self.counts_in[key] = self.counts_in.get(key, 0) + n

    def count_part(self, part: str, key: str, n: int = 1) -> None:
        """Count `n` under `key` for the input file `part`."""
        counts = self.parts.setdefault(part, {})
        counts[key] = counts.get(key, 0) + n

    def written_in_part(self, what: str, read: int, written: int, reason: str, **counts: int) -> None:
        """Say why fewer `what` were written than read, so a smaller output is not mistaken for a loss."""
        self.partial.append(PartialOutput(what=what, read=read, written=written, reason=reason, counts=counts))

    def warn(self, code: str, message: str) -> None:
        """Count one oddity under `code`, keeping the first few messages as examples."""
        summary = self.warnings.setdefault(code, WarningSummary())
        summary.count += 1
        if len(summary.examples) < _MAX_EXAMPLES:
            summary.examples.append(message)

    def bad(
        self,
        where: str,
        reason: str,
        *,
        skip_bad: bool,
        record_id: str | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        """A malformed record: a one-line DataError, or (with --skip-bad) an entry in `dropped`."""
        if not skip_bad:
            raise DataError(f"{where}: {reason}")
        self.drop(where, reason, record_id, counts)

    def drop(self, where: str, reason: str, record_id: str | None = None, counts: dict[str, int] | None = None) -> None:
        """A record left out (malformed, or filtered on purpose), with what it held in `counts`."""
        counts = dict(counts or {})
        self.dropped.append(DroppedRecord(where=where, reason=reason, record_id=record_id, counts=counts))
        for key, n in counts.items():
            self.counts_dropped[key] = self.counts_dropped.get(key, 0) + n


class NeedRecord(BaseModel):
    """One line of information_needs.jsonl: the need behind one conversation (or one user).

    Only these two keys: the profile reader treats a record with `user_id` as a full UserProfile
    (profiles.jsonl carries the users where a dataset has them).
    """

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    need: InformationNeed


@dataclass(slots=True)
class RatingRow:
    """One user-item rating kept verbatim for ratings.csv."""

    user_id: str
    item_id: str
    rating: float
    timestamp: str = ""


@dataclass
class CellRun:
    """One run folder of a matrix-like output (``cells/<simulator>__<crs>__<dataset>/``).

    Corpora of real conversations with several CRSs (CRS Arena) are written as one cell per CRS, so
    the matrix tools (compare, report, meta-eval) read them like a simulated matrix.
    """

    simulator: str
    crs: str
    dataset: str
    dialogues: list[Dialogue]
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return cell_name(self.simulator, self.crs, self.dataset)


@dataclass
class ConversionOutput:
    """Everything a converter produced; the writer turns it into the output folder."""

    dialogues: list[Dialogue] = field(default_factory=list)
    items: ItemCollection | None = None
    needs: list[NeedRecord] = field(default_factory=list)
    profiles: list[UserProfile] = field(default_factory=list)
    ratings: list[RatingRow] = field(default_factory=list)
    extra_files: dict[str, Any] = field(default_factory=dict)
    jsonl_files: dict[str, Sequence[BaseModel]] = field(default_factory=dict)
    cells: list[CellRun] = field(default_factory=list)


class Converter(ABC):
    """Turns one benchmark's raw files into the unified format."""

    name: ClassVar[str] = "abstract"
    description: ClassVar[str] = ""

    def __init__(self, options: ConvertOptions | None = None) -> None:
        self.options = options or ConvertOptions()

    @abstractmethod
    def convert(self, inputs: list[Path], report: ConversionReport) -> ConversionOutput:
        """Read `inputs`, record counts/drops/warnings in `report`, return the unified records."""

    def bad(
        self,
        report: ConversionReport,
        where: str,
        reason: str,
        record_id: str | None = None,
        counts: dict[str, int] | None = None,
    ) -> None:
        """Raise a DataError naming `where`, or with --skip-bad record the drop in the report."""
        report.bad(where, reason, skip_bad=self.options.skip_bad, record_id=record_id, counts=counts)

    def bad_counted(self, report: ConversionReport, key: str) -> Callable[[str, str], None]:
        """A reader's handler for a record it cannot read: one `key` counted in, then `bad` (dropped under
        --skip-bad, counted as one `key`)."""

        def on_bad(where: str, reason: str) -> None:
            report.count_in(key)
            self.bad(report, where, reason, counts={key: 1})

        return on_bad


converters: Registry[type[Converter]] = Registry(
    "converters",
    {
        "redial": "data_converters.redial:ReDialConverter",
        "inspired": "data_converters.inspired:InspiredConverter",
        "opendialkg": "data_converters.opendialkg:OpenDialKGConverter",
        "imdb": "data_converters.imdb:IMDBConverter",
        "iard": "data_converters.iard:IARDConverter",
        "movielens": "data_converters.movielens:MovieLensConverter",
        "crsarena-dial": "data_converters.crsarena_dial:CRSArenaDialConverter",
        "crsarena_dial": "data_converters.crsarena_dial:CRSArenaDialConverter",
        "crsarena-eval": "data_converters.crsarena_eval:CRSArenaEvalConverter",
        "crsarena_eval": "data_converters.crsarena_eval:CRSArenaEvalConverter",
    },
)
