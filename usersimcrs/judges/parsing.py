"""Reading a score out of a judge's reply: structured output first, tolerant parsing second,
bounded retries, and ``None`` with a status (never 0) when nothing valid comes back."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from usersimcrs.core.json_types import JSON, JSONObject, JSONSchema
from usersimcrs.core.secrets import public_url
from usersimcrs.core.usage import Usage
from usersimcrs.errors import UserError
from usersimcrs.judges.base import Status
from usersimcrs.judges.prompt_text import JudgePrompts, builtin_prompts
from usersimcrs.llm.base import LLM, LLMResult, Message
from usersimcrs.llm.failures import PermanentLLMError
from usersimcrs.llm.structured import json_candidates

_NUMBER = r"(-?\d+(?:\.\d+)?)"


@dataclass(frozen=True)
class ScoreSpec:
    """What a valid score looks like and under which JSON keys it comes."""

    low: float
    high: float
    allowed: tuple[float, ...] | None = None
    integer: bool = True
    score_key: str = "rating"
    text_key: str = "rationale"
    text_chars: int = 400

    def schema(self) -> JSONSchema:
        """The JSON schema sent to the LLM (bounds included so constrained decoding respects them)."""
        score: JSONSchema = {"type": "integer" if self.integer else "number"}
        if self.allowed is not None:
            score["enum"] = [int(v) if self.integer else v for v in self.allowed]
        else:
            score["minimum"], score["maximum"] = self.low, self.high
        return {
            "type": "object",
            "properties": {
                self.text_key: {"type": "string", "maxLength": self.text_chars},
                self.score_key: score,
            },
            "required": [self.text_key, self.score_key],
            "additionalProperties": False,
        }

    def check(self, value: float) -> str | None:
        """Why `value` is not a valid score (None when it is)."""
        if math.isnan(value) or math.isinf(value):
            return f"score {value} is not a finite number"
        if self.integer and not float(value).is_integer():
            return f"score {value:g} is not an integer"
        if not self.low <= value <= self.high:
            return f"score {value:g} outside {self.low:g}-{self.high:g}"
        if self.allowed is not None and value not in self.allowed:
            return f"score {value:g} not one of {', '.join(f'{a:g}' for a in self.allowed)}"
        return None


@dataclass
class ParsedScore:
    """The outcome of reading one reply."""

    value: float | None
    rationale: str
    status: Status
    error: str | None = None


def as_number(value: JSON) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*" + _NUMBER + r"\s*(?:/\s*\d+)?\s*", value)
        if match:
            return float(match.group(1))
    return None


def _from_json(text: str, parsed: JSON, spec: ScoreSpec) -> tuple[float | None, str, bool]:
    """(score, rationale, found_key) from the provider's parsed object or the first JSON object in text."""
    candidates = [parsed] if isinstance(parsed, dict) else []
    candidates += [c for c in json_candidates(text or "") if isinstance(c, dict)]
    for candidate in candidates:
        if spec.score_key in candidate:
            rationale = candidate.get(spec.text_key)
            return as_number(candidate[spec.score_key]), rationale if isinstance(rationale, str) else "", True
    return None, "", False


_TOLERANT = [
    re.compile(r"<rating>\s*" + _NUMBER + r"\s*</rating>", re.IGNORECASE),
    re.compile(r"<score>\s*" + _NUMBER + r"\s*</score>", re.IGNORECASE),
    re.compile(r"\b(?:rating|score|overall score|final score)\s*[:=]\s*\**\s*" + _NUMBER, re.IGNORECASE),
]


def _tolerant(text: str) -> float | None:
    """The last score written as a rating tag or as ``Rating: N`` / ``Score: N``."""
    for pattern in _TOLERANT:
        matches = pattern.findall(text or "")
        if matches:
            return float(matches[-1])
    return None


def read_score(text: str, parsed: JSON, spec: ScoreSpec) -> ParsedScore:
    """Read one reply: JSON (structured) first, then a rating tag or ``Rating: N``; validate the range."""
    value, rationale, found = _from_json(text, parsed, spec)
    if value is None:
        value = _tolerant(text)
        if value is not None:
            rationale = (text or "").strip()
    if value is None:
        why = f"'{spec.score_key}' is not a number" if found else "no score found in the reply"
        return ParsedScore(None, rationale, "parse_error", why)
    problem = spec.check(value)
    if problem:
        return ParsedScore(None, rationale, "out_of_range", problem)
    return ParsedScore(value, rationale[: spec.text_chars * 4], "ok")


def correction(problem: str, spec: ScoreSpec, prompts: JudgePrompts | None = None) -> str:
    """The follow-up message after an unusable reply (text from the judge prompts file)."""
    return (prompts or builtin_prompts()).text(
        "correction",
        problem=problem,
        text_key=spec.text_key,
        score_key=spec.score_key,
        low=f"{spec.low:g}",
        high=f"{spec.high:g}",
    )


@dataclass(frozen=True)
class BatchSpec:
    """Several criteria scored in one reply: one ``{text, score}`` object per criterion name."""

    specs: dict[str, ScoreSpec]

    def schema(self) -> JSONSchema:
        """One required property per criterion, each the single-criterion schema (bounds included)."""
        return {
            "type": "object",
            "properties": {name: spec.schema() for name, spec in self.specs.items()},
            "required": list(self.specs),
            "additionalProperties": False,
        }


def _batch_object(text: str, parsed: JSON, names: list[str]) -> JSONObject | None:
    """The provider's parsed object, else the first JSON object in `text` holding a criterion key."""
    candidates = [parsed] if isinstance(parsed, dict) else []
    candidates += [c for c in json_candidates(text or "") if isinstance(c, dict)]
    for candidate in candidates:
        if any(name in candidate for name in names):
            return candidate
    return None


def read_batch(text: str, parsed: JSON, batch: BatchSpec) -> dict[str, ParsedScore]:
    """Each criterion's part of one batched reply, read and range-checked on its own: a missing or
    unusable part is None with its status, whatever the other parts hold."""
    found = _batch_object(text, parsed, list(batch.specs))
    out: dict[str, ParsedScore] = {}
    for name, spec in batch.specs.items():
        part = None if found is None else found.get(name)
        if part is None:
            why = (
                "no JSON object with the criteria in the reply" if found is None else f"the reply has no '{name}' part"
            )
            out[name] = ParsedScore(None, "", "parse_error", why)
        elif isinstance(part, dict):
            out[name] = read_score("", part, spec)
        else:  # a bare score for the criterion
            value = as_number(part)
            problem = "not a number" if value is None else spec.check(value)
            status: Status = "ok" if problem is None else ("parse_error" if value is None else "out_of_range")
            out[name] = ParsedScore(value if problem is None else None, "", status, problem and f"'{name}': {problem}")
    return out


@dataclass
class ScoreOutcome:
    """A score after up to `max_attempts` calls, with everything spent on it."""

    value: float | None
    rationale: str
    status: Status
    error: str | None
    usage: Usage
    attempts: int
    model: str
    replies: list[str] = field(default_factory=list)


def _usage_of(result: LLMResult) -> Usage:
    """One answered request: a backend call, or a cache hit (whose tokens are those first spent on it)."""
    return Usage(
        calls=0 if result.cached else 1,
        cache_hits=1 if result.cached else 0,
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
    )


def model_key(llm: LLM | LLMResult) -> str:
    """``backend:model`` of an LLM (or of a result), the model identity recorded on a judgment."""
    backend, model = getattr(llm, "backend", "") or "", getattr(llm, "model", "") or ""
    return f"{backend}:{model}" if backend and model else model


def permanent_failure(llm: LLM, exc: PermanentLLMError) -> PermanentLLMError:
    """`exc` with the model and server named, so that the one line the user sees says what to fix."""
    url = public_url(getattr(getattr(llm, "config", None), "base_url", None))
    where = f"model {model_key(llm) or '?'}" + (f" at {url}" if url else "")
    return PermanentLLMError(f"{exc.reason} ({where})")


async def ask_score(
    llm: LLM,
    messages: list[Message],
    spec: ScoreSpec,
    *,
    component: str,
    max_attempts: int = 3,
    temperature: float = 0.0,
    max_tokens: int = 256,
    seed: int | None = 0,
    prompts: JudgePrompts | None = None,
) -> ScoreOutcome:
    """Ask for a score; on an unreadable or invalid reply, say what was wrong and ask again (bounded).

    A transient LLM failure (after the provider's own retries) ends the attempts with status
    ``llm_error``; a permanent one (refused key, unknown model, wrong URL) or a configuration error
    is raised, since every other call would fail the same way.
    """
    usage = Usage()
    replies: list[str] = []
    conversation = list(messages)
    model = model_key(llm)
    last = ParsedScore(None, "", "parse_error", "no attempt made")
    for attempt in range(1, max_attempts + 1):
        result = await _call(llm, conversation, temperature, max_tokens, seed, spec.schema(), component)
        if isinstance(result, str):  # a transient backend failure is recorded, not raised
            return ScoreOutcome(None, "", "llm_error", result, usage, attempt, model, replies)
        usage = usage + _usage_of(result)
        model = model_key(result) or model
        replies.append(result.text)
        last = read_score(result.text, result.parsed, spec)
        if last.status == "ok":
            return ScoreOutcome(last.value, last.rationale, "ok", None, usage, attempt, model, replies)
        conversation = [
            *messages,
            Message(role="assistant", content=(result.text or "")[:2000]),
            Message(role="user", content=correction(last.error or last.status, spec, prompts)),
        ]
    return ScoreOutcome(None, last.rationale, last.status, last.error, usage, max_attempts, model, replies)


@dataclass
class BatchOutcome:
    """The criteria of one batched request after up to `max_attempts` calls."""

    results: dict[str, ParsedScore]
    usage: Usage
    attempts: int
    model: str
    replies: list[str] = field(default_factory=list)
    llm_error: str | None = None


async def ask_batch(
    llm: LLM,
    messages: list[Message],
    batch: BatchSpec,
    *,
    component: str,
    max_attempts: int = 3,
    temperature: float = 0.0,
    max_tokens: int = 256,
    seed: int | None = 0,
    prompts: JudgePrompts | None = None,
) -> BatchOutcome:
    """Ask for every criterion at once; a criterion with a valid part is done, the others are asked
    for again with a correction naming them (bounded), and stay None with their status at the end.

    Failures are handled as in `ask_score`: transient -> every open criterion ``llm_error``;
    permanent or configuration errors are raised.
    """
    p = prompts or builtin_prompts()
    usage = Usage()
    replies: list[str] = []
    conversation = list(messages)
    model = model_key(llm)
    names = list(batch.specs)
    results: dict[str, ParsedScore] = {n: ParsedScore(None, "", "parse_error", "no attempt made") for n in names}
    attempt = 0
    for attempt in range(1, max_attempts + 1):
        result = await _call(llm, conversation, temperature, max_tokens, seed, batch.schema(), component)
        if isinstance(result, str):  # a transient backend failure is recorded, not raised
            error = result
            for name in names:
                if results[name].status != "ok":
                    results[name] = ParsedScore(None, "", "llm_error", error)
            return BatchOutcome(results, usage, attempt, model, replies, llm_error=error)
        usage = usage + _usage_of(result)
        model = model_key(result) or model
        replies.append(result.text)
        for name, parsed in read_batch(result.text, result.parsed, batch).items():
            if results[name].status != "ok":
                results[name] = parsed
        open_names = [n for n in names if results[n].status != "ok"]
        if not open_names:
            break
        first = batch.specs[open_names[0]]
        problems = "; ".join(f"{n}: {results[n].error or results[n].status}" for n in open_names)
        conversation = [
            *messages,
            Message(role="assistant", content=(result.text or "")[:4000]),
            Message(
                role="user",
                content=p.text(
                    "batch_correction",
                    names=", ".join(open_names),
                    problems=problems,
                    all_names=", ".join(names),
                    text_key=first.text_key,
                    score_key=first.score_key,
                ),
            ),
        ]
    return BatchOutcome(results, usage, attempt, model, replies)


async def _call(
    llm: LLM,
    conversation: list[Message],
    temperature: float,
    max_tokens: int,
    seed: int | None,
    schema: JSONSchema,
    component: str,
) -> LLMResult | str:
    """One judge call: a permanent failure (bad key, unknown model) is raised and stops the run; a
    transient one comes back as its one-line reason, recorded on the judgment."""
    try:
        return await llm.complete(
            conversation, temperature=temperature, max_tokens=max_tokens, seed=seed, schema=schema, component=component
        )
    except PermanentLLMError as exc:
        raise permanent_failure(llm, exc) from None
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - transient: the caller records it
        return f"{type(exc).__name__}: {exc}"[:500]
