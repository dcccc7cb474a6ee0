"""One conversation between a simulator and a CRS: the turn loop and its stop rules.

A failure inside a conversation (CRS error, LLM error, timeout, bug in a plug-in) marks that
conversation failed with its reason and keeps the turns so far; it never stops the run. A
`UserError` (the embedded model without its extra, a missing API key, a bad plug-in option) would
fail every conversation the same way: it stops the run with its one line instead.

Every utterance is repaired on its way into the dialogue (`core/text_repair.py`): a lone surrogate
in a CRS's or a simulator's text becomes U+FFFD, a NaN score becomes null, a raw payload nested
too deeply is cut; what was changed is counted in the utterance's ``metadata.repairs``. One bad
character never fails a conversation and never stops its storage.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crs_connectors.base import CRSConnector, CRSReply, ProfileOracle
from usersimcrs.config import RunConfig
from usersimcrs.core.dialogue import AGENT, FAILURE_SIDE, Dialogue, ItemRef, Utterance
from usersimcrs.core.json_types import JSON
from usersimcrs.core.profile import UserProfile
from usersimcrs.core.text_repair import MAX_DEPTH, clean_text, is_clean_json, merge_counts, repair_text, repair_value
from usersimcrs.engine.ids import conversation_id, conversation_seed
from usersimcrs.engine.plugins import RunPlugins, plugins_from_config
from usersimcrs.errors import UserError
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import Stop, UserSimulator

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.user_model.population import ProfileSource

RAW_LIMIT_BYTES = 16 * 1024  # the most JSON of one CRS reply's raw payload kept on its utterance


@dataclass
class Phase:
    """Whose code a conversation is running now, so a failure (or timeout) is put on the right side.

    The validity gate counts what the CRS broke against the CRS and excludes what the simulator
    or the toolkit broke; this is how it knows which is which.
    """

    side: str = "toolkit"


@dataclass(frozen=True)
class ConversationPlan:
    """Which conversation to run: its index, stable ID and seed."""

    index: int
    conversation_id: str
    seed: int


def plan(config: RunConfig, index: int) -> ConversationPlan:
    return ConversationPlan(
        index=index,
        conversation_id=conversation_id(config.name, config.seed, index),
        seed=conversation_seed(config.seed, index),
    )


class ConversationRunner:
    """Builds a fresh simulator and connector per conversation and runs the turn loop."""

    def __init__(
        self,
        config: RunConfig,
        context: RunContext,
        profiles: ProfileSource,
        source: str = "config",
        plugins: RunPlugins | None = None,
    ) -> None:
        self.config = config
        self.context = context
        self.profiles = profiles
        self.plugins = plugins or plugins_from_config(config, source)

    async def run(self, conv: ConversationPlan) -> Dialogue:
        dialogue = Dialogue(
            conversation_id=conv.conversation_id,
            index=conv.index,
            seed=conv.seed,
            agent_id=str(self.config.crs.get("type")),
            user_id=str(self.config.simulator.get("type")),
        )
        timings = {"profile_s": 0.0, "simulator_s": 0.0, "crs_s": 0.0}
        started = time.perf_counter()
        crs: CRSConnector | None = None
        phase = Phase()
        try:
            profile = self.profiles.profile(conv.index, random.Random(conv.seed))
            dialogue.profile = profile  # the runner stores it once in profiles.jsonl, the line names it by ID
            t0 = time.perf_counter()
            timings["profile_s"] = t0 - started
            simulator: UserSimulator = self.plugins.simulator(self.context, profile, conv.seed)
            t1 = time.perf_counter()
            timings["simulator_s"] += t1 - t0  # building the simulator is simulator time too
            crs = self.plugins.crs(self.context)
            if isinstance(crs, ProfileOracle):  # a CRS-side oracle sees the profile a study gives any oracle
                crs.meet_user(profile, conv.seed)
            timings["crs_s"] += time.perf_counter() - t1
            # asyncio.timeout, not wait_for: in Python 3.11 wait_for can swallow a cancellation
            # that arrives as the conversation ends, and a run stopping on an error then never ends
            async with asyncio.timeout(self.config.conversation_timeout_s):
                await self._loop(dialogue, simulator, crs, timings, phase)
            phase.side = "simulator"
            simulator.finish(dialogue)
        except TimeoutError:
            _fail(dialogue, f"timeout: conversation exceeded {self.config.conversation_timeout_s:g}s", phase.side)
        except (asyncio.CancelledError, UserError):  # a user-fixable error (a missing extra or key) stops the run
            raise
        except Exception as exc:  # noqa: BLE001 - recorded on the conversation, the run goes on
            _fail(dialogue, self.context.secrets.scrub(f"{type(exc).__name__}: {exc}"), phase.side)
        finally:
            if crs is not None:
                try:
                    await crs.close()
                except Exception as exc:  # noqa: BLE001
                    warning = self.context.secrets.scrub(f"close failed: {exc}")
                    dialogue.metadata.setdefault("warnings", []).append(warning)
        timings["total_s"] = time.perf_counter() - started
        dialogue.timings = {k: round(v, 6) for k, v in timings.items()}
        return dialogue

    async def _loop(
        self, dialogue: Dialogue, sim: UserSimulator, crs: CRSConnector, timings: dict, phase: Phase
    ) -> None:
        phase.side = "crs"
        await crs.open(dialogue.conversation_id)
        user_turns = 0
        opening = None
        if self.config.opening == "user":
            phase.side = "simulator"
            t0 = time.perf_counter()
            opening = await sim.start()
            timings["simulator_s"] += time.perf_counter() - t0
        if opening is not None:
            opening = repair_utterance(opening)
            user_turns = 1
        await self._crs_turn(dialogue, crs, opening, timings, phase)
        while True:
            if user_turns >= self.config.max_turns:
                dialogue.end_reason = "max_turns"
                return
            phase.side = "simulator"
            t0 = time.perf_counter()
            out = await sim.respond(dialogue)
            timings["simulator_s"] += time.perf_counter() - t0
            if isinstance(out, Stop):
                if out.utterance is not None:
                    dialogue.add(repair_utterance(out.utterance))
                dialogue.end_reason = out.reason
                return
            user_turns += 1
            await self._crs_turn(dialogue, crs, repair_utterance(out), timings, phase)

    async def _crs_turn(
        self, dialogue: Dialogue, crs: CRSConnector, utt: Utterance | None, timings: dict, phase: Phase
    ) -> None:
        phase.side = "crs"
        t0 = time.perf_counter()
        try:
            reply: CRSReply = await crs.reply(dialogue, utt)
        finally:
            timings["crs_s"] += time.perf_counter() - t0
            if utt is not None:
                dialogue.add(utt)
        if not isinstance(reply, CRSReply):
            raise TypeError(f"connector returned {type(reply).__name__}, expected CRSReply")
        phase.side = "toolkit"
        items = reply.items
        if self.context.items is not None:  # refs the connector already matched (ambiguous ones too) stay as they are
            items = [self.context.items.resolve(i) if i.id is None and i.resolution is None else i for i in items]
        metadata: dict[str, Any] = {"items_from_text": True} if reply.items_from_text else {}
        # JSON-safe and bounded in depth (two levels left for the utterance's metadata) before it is measured
        if is_clean_json(reply.raw, MAX_DEPTH - 2):  # nothing to repair: bounded_raw copies it as it is
            raw, repairs = reply.raw, None
        else:
            raw, repairs = repair_value(reply.raw, max_depth=MAX_DEPTH - 2)
        metadata.update(bounded_raw(raw))
        if repairs:
            metadata["repairs"] = merge_counts(repairs)
        text = reply.text if isinstance(reply.text, str) else str(reply.text)
        dialogue.add(
            repair_utterance(
                Utterance(
                    participant=AGENT,
                    text=text,
                    items=items,
                    latency_s=round(time.perf_counter() - t0, 6),
                    metadata=metadata,
                )
            )
        )


def bounded_raw(raw: JSON, limit: int = RAW_LIMIT_BYTES) -> dict[str, Any]:
    """The CRS's raw payload as utterance metadata (`crs_raw`), at most `limit` bytes of JSON.

    A larger payload is kept as a prefix string of its JSON with `crs_raw_truncated: true` and
    `crs_raw_bytes` (its full size), so one huge reply cannot bloat `dialogues.jsonl`.
    Nothing is stored when the connector sent no raw payload.
    """
    if raw is None:
        return {}
    try:
        encoded = json.dumps(raw, ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # e.g. a self-referencing object from an in-process CRS
        encoded = json.dumps(repr(raw), ensure_ascii=False)
    size = len(encoded.encode("utf-8"))
    if size <= limit:
        return {"crs_raw": json.loads(encoded)}  # a JSON-safe copy (objects become strings)
    prefix = encoded.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
    return {"crs_raw": prefix, "crs_raw_truncated": True, "crs_raw_bytes": size}


def repair_utterance(utterance: Utterance) -> Utterance:
    """`utterance` with hostile values repaired in place (text, slot values, items, metadata), the counts
    added to ``metadata.repairs``; an utterance with nothing to repair costs a few string checks
    (`_needs_repair` reads it without copying anything; only a hostile one is rebuilt)."""
    if not _needs_repair(utterance):
        return utterance
    counts: Counter[str] = Counter()
    utterance.text = _text(utterance.text, counts)
    for act in utterance.dialogue_acts:
        for slot in act.slot_values:
            if slot.value is not None:
                slot.value = _text(slot.value, counts)
    utterance.items = [_item(item, counts) for item in utterance.items]
    earlier = Counter(utterance.metadata.get("repairs") or {})  # e.g. the CRS's raw payload, repaired before
    if utterance.metadata and not _plain(utterance.metadata):
        utterance.metadata, _ = repair_value(utterance.metadata, counts)
    if counts:
        utterance.metadata["repairs"] = merge_counts(earlier, counts)
    return utterance


def _needs_repair(utterance: Utterance) -> bool:
    """Whether `repair_utterance` would change anything (a lone surrogate, a non-finite score, metadata
    that is not plain JSON within `MAX_DEPTH`); False for the common, clean utterance."""
    text = utterance.text
    if not (text.isascii() or clean_text(text)):
        return True
    for act in utterance.dialogue_acts:
        for slot in act.slot_values:
            if slot.value is not None and not clean_text(slot.value):
                return True
    for item in utterance.items:
        for value in (item.id, item.title, item.raw):
            if isinstance(value, str) and not (value.isascii() or clean_text(value)):
                return True
        if item.score is not None and not math.isfinite(item.score):
            return True
    metadata = utterance.metadata
    return bool(metadata) and not _plain(metadata) and not is_clean_json(metadata, MAX_DEPTH)


def _text(value: str, counts: Counter[str]) -> str:
    text, n = repair_text(value)
    if n:
        counts["lone_surrogates"] += n
    return text


def _item(item: ItemRef, counts: Counter[str]) -> ItemRef:
    changed: dict[str, Any] = {}
    for name in ("id", "title", "raw"):
        value = getattr(item, name)
        if isinstance(value, str):
            fixed = _text(value, counts)
            if fixed is not value:
                changed[name] = fixed
    if item.score is not None and not math.isfinite(item.score):
        counts["non_finite_numbers"] += 1
        changed["score"] = None
    return item.model_copy(update=changed) if changed else item


def _plain(metadata: dict[str, Any]) -> bool:
    """True when `metadata` holds only ASCII strings, finite numbers, booleans and None at its top level
    (the common case: nothing to repair, no walk needed)."""
    for key, value in metadata.items():
        if not (isinstance(key, str) and key.isascii()):
            return False
        if isinstance(value, str):
            if not value.isascii():
                return False
        elif isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif not (value is None or isinstance(value, (bool, int))):
            return False
    return True


def _fail(dialogue: Dialogue, reason: str, side: str = "toolkit") -> None:
    reason, _ = repair_text(reason)
    dialogue.status = "failed"
    dialogue.error = reason[:2000]
    dialogue.end_reason = dialogue.end_reason or "error"
    dialogue.metadata[FAILURE_SIDE] = side


def profile_from_dict(data: dict[str, Any]) -> UserProfile:
    return UserProfile.model_validate(data)
