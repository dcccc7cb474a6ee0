"""Target-biased simulator in the iEvaLM / CoRE style (`target_biased`).

The user knows its target item(s) by attributes only (genres, director, stars, plot, ...) and
never says a title: every utterance is filtered for target titles. CoRE's turn rules (000 §6.4):
a dialogue has 3 to 5 rounds; it ends once a target was hit and at least 3 rounds passed; a hit
before round 3 makes the user ask the CRS to introduce that item; after round 5 without a hit it
ends. When it ends, the user rates persuasiveness (iEvaLM). An optional selected/residual split of
the targets (PEPPER, 002 §3.3) describes only the selected ones and records both sets so metrics
can compute recall on each.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NotRequired, TypedDict

from pydantic import Field, model_validator

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.generation import TEMPLATE
from usersimcrs.core.items import Item, display_title, normalize_title, split_year
from usersimcrs.core.json_types import JSON
from usersimcrs.core.profile import UserProfile
from usersimcrs.llm.base import Message
from usersimcrs.simulators.base import Stop
from usersimcrs.simulators.llm_base import Generated, LLMSimulatorConfig, LLMUserSimulator
from usersimcrs.simulators.prompting import fill, optional, parse_json_object, render_history, squeeze, user_turn_count
from usersimcrs.user_model.persona import render_persona

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

_ARTICLE = re.compile(r"^(the|a|an)\s+", re.I)


class TargetBiasedConfig(LLMSimulatorConfig):
    """Options of the target-biased simulator (CoRE: 3 to 5 rounds)."""

    type: str = "target_biased"
    min_rounds: int = Field(3, ge=1)
    max_rounds: int = Field(5, ge=1)
    describe_slots: list[str] | None = Field(None, description="attributes the user remembers (None: all)")
    max_values_per_slot: int = Field(5, ge=1)
    selected_share: float | None = Field(None, gt=0.0, le=1.0, description="PEPPER split: share of targets described")
    selected_count: int | None = Field(None, ge=1, description="PEPPER split: number of targets described")
    hit_on: Literal["selected", "all"] = Field("selected", description="which targets count as a hit for the rules")
    persuasiveness: bool = True
    persuasiveness_max_tokens: int = Field(24, ge=4, le=512)

    @model_validator(mode="after")
    def _rounds_in_order(self) -> TargetBiasedConfig:
        if self.min_rounds > self.max_rounds:
            raise ValueError("min_rounds must not exceed max_rounds")
        return self


def title_patterns(title: str) -> list[re.Pattern[str]]:
    """Regexes that find a title in free text: any case, tolerant to punctuation, with and without article.

    Matching is case-insensitive even for one-word titles ("Heat", "Up"): never leaking a title
    matters more than the odd masked common word.
    """
    name, _ = split_year(display_title(title))
    variants = {name, re.sub(r"\s*\(.*?\)\s*", " ", name).strip()}
    variants |= {_ARTICLE.sub("", v) for v in variants}
    patterns = []
    for variant in sorted(variants, key=len, reverse=True):
        words = re.findall(r"\w+", variant)
        if not words:
            continue
        body = r"\W+".join(re.escape(w) for w in words)
        patterns.append(re.compile(rf"(?<!\w){body}(?!\w)", re.I))
    return patterns


def mask_titles(text: str, patterns: list[re.Pattern[str]], mask: str) -> tuple[str, int]:
    """Replace every title match with `mask`; returns the text and the number of replacements."""
    count = 0
    for pattern in patterns:
        text, n = pattern.subn(mask, text)
        count += n
    return text, count


def describe_item(item: Item, slots: list[str] | None, max_values: int) -> str:
    """An item's attributes without its title (the user has forgotten the name)."""
    parts = []
    for slot in slots if slots is not None else list(item.attributes):
        values = item.values(slot)
        if values:
            parts.append(f"{slot}: {', '.join(values[:max_values])}")
    if item.year and (slots is None or "year" in slots):
        parts.append(f"released around {item.year}")
    return "; ".join(parts)


class PersuasivenessRating(TypedDict):
    """The user's post-dialogue persuasiveness rating: `value` None with a `status` saying why when it could
    not be read (never 0); recorded on the dialogue's `persuasiveness_detail`."""

    value: int | None
    status: str  # ok | not_rated | unparsed | error: <reason>
    raw: NotRequired[str]  # the start of an answer that held no rating


class TargetBiasedSimulator(LLMUserSimulator):
    """Describes its target(s) without naming them and follows CoRE's round rules."""

    Config: ClassVar[type[TargetBiasedConfig]] = TargetBiasedConfig
    prompt_name: ClassVar[str] = "simulators/target_biased"

    def __init__(self, config: TargetBiasedConfig, context: RunContext, profile: UserProfile, seed: int) -> None:
        super().__init__(config, context, profile, seed)
        self.cfg: TargetBiasedConfig = config
        self.targets = list(profile.need.targets)
        self.selected, self.residual = self._split(self.targets)
        self._patterns = [p for t in self.targets for p in title_patterns(self._title(t))]
        self.rating: PersuasivenessRating = {"value": None, "status": "not_rated"}
        self.masked = 0

    def _split(self, targets: list[ItemRef]) -> tuple[list[ItemRef], list[ItemRef]]:
        """Selected (described) and residual targets, drawn with the conversation's rng."""
        cfg = self.cfg
        if not targets or (cfg.selected_count is None and cfg.selected_share is None):
            return list(targets), []
        share = cfg.selected_share or 0.0
        count = cfg.selected_count or max(1, round(share * len(targets)))
        chosen = set(self.rng.sample(range(len(targets)), min(count, len(targets))))
        return [t for i, t in enumerate(targets) if i in chosen], [t for i, t in enumerate(targets) if i not in chosen]

    def _title(self, ref: ItemRef) -> str:
        item = self._item(ref)
        return item.title if item else ref.title or ref.raw or ""

    def _item(self, ref: ItemRef) -> Item | None:
        items = self.context.items
        if items is None:
            return None
        if ref.id is not None and ref.id in items:
            return items.get(ref.id)
        return items.find_by_title(ref.title or ref.raw or "") if (ref.title or ref.raw) else None

    # -- hits ---------------------------------------------------------------------------------

    def hits_in(self, items: list[ItemRef]) -> dict[str, list[str]]:
        """Targets present in one recommendation list, split into selected and residual."""
        shown_keys = {ref.key() for ref in items}
        shown_titles = {normalize_title(ref.title or ref.raw or "") for ref in items} - {""}

        def hit(target: ItemRef) -> bool:
            return target.key() in shown_keys or normalize_title(self._title(target)) in shown_titles

        return {
            "selected": [self._label(t) for t in self.selected if hit(t)],
            "residual": [self._label(t) for t in self.residual if hit(t)],
        }

    def _label(self, ref: ItemRef) -> str:
        return ref.id or self._title(ref)

    def rank_of_hit(self, items: list[ItemRef]) -> int | None:
        """1-based position of the first rule-relevant target in a list."""
        wanted = self.selected if self.cfg.hit_on == "selected" else self.targets
        keys = {t.key() for t in wanted} | {f"title:{normalize_title(self._title(t))}" for t in wanted}
        for rank, ref in enumerate(items, start=1):
            if ref.key() in keys or f"title:{normalize_title(ref.title or ref.raw or '')}" in keys:
                return rank
        return None

    # -- turns --------------------------------------------------------------------------------

    async def start(self) -> Utterance | None:
        generated = await self.generate(self.messages([], "opening"), turn=0)
        return self.say(generated, 0, round=0, **self.end_ignored(generated))

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        turn = user_turn_count(dialogue)
        agent_turns = dialogue.agent_turns
        rounds = len(agent_turns)
        ranks = [self.rank_of_hit(u.items) for u in agent_turns]
        current = agent_turns[-1].items if agent_turns else []
        info = {
            "round": rounds,
            "hit": ranks[-1] is not None if ranks else False,
            **{f"hits_{k}": v for k, v in self.hits_in(current).items()},
        }
        ever_hit = any(r is not None for r in ranks)
        if ever_hit and rounds >= self.cfg.min_rounds:
            closing = "target_hit" if ranks[-1] is not None else "target_hit_earlier"
            return await self.stop("target_hit", dialogue, turn, info, closing=closing)
        if ranks and ranks[-1] is not None:
            rank = ranks[-1]
            asked = await self.generate(
                self.messages(dialogue.utterances, "introduce", rank=rank), turn=turn, history=dialogue.utterances
            )
            generated = self.usable(asked, turn)
            if generated.source.startswith("fallback"):  # the canned line of this step, still labelled a fallback
                generated = Generated(fill(self.prompt["introduce_fallback"], {"rank": rank}), False, generated.source)
            return self.say(generated, turn, ask_introduce=True, hit_rank=rank, **info, **self.end_ignored(asked))
        if rounds >= self.cfg.max_rounds:
            return await self.stop("max_rounds_no_hit", dialogue, turn, info)
        generated = await self.generate(
            self.messages(dialogue.utterances, "next"), turn=turn, history=dialogue.utterances
        )
        return self.say(generated, turn, **info, **self.end_ignored(generated))  # its rules decide the end

    async def stop(
        self, reason: str, dialogue: Dialogue, turn: int, info: dict[str, Any], *, closing: str | None = None
    ) -> Stop:
        """End with a closing line; the persuasiveness rating is taken now (finish() is synchronous)."""
        if self.cfg.persuasiveness:
            self.rating = await self.rate_persuasiveness(dialogue, turn)
        closing = self.prompt.get("closing", {}).get(closing or reason, "Thanks, bye.")
        return Stop(reason=reason, utterance=self.say(Generated(closing, True, f"{TEMPLATE}:closing"), turn, **info))

    def say(self, generated: Generated, turn: int, **metadata: Any) -> Utterance:
        """A user utterance with every target title masked out."""
        generated = self.usable(generated, turn)
        text, count = mask_titles(generated.text, self._patterns, self.prompt.get("mask", "that film"))
        if count:
            self.masked += count
            metadata["titles_masked"] = count
        if not re.search(r"\w", text.replace(self.prompt.get("mask", "that film"), "")):
            generated = self.substitute(turn, "only_target_titles", generated.raw)  # nothing left once masked
            text = generated.text
        return self.user_utterance(text, generation=generated.source, **metadata)

    def finish(self, dialogue: Dialogue) -> None:
        """Record the persuasiveness rating and the selected/residual targets on the dialogue."""
        dialogue.metadata["persuasiveness"] = self.rating.get("value")
        dialogue.metadata["persuasiveness_detail"] = {
            **self.rating,
            "scale": list(self.prompt.get("persuasiveness", {}).get("scale", [0, 2])),
        }
        hit_rounds = [i for i, u in enumerate(dialogue.agent_turns, start=1) if self.rank_of_hit(u.items) is not None]
        dialogue.metadata["targets"] = {
            "selected": [self._label(t) for t in self.selected],
            "residual": [self._label(t) for t in self.residual],
            "hit_rounds": hit_rounds,
            "first_hit_round": hit_rounds[0] if hit_rounds else None,
            "titles_masked": self.masked,
        }

    # -- prompts ------------------------------------------------------------------------------

    def remembered(self) -> str:
        """What the user remembers: attributes of the selected targets, with titles masked."""
        lines = []
        for ref in self.selected:
            item = self._item(ref)
            if item is None:
                continue
            described = describe_item(item, self.cfg.describe_slots, self.cfg.max_values_per_slot)
            described, _ = mask_titles(described, self._patterns, self.prompt.get("mask", "that film"))
            lines.append(fill(self.prompt.get("target_line", "- {value}"), {"value": described}))
        return "\n".join(lines) or "- only a vague feeling of what it was like"

    def messages(self, history: list[Utterance], mode: str, **extra: Any) -> list[Message]:
        fmt = "structured" if self.cfg.structured else "text"
        sections = self.prompt.get("sections", {})
        system = squeeze(
            fill(
                self.prompt["system"],
                {
                    "targets": self.remembered(),
                    "persona_section": optional(sections.get("persona"), render_persona(self.profile.persona)),
                },
            )
        )
        instruction = fill(self.prompt["instruction"][mode], extra)
        return self.compose(system, history, {"instruction": instruction, "format": self.prompt["format"][fmt]})

    async def rate_persuasiveness(self, dialogue: Dialogue, turn: int) -> PersuasivenessRating:
        """The user's post-dialogue rating; None with a status when it cannot be read (never 0)."""
        spec = self.prompt.get("persuasiveness", {})
        low, high = (int(v) for v in spec.get("scale", [0, 2]))
        fmt = "structured" if self.cfg.structured else "text"
        rendered = render_history(dialogue.utterances, self.labels)
        messages = [
            Message(role="system", content=squeeze(spec["system"])),
            Message(
                role="user", content=squeeze(fill(spec["user"], {"history": rendered, "format": spec["format"][fmt]}))
            ),
        ]
        schema = {
            "type": "object",
            "properties": {"rating": {"type": "integer", "minimum": low, "maximum": high}},
            "required": ["rating"],
        }
        try:
            result = await self.call(
                messages,
                turn=turn,
                purpose="persuasiveness",
                schema=schema if self.cfg.structured else None,
                max_tokens=self.cfg.persuasiveness_max_tokens,
            )
        except Exception as exc:  # noqa: BLE001 - a failed rating is recorded, the dialogue stays valid
            return {"value": None, "status": f"error: {type(exc).__name__}: {exc}"[:300]}
        value = read_rating(result.parsed, result.text or "", low, high)
        if value is None:
            return {"value": None, "status": "unparsed", "raw": (result.text or "")[:300]}
        return {"value": value, "status": "ok"}


def read_rating(parsed: JSON, text: str, low: int, high: int) -> int | None:
    """An integer rating within [low, high] from parsed JSON, JSON in text, or a lone number."""
    candidates: list[JSON] = []
    if isinstance(parsed, dict):
        candidates.append(parsed.get("rating"))
    obj = parse_json_object(text)
    if obj is not None:
        candidates.append(obj.get("rating"))
    numbers = re.findall(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", text) if obj is None else []
    if len(set(numbers)) == 1:
        candidates.append(float(numbers[0]))
    for value in candidates:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if float(value).is_integer() and low <= value <= high:
            return int(value)
    return None
