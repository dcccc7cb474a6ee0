"""The validity gate: per-conversation flags, each owned by the side that caused it.

A conversation that crashed after two utterances must not enter the averages as if it were a
finished one (the anchor's judge gave such dialogues 4.7-4.9 of 5). But who broke it matters:

- what the **CRS** broke (it failed, looped, answered nothing) is the CRS's own result and always
  counts against it: such conversations stay in the headline subset "all";
- what the **simulator** or the **toolkit** broke (the simulated user failed or named its hidden
  target; a setup error) says nothing about the CRS: such conversations are *excluded* from every
  summary, and listed with their reason and count.

Subsets (see docs/metrics.md): ``all`` = every conversation the CRS took part in (all stored ones
minus the excluded); ``valid`` = those of ``all`` without any invalidating flag (a labelled
sensitivity check, never the headline).

Flags (`FLAG_CHECKS`, one entry each; a new flag is one more entry):

- ``error``: the run recorded an error on it (status "failed"), whoever caused it;
- ``crs_error`` / ``simulator_error`` / ``toolkit_error``: the same, by the side that was running
  when it failed (recorded by the engine; older runs and imports: guessed from the error text);
- ``too_short``: fewer than `min_utterances` utterances or `min_system_turns` system turns;
- ``repetition_loop``: the same system text (case and spaces folded) at least `repeat_k` times;
- ``empty_reply``: a system turn with neither text nor items;
- ``target_leakage``: a target title appears in a USER utterance of a simulator that must not say it;
- ``judge_parse_failure``: a judgment of the conversation has no value (the judge's reply did not parse);
- ``truncated_by_turn_limit``: the run stopped it at the turn limit (end reason "max_turns").
- ``user_fallback``: an LLM user sent a canned utterance instead of its model's unusable answer
  (a user turn labelled ``generation: fallback:*``); the words were not the model's;
- ``user_repaired``: an LLM user's turn is the model's words repaired (prose where JSON was asked
  for, or a cut-off answer closed; ``generation: repaired:*``).
  Both are None (not checked) for simulators that label no user turn (rule-based users).

A flag that could not be evaluated is None ("not checked"), never False. An unchecked flag never
invalidates or excludes a conversation, and its rate is None over n = 0 checked conversations.

Words: an *error* is a conversation the run recorded an error on (any side); a *CRS failure* is one
that counts against the CRS: its errors, loops and empty replies (`crs_failure_breakdown`). Console,
tables and reports use these words, so "errors 0" beside "CRS failures 12 (12 loops, 0 errors)" agree.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from usersimcrs.core.dialogue import FAILURE_SIDE, Dialogue
from usersimcrs.core.generation import user_turn_kinds
from usersimcrs.core.items import normalize_title
from usersimcrs.core.wording import count_of
from usersimcrs.metrics.targets import targets_of

Side = Literal["crs", "simulator", "toolkit", "judge", "design", "any"]
FailureSide = Literal["crs", "simulator", "toolkit"]
EXCLUDABLE_SIDES = ("simulator", "toolkit")  # what a gate may exclude: never the CRS's own failures
_SPACES = re.compile(r"\s+")


class FlagSpec(BaseModel):
    """One validity flag: its name, the side responsible when it is set, and its default role."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    side: Side
    meaning: str
    invalidating: bool = Field(False, description="by default, leaves the 'valid' subset")
    excluding: bool = Field(False, description="by default, leaves every subset (simulator or toolkit broke it)")
    kind: str | None = Field(None, description="a CRS-side flag's word in the CRS-failure breakdown (singular)")


@dataclass(frozen=True)
class FlagContext:
    """What a flag check may read besides the dialogue."""

    options: ValidityOptions
    simulator: str | None = None
    judged: frozenset[str] = frozenset()
    unparsed: frozenset[str] = frozenset()
    max_turns_reason: str = "max_turns"


@dataclass(frozen=True)
class FlagCheck:
    """A flag and the function that evaluates it (True / False / None = not checked)."""

    spec: FlagSpec
    check: Callable[[Dialogue, FlagContext], bool | None] = field(compare=False)


def _fold(text: str) -> str:
    return _SPACES.sub(" ", text.strip().lower())


def repetition_loop(dialogue: Dialogue, k: int) -> bool:
    """The same (folded) non-empty system text occurs k or more times."""
    counts = Counter(_fold(u.text) for u in dialogue.agent_turns if u.text.strip())
    return any(n >= k for n in counts.values())


def empty_reply(dialogue: Dialogue) -> bool:
    """Some system turn carried neither text nor items (the CRS answered nothing)."""
    return any(not u.text.strip() and not u.items for u in dialogue.agent_turns)


def failure_side(dialogue: Dialogue) -> FailureSide | None:
    """Who broke a failed conversation: the side the engine recorded, else a guess from the error text.

    Older runs and imported dialogues carry no side: a connector error is the CRS's, an LLM error
    (only LLM users raise it; the LLM CRS wraps its own as a connector error) the simulator's, and
    anything else the toolkit's. None when the conversation did not fail.
    """
    if dialogue.status != "failed":
        return None
    recorded = dialogue.metadata.get(FAILURE_SIDE)
    if recorded in ("crs", "simulator", "toolkit"):
        return recorded
    error = dialogue.error or ""
    if re.search(r"\b(?:ConnectorError|CRSError|connector returned)\b", error):
        return "crs"
    if re.search(r"\bLLMError\b", error):
        return "simulator"
    return "toolkit"


def _contains_title(text: str, key: str) -> bool:
    """Whole-word match of a normalised title inside normalised text."""
    folded = " " + normalize_title(text) + " "
    return f" {key} " in folded


def leaked_targets(dialogue: Dialogue, min_chars: int = 4) -> list[str]:
    """Target titles that a USER utterance says outright."""
    keys = checkable_titles(dialogue, min_chars)
    leaked = []
    for key, title in keys.items():
        if any(_contains_title(u.text, key) for u in dialogue.user_turns):
            leaked.append(title)
    return leaked


def checkable_titles(dialogue: Dialogue, min_chars: int = 4) -> dict[str, str]:
    """Normalised target title -> display title, for targets whose title is long enough to check."""
    keys = {}
    for target in targets_of(dialogue):
        key = normalize_title(target.title or target.raw or "")
        if len(key) >= min_chars:
            keys[key] = target.title or target.raw or key
    return keys


def simulator_of(dialogue: Dialogue, default: str | None) -> str | None:
    """The simulator type that produced the dialogue: its metadata when recorded, else the run's."""
    value = dialogue.metadata.get("simulator")
    if isinstance(value, dict):
        value = value.get("type")
    return str(value) if value else default


def _checks_leakage(simulator: str | None, options: ValidityOptions) -> bool:
    if options.check_leakage is not None:
        return options.check_leakage
    name = (simulator or "").lower().replace("-", "_")
    return any(s.lower().replace("-", "_") in name for s in options.leakage_simulators)


def parse_failures(judgments: Iterable[dict[str, Any]]) -> set[str]:
    """Conversation IDs with at least one judgment whose value is missing."""
    return {str(j.get("conversation_id")) for j in judgments if j.get("value") is None}


def leakage_flag(dialogue: Dialogue, simulator: str | None, options: ValidityOptions) -> tuple[bool | None, list[str]]:
    """(target_leakage, leaked titles); None when not checked: simulator exempt or no checkable target title."""
    if not _checks_leakage(simulator_of(dialogue, simulator), options):
        return None, []
    if not checkable_titles(dialogue, options.min_title_chars):
        return None, []
    leaks = leaked_targets(dialogue, options.min_title_chars)
    return bool(leaks), leaks


def user_turn_flags(dialogue: Dialogue) -> dict[str, bool | None]:
    """`user_fallback` and `user_repaired` of one conversation; None when no user turn carries a label."""
    kinds = user_turn_kinds(dialogue.utterances)
    if not kinds["labelled"]:
        return {"user_fallback": None, "user_repaired": None}
    return {"user_fallback": kinds["fallback"] > 0, "user_repaired": kinds["repaired"] > 0}


TURN_COUNTS = ("user_turns_canned", "user_turns_labelled")
"""Per-conversation columns: the LLM user's canned (fallback) turns and its turns with a generation label."""


def user_turn_counts(dialogue: Dialogue) -> dict[str, int | None]:
    """`user_turns_canned` and `user_turns_labelled` of one conversation; None for rule-based users (no labels)."""
    kinds = user_turn_kinds(dialogue.utterances)
    if not kinds["labelled"]:
        return dict.fromkeys(TURN_COUNTS)
    return {"user_turns_canned": kinds["fallback"], "user_turns_labelled": kinds["labelled"]}


def canned_share(table: pd.DataFrame, metric: str | None = None) -> float | None:
    """Share of the LLM user's turns that were canned, over the rows where `metric` has a value (every row
    when None or not a column); None when no user turn is labelled (rule-based users, older tables)."""
    if not set(TURN_COUNTS) <= set(table.columns):
        return None
    rows = table[table[metric].notna()] if metric is not None and metric in table else table
    labelled = pd.to_numeric(rows["user_turns_labelled"], errors="coerce").sum()
    if not labelled:
        return None
    return float(pd.to_numeric(rows["user_turns_canned"], errors="coerce").sum() / labelled)


def _too_short(d: Dialogue, ctx: FlagContext) -> bool:
    return len(d.utterances) < ctx.options.min_utterances or len(d.agent_turns) < ctx.options.min_system_turns


FLAG_CHECKS: tuple[FlagCheck, ...] = (
    FlagCheck(
        FlagSpec(name="error", side="any", meaning="the run recorded an error on it", invalidating=True),
        lambda d, ctx: d.status == "failed",
    ),
    FlagCheck(
        FlagSpec(
            name="crs_error",
            side="crs",
            meaning="an error inside the CRS ended it (connector error, timeout, bad reply)",
            kind="error",
        ),
        lambda d, ctx: failure_side(d) == "crs",
    ),
    FlagCheck(
        FlagSpec(
            name="simulator_error",
            side="simulator",
            meaning="an error inside the simulated user ended it",
            excluding=True,
        ),
        lambda d, ctx: failure_side(d) == "simulator",
    ),
    FlagCheck(
        FlagSpec(
            name="toolkit_error",
            side="toolkit",
            meaning="an error outside CRS and simulator ended it (setup, toolkit; unattributed errors of imports)",
            excluding=True,
        ),
        lambda d, ctx: failure_side(d) == "toolkit",
    ),
    FlagCheck(
        # the user ended it before the CRS could show much; a human may leave a bad CRS that early,
        # so by default it only leaves 'valid' (a config may exclude it: `excluding: [..., too_short]`)
        FlagSpec(
            name="too_short",
            side="simulator",
            meaning="fewer utterances or system turns than the gate's minimum (the user ended it early)",
            invalidating=True,
        ),
        _too_short,
    ),
    FlagCheck(
        FlagSpec(
            name="repetition_loop",
            side="crs",
            meaning="the CRS said the same text repeat_k times",
            invalidating=True,
            kind="loop",
        ),
        lambda d, ctx: repetition_loop(d, ctx.options.repeat_k),
    ),
    FlagCheck(
        FlagSpec(
            name="empty_reply",
            side="crs",
            meaning="a CRS turn had neither text nor items",
            invalidating=True,
            kind="empty reply",
        ),
        lambda d, ctx: empty_reply(d),
    ),
    FlagCheck(
        FlagSpec(
            name="target_leakage",
            side="simulator",
            meaning="the simulated user named a target it must only describe",
            invalidating=True,
            excluding=True,
        ),
        lambda d, ctx: leakage_flag(d, ctx.simulator, ctx.options)[0],
    ),
    FlagCheck(
        FlagSpec(name="judge_parse_failure", side="judge", meaning="a judgment of it did not parse"),
        lambda d, ctx: (d.conversation_id in ctx.unparsed) if d.conversation_id in ctx.judged else None,
    ),
    FlagCheck(
        FlagSpec(name="truncated_by_turn_limit", side="design", meaning="the run stopped it at the turn limit"),
        lambda d, ctx: (d.end_reason == ctx.max_turns_reason) if d.end_reason is not None else None,
    ),
    FlagCheck(
        # the CRS answered words the LLM user's model did not write: a sensitivity question, not the
        # CRS's fault; a config may exclude it (`excluding: [..., user_fallback]`)
        FlagSpec(
            name="user_fallback",
            side="simulator",
            meaning="an LLM user sent a canned utterance instead of its model's unusable answer",
            invalidating=True,
        ),
        lambda d, ctx: user_turn_flags(d)["user_fallback"],
    ),
    FlagCheck(
        FlagSpec(
            name="user_repaired",
            side="simulator",
            meaning="an LLM user's turn is its model's words repaired (prose for JSON, a cut answer closed)",
        ),
        lambda d, ctx: user_turn_flags(d)["user_repaired"],
    ),
)
FLAG_SPECS: dict[str, FlagSpec] = {c.spec.name: c.spec for c in FLAG_CHECKS}
FLAGS = list(FLAG_SPECS)
# the error flags' names before they were named errors (a config may still list them)
RENAMED_FLAGS = {
    "failed": "error",
    "crs_failed": "crs_error",
    "simulator_failed": "simulator_error",
    "toolkit_failed": "toolkit_error",
}
SUMMARY_FLAGS = ["crs_failure", "excluded", "valid"]  # derived per-conversation columns with a rate


class ValidityOptions(BaseModel):
    """Thresholds of the gate, which flags leave the 'valid' subset and which leave every subset."""

    model_config = ConfigDict(extra="forbid")

    min_utterances: int = Field(3, ge=0)
    min_system_turns: int = Field(1, ge=0)
    repeat_k: int = Field(3, ge=2)
    min_title_chars: int = Field(4, ge=1, description="shorter target titles are not checked for leakage")
    leakage_simulators: list[str] = Field(
        default_factory=lambda: ["target_biased", "target_free", "pepper", "ievalm"],
        description="simulator types (substring match, case-insensitive) that must never say a target title",
    )
    check_leakage: bool | None = Field(None, description="None = only for the simulator types above")
    invalidating: list[str] = Field(
        default_factory=lambda: [s.name for s in FLAG_SPECS.values() if s.invalidating],
        description="flags that leave the 'valid' subset (the sensitivity check)",
    )
    excluding: list[str] = Field(
        default_factory=lambda: [s.name for s in FLAG_SPECS.values() if s.excluding],
        description="flags of what the simulator or toolkit broke: such conversations leave every subset",
    )

    @field_validator("invalidating", "excluding", mode="before")
    @classmethod
    def _current_names(cls, value: Any) -> Any:
        """Old error-flag names (`crs_failed`, ...) read as their current ones."""
        return (
            [RENAMED_FLAGS.get(f, f) if isinstance(f, str) else f for f in value] if isinstance(value, list) else value
        )

    @model_validator(mode="after")
    def _known_flags_and_sides(self) -> ValidityOptions:
        for key in ("invalidating", "excluding"):
            unknown = [f for f in getattr(self, key) if f not in FLAG_SPECS]
            if unknown:
                raise ValueError(f"{key}: unknown flag(s) {', '.join(unknown)}; known: {', '.join(FLAGS)}")
        own = [f for f in self.excluding if FLAG_SPECS[f].side not in EXCLUDABLE_SIDES]
        if own:
            raise ValueError(
                f"excluding: {', '.join(own)} can be the CRS's own failure, which always counts against the CRS; "
                f"only {' or '.join(EXCLUDABLE_SIDES)} flags can be excluded"
            )
        return self


def flag_conversations(
    dialogues: list[Dialogue],
    *,
    judgments: Iterable[dict[str, Any]] = (),
    simulator: str | None = None,
    max_turns_reason: str = "max_turns",
    options: ValidityOptions | None = None,
) -> pd.DataFrame:
    """One row per conversation: every flag, `failure_side`, `leaked`, and the derived columns.

    `crs_failure`: a CRS-side flag is set (it counts against the CRS, whatever else is set);
    `excluded`: an excluding flag is set and no CRS-side one; `exclusion`: those flags' names;
    `valid`: not excluded and no invalidating flag set.
    """
    options = options or ValidityOptions()
    judgments = list(judgments)
    ctx = FlagContext(
        options=options,
        simulator=simulator,
        judged=frozenset(str(j.get("conversation_id")) for j in judgments),
        unparsed=frozenset(parse_failures(judgments)),
        max_turns_reason=max_turns_reason,
    )
    rows = []
    for d in dialogues:
        row: dict[str, Any] = {"conversation_id": d.conversation_id}
        for check in FLAG_CHECKS:
            row[check.spec.name] = check.check(d, ctx)
        row["failure_side"] = failure_side(d)
        row["leaked"] = "; ".join(leakage_flag(d, simulator, options)[1])
        row.update(user_turn_counts(d))
        row.update(derived_columns(row, options))
        rows.append(row)
    columns = ["conversation_id", *FLAGS, "failure_side", "leaked", *TURN_COUNTS, "crs_failure", "excluded"]
    columns += ["exclusion", "valid"]
    table = pd.DataFrame(rows, columns=columns)
    return table.astype({flag: object for flag in FLAGS})


def derived_columns(row: dict[str, Any], options: ValidityOptions) -> dict[str, Any]:
    """crs_failure, excluded, exclusion and valid from one row's flags (see `flag_conversations`)."""
    crs_failure = any(row.get(name) is True for name, spec in FLAG_SPECS.items() if spec.side == "crs")
    excluding = [f for f in options.excluding if row.get(f) is True]
    excluded = bool(excluding) and not crs_failure
    invalid = any(row.get(f) is True for f in options.invalidating)
    return {
        "crs_failure": crs_failure,
        "excluded": excluded,
        "exclusion": "; ".join(excluding) if excluded else "",
        "valid": not excluded and not invalid,
    }


def is_set(values: pd.Series) -> pd.Series:
    """True where a flag is set; unchecked (None/NaN) and False are not set. Works on CSV-read columns too."""
    return values.map(
        lambda v: (
            v is True
            or (isinstance(v, (int, float)) and not pd.isna(v) and bool(v))
            or (isinstance(v, str) and v.strip().lower() == "true")
        )
    )


def is_checked(values: pd.Series) -> pd.Series:
    """True where a flag was evaluated (True or False), False where it holds None/NaN ("not checked")."""
    return values.map(lambda v: not (v is None or (isinstance(v, float) and pd.isna(v)) or v == ""))


def subset_masks(table: pd.DataFrame) -> dict[str, pd.Series]:
    """Row masks of the two subsets: "all" (not excluded) and "valid" (the sensitivity check).

    A table without the columns (e.g. an older metrics.csv) counts every row in "all" and reads
    "valid" as given.
    """
    excluded = is_set(table["excluded"]) if "excluded" in table else pd.Series(False, index=table.index)
    counted = ~excluded
    valid = is_set(table["valid"]) if "valid" in table else counted
    return {"all": counted, "valid": counted & valid}


def flag_counts(flags: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Flag -> (conversations with it set, conversations where it was checked), and the derived columns."""
    out = {}
    for flag in [*FLAGS, *SUMMARY_FLAGS]:
        column = flags[flag] if flag in flags else pd.Series([], dtype=object)
        out[flag] = (int(is_set(column).sum()), int(is_checked(column).sum()))
    return out


def crs_failure_breakdown(flags: pd.DataFrame) -> dict[str, int]:
    """CRS failures by kind ('error', 'loop', 'empty reply' -> conversations), each CRS-side flag once;
    a conversation that both looped and ended in an error is in both."""
    return {
        spec.kind or name: int(is_set(flags[name]).sum()) if name in flags else 0
        for name, spec in FLAG_SPECS.items()
        if spec.side == "crs"
    }


def crs_failure_text(flags: pd.DataFrame) -> str:
    """'0 errors, 12 loops, 0 empty replies': the words of every CRS-failure label (console, tables, reports)."""
    return ", ".join(count_of(n, kind) for kind, n in crs_failure_breakdown(flags).items())


def flag_rates(flags: pd.DataFrame) -> dict[str, float | None]:
    """Share of checked conversations carrying each flag (and crs_failure, excluded, valid); None = n = 0."""
    return {flag: (count / checked if checked else None) for flag, (count, checked) in flag_counts(flags).items()}
