"""Target-free simulator after PEPPER (`target_free`): general + reflected preferences, no targets.

The profile's seen items (with ratings and reviews) give Likes/Dislikes and a general-preference
narrative; the held-out targets are never put into any prompt. Each turn the simulator looks at
the top-k items the CRS showed (with their metadata), sorts them into seen (it recalls its own
rating and review) and unseen (it expects to like or dislike them from its taste), records these
reflected preferences on the user utterance, and then answers (PEPPER, section 4 and A.4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, NotRequired, TypedDict

from pydantic import Field

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, normalize_title
from usersimcrs.core.json_types import JSONSchema
from usersimcrs.core.profile import Preferences, SeenItem, UserProfile
from usersimcrs.llm.base import LLMResult, Message
from usersimcrs.simulators.base import Stop
from usersimcrs.simulators.llm_base import LLMSimulatorConfig, LLMUserSimulator
from usersimcrs.simulators.prompting import (
    fill,
    last_agent_turn,
    optional,
    parse_json_object,
    ref_title,
    squeeze,
    user_turn_count,
)
from usersimcrs.user_model.persona import render_persona
from usersimcrs.user_model.preferences import classify, expected_score
from usersimcrs.user_model.text_preferences import (
    general_preference_narrative,
    parse_likes_dislikes,
    preferences_from_reviews,
)

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

REFLECTION_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "number": {"type": "integer"},
                    "verdict": {"type": "string", "enum": ["like", "dislike"]},
                    "reason": {"type": "string"},
                },
                "required": ["number", "verdict", "reason"],
            },
        }
    },
    "required": ["items"],
}


class Verdict(TypedDict):
    """What the user thinks of one shown item and why: remembered from watching it (`memory`), expected from
    their slot preferences (`rules`) or by the LLM (`llm`); merged into the item's reflection record."""

    verdict: str  # like | dislike (| mixed for a remembered item, unsure when nothing is known)
    reason: str
    source: Literal["memory", "rules", "llm"]
    rating: NotRequired[float | None]  # their own rating of a watched item


class TargetFreeConfig(LLMSimulatorConfig):
    """Options of the PEPPER-style simulator (defaults follow the paper: k=4, 20 turns, temperature 0)."""

    type: str = "target_free"
    top_k: int = Field(4, ge=0, description="items of the CRS's last list the user looks at")
    max_turns: int = Field(20, ge=1, description="user turns before the simulator stops")
    item_slots: list[str] | None = Field(None, description="metadata shown per item (None: all attributes)")
    reflection: Literal["llm", "rules"] = "llm"
    reflection_max_tokens: int = Field(160, ge=16, le=2048)
    like_threshold: float = 0.5
    dislike_threshold: float = -0.3
    min_turns: int = Field(2, ge=0, description="user turns before an 'end' from the model is honoured")
    narrative: Literal["template", "llm"] = Field(
        "template",
        description="general-preference narrative: built from the seen items, or written by the LLM from them",
    )
    narrative_max_items: int = Field(10, ge=1, description="seen items shown to the LLM when it writes the narrative")
    narrative_max_tokens: int = Field(160, ge=16, le=2048)


def rating_scale(profile: UserProfile) -> tuple[float, float]:
    """The scale of the seen items' ratings: from the profile, else guessed (1-10 above 5, else 0.5-5)."""
    scale = profile.metadata.get("rating_scale")
    if isinstance(scale, (list, tuple)) and len(scale) == 2:
        return float(scale[0]), float(scale[1])
    ratings = [s.rating for s in profile.seen_items if s.rating is not None]
    return (1.0, 10.0) if ratings and max(ratings) > 5 else (0.5, 5.0)


def seen_only(profile: UserProfile) -> list[SeenItem]:
    """Seen items minus anything that is also a target (so a target can never leak into the narrative)."""
    target_keys = {t.key() for t in profile.need.targets}
    target_titles = {normalize_title(t.title) for t in profile.need.targets if t.title}
    return [
        s
        for s in profile.seen_items
        if s.item.key() not in target_keys and normalize_title(s.item.title or "") not in target_titles
    ]


class TargetFreeSimulator(LLMUserSimulator):
    """A user who discovers what they want from their taste and the items the CRS shows."""

    Config: ClassVar[type[TargetFreeConfig]] = TargetFreeConfig
    prompt_name: ClassVar[str] = "simulators/target_free"

    def __init__(self, config: TargetFreeConfig, context: RunContext, profile: UserProfile, seed: int) -> None:
        super().__init__(config, context, profile, seed)
        self.cfg: TargetFreeConfig = config
        self.seen = seen_only(profile)
        low, high = rating_scale(profile)
        self.scale_high = high
        self.preferences = self._preferences(profile.preferences, low, high)
        self.narrative_source = "profile" if profile.preferences.narrative else "template"
        self.narrative = profile.preferences.narrative or general_preference_narrative(
            self.seen,
            self.preferences,
            context.items,
            like_threshold=config.like_threshold,
            dislike_threshold=config.dislike_threshold,
        )
        self._seen_by_id = {s.item.id: s for s in self.seen if s.item.id}
        self._seen_by_title = {normalize_title(s.item.title): s for s in self.seen if s.item.title}

    def _preferences(self, prefs: Preferences, low: float, high: float) -> Preferences:
        """Item scores for seen items with ratings (normalised to [-1, 1]) and review Likes/Dislikes."""
        scores = dict(prefs.items)
        for entry in self.seen:
            if entry.item.id and entry.item.id not in scores and entry.rating is not None and high > low:
                scores[entry.item.id] = max(-1.0, min(1.0, 2 * (entry.rating - low) / (high - low) - 1))
        merged = prefs.model_copy(update={"items": scores})
        return preferences_from_reviews(self.seen, merged) if not (prefs.likes or prefs.dislikes) else merged

    # -- turns --------------------------------------------------------------------------------

    async def start(self) -> Utterance | None:
        await self.ensure_narrative()
        generated = await self.generate(self.response_messages([], []), turn=0)
        sent = self.usable(generated, 0)
        return self.user_utterance(
            sent.text,
            generation=sent.source,
            **self.end_ignored(generated),
            reflected_preferences=[],
            narrative=self.narrative,
            narrative_source=self.narrative_source,
        )

    async def ensure_narrative(self) -> None:
        """With `narrative: llm`, let the model write the general preferences once, from seen items only.

        PEPPER had an LLM turn the seen items and their Likes/Dislikes into a narrative; the
        template narrative stays as the fallback when the answer is unusable.
        """
        if self.cfg.narrative != "llm" or self.narrative_source != "template" or not self.seen:
            return
        self.narrative_source = "llm-pending"
        lines = []
        for entry in self.seen[: self.cfg.narrative_max_items]:
            item = self.lookup(entry.item)
            described = item.describe(self.cfg.item_slots) if item else ref_title(entry.item, self.context.items)
            rating = f" (you rated it {entry.rating:g}/{self.scale_high:g})" if entry.rating is not None else ""
            likes, dislikes = parse_likes_dislikes(entry.review)
            points = "".join([*(f"\n  liked: {x}" for x in likes[:3]), *(f"\n  disliked: {x}" for x in dislikes[:3])])
            lines.append(f"- {described}{rating}{points}")
        mode = "structured" if self.cfg.structured else "text"
        spec = self.prompt["narrative"]
        user = squeeze(fill(spec["user"], {"seen": "\n".join(lines), "format": spec["format"][mode]}))
        schema = {"type": "object", "properties": {"narrative": {"type": "string"}}, "required": ["narrative"]}
        result = await self.call(
            [Message(role="system", content=squeeze(spec["system"])), Message(role="user", content=user)],
            turn=0,
            purpose="narrative",
            schema=schema if self.cfg.structured else None,
            max_tokens=self.cfg.narrative_max_tokens,
        )
        parsed = result.parsed if isinstance(result.parsed, dict) else parse_json_object(result.text or "")
        text = parsed.get("narrative") if isinstance(parsed, dict) else result.text
        text = " ".join(str(text or "").split())
        if len(text) >= 20:
            self.narrative, self.narrative_source = text, "llm"
        else:
            self.narrative_source = "template"

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        await self.ensure_narrative()
        turn = user_turn_count(dialogue)
        if turn >= self.cfg.max_turns:
            return Stop(reason="max_turns_simulator")
        agent = last_agent_turn(dialogue)
        shown = list(agent.items[: self.cfg.top_k]) if agent is not None else []
        reflections = await self.reflect(shown, turn)
        generated = await self.generate(
            self.response_messages(dialogue.utterances, reflections), turn=turn, history=dialogue.utterances
        )
        metadata = {
            "generation": generated.source,
            "shown": [r["item"] for r in reflections],
            "seen": [r["item"] for r in reflections if r["seen"]],
            "unseen": [r["item"] for r in reflections if not r["seen"]],
            "reflected_preferences": reflections,
        }
        if generated.end and turn >= self.cfg.min_turns:
            closing = self.user_utterance(generated.text, **metadata) if generated.text else None
            return Stop(reason="user_stop", utterance=closing)
        sent = self.usable(generated, turn)
        return self.user_utterance(sent.text, **{**metadata, "generation": sent.source}, **self.end_ignored(generated))

    # -- reflected preferences ----------------------------------------------------------------

    def lookup(self, ref: ItemRef) -> Item | None:
        """The collection item behind a reference (by ID, else by title)."""
        items = self.context.items
        if items is None:
            return None
        if ref.id is not None and ref.id in items:
            return items.get(ref.id)
        return items.find_by_title(ref.title or ref.raw or "")

    def seen_entry(self, ref: ItemRef, item: Item | None) -> SeenItem | None:
        """The user's own record of the item when they have watched it."""
        ids = [i for i in (ref.id, item.id if item else None) if i]
        for item_id in ids:
            if item_id in self._seen_by_id:
                return self._seen_by_id[item_id]
        titles = [t for t in (ref.title, ref.raw, item.title if item else None) if t]
        for title in titles:
            if normalize_title(title) in self._seen_by_title:
                return self._seen_by_title[normalize_title(title)]
        return None

    async def reflect(self, shown: list[ItemRef], turn: int) -> list[dict[str, Any]]:
        """One record per shown item: seen (recalled) or unseen (expected like/dislike)."""
        records: list[dict[str, Any]] = []
        unseen: list[tuple[dict[str, Any], Item | None]] = []
        for ref in shown:
            item = self.lookup(ref)
            entry = self.seen_entry(ref, item)
            record: dict[str, Any] = {
                "item": (item.id if item else None) or ref.id or ref.title or ref.raw,
                "title": ref_title(item.ref() if item else ref, self.context.items),
                "seen": entry is not None,
            }
            if entry is not None:
                record.update(self.recall(entry))
            else:
                unseen.append((record, item))
            records.append(record)
        if unseen:
            verdicts = await self.expect(unseen, turn) if self.cfg.reflection == "llm" else {}
            for number, (record, item) in enumerate(unseen, start=1):
                record.update(verdicts.get(number) or self.expect_by_rules(item))
        return records

    def recall(self, entry: SeenItem) -> Verdict:
        """What the user remembers of a watched item: their rating, verdict and review points."""
        score = self.preferences.item_preference(entry.item.id)
        verdict = (
            classify(score, self.cfg.like_threshold, self.cfg.dislike_threshold) if score is not None else "neutral"
        )
        likes, dislikes = parse_likes_dislikes(entry.review)
        reason = "; ".join([*(f"liked {x}" for x in likes[:2]), *(f"disliked {x}" for x in dislikes[:2])])
        if not reason and entry.review:
            reason = "your review: " + " ".join(entry.review.split())[:200]
        return {
            "verdict": {"liked": "like", "disliked": "dislike"}.get(verdict, "mixed"),
            "rating": entry.rating,
            "reason": reason
            or (f"you rated it {entry.rating:g}/{self.scale_high:g}" if entry.rating is not None else ""),
            "source": "memory",
        }

    def expect_by_rules(self, item: Item | None) -> Verdict:
        """Expected verdict from slot preferences (used without an LLM, or when its answer is unusable)."""
        score = expected_score(self.preferences, item.attributes) if item is not None else None
        if score is None:
            return {"verdict": "unsure", "reason": "nothing known about it", "source": "rules"}
        return {
            "verdict": "like" if score >= 0 else "dislike",
            "reason": "matches your usual taste" if score >= 0 else "not your usual taste",
            "source": "rules",
        }

    async def expect(self, unseen: list[tuple[dict[str, Any], Item | None]], turn: int) -> dict[int, Verdict]:
        """Ask the LLM for expected like/dislike of the unseen items, by their number."""
        lines = [
            f"{n}. " + (item.describe(self.cfg.item_slots) if item else record["title"])
            for n, (record, item) in enumerate(unseen, start=1)
        ]
        mode = "structured" if self.cfg.structured else "text"
        user = squeeze(
            fill(
                self.prompt["reflect_user"],
                {"items": "\n".join(lines), "reflect_format": self.prompt["reflect_format"][mode]},
            )
        )
        result = await self.call(
            [Message(role="system", content=self.system_prompt()), Message(role="user", content=user)],
            turn=turn,
            purpose="reflect",
            schema=REFLECTION_SCHEMA if self.cfg.structured else None,
            max_tokens=self.cfg.reflection_max_tokens,
        )
        return read_verdicts(result, len(unseen))

    # -- prompts ------------------------------------------------------------------------------

    def system_prompt(self) -> str:
        persona = render_persona(self.profile.persona)
        sections = self.prompt.get("sections", {})
        return squeeze(
            fill(
                self.prompt["system"],
                {
                    "narrative": self.narrative,
                    "persona_section": optional(sections.get("persona"), persona),
                    **self.style_sections(),
                },
            )
        )

    def response_messages(self, history: list[Utterance], reflections: list[dict[str, Any]]) -> list[Message]:
        """The answer prompt: taste, reflected preferences on what is shown, and the history."""
        mode = "structured" if self.cfg.structured else "text"
        variables = {
            "reflections": render_reflections(reflections, self.scale_high) or self.prompt.get("no_items", ""),
            "instruction": self.prompt["instruction"]["next" if history else "opening"],
            "format": self.prompt["format"][mode],
        }
        return self.compose(self.system_prompt(), history, variables)


def read_verdicts(result: LLMResult, count: int) -> dict[int, Verdict]:
    """Number -> {verdict, reason, source} from a structured (or JSON-in-text, or line) answer."""
    parsed = result.parsed if isinstance(result.parsed, dict) else parse_json_object(result.text or "")
    out: dict[int, Verdict] = {}
    entries = parsed.get("items") if isinstance(parsed, dict) else None
    if isinstance(entries, list):
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            number, verdict = entry.get("number"), str(entry.get("verdict", "")).lower()
            if (
                isinstance(number, int)
                and 1 <= number <= count
                and verdict in ("like", "dislike")
                and number not in out
            ):
                out[number] = {"verdict": verdict, "reason": str(entry.get("reason", ""))[:300], "source": "llm"}
        return out
    for line in (result.text or "").splitlines():
        head, _, rest = line.strip().partition(".")
        if head.isdigit() and 1 <= int(head) <= count and int(head) not in out:
            words = rest.strip().lower()
            said = "dislike" if words.startswith("dislike") else "like" if words.startswith("like") else None
            if said:
                reason = rest.split("-", 1)[1].strip() if "-" in rest else ""
                out[int(head)] = {"verdict": said, "reason": reason[:300], "source": "llm"}
    return out


def render_reflections(reflections: list[dict[str, Any]], scale_high: float) -> str:
    """Reflected preferences as prompt lines: [seen]/[new] title: verdict - reason."""
    lines = []
    for r in reflections:
        tag = "watched" if r["seen"] else "new to you"
        rating = f", you rated it {r['rating']:g}/{scale_high:g}" if r.get("rating") is not None else ""
        reason = f" - {r['reason']}" if r.get("reason") else ""
        lines.append(f"- {r['title']} ({tag}{rating}): {r['verdict']}{reason}")
    return "\n".join(lines)
