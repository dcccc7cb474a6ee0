"""`llm_crs`: a ChatCRS-style baseline. The LLM writes the reply; a BM25 retrieval step supplies
the candidate items, so the recommended list is grounded in the collection and kept apart from
the text. Titles the LLM writes that are not candidates are never returned as items.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from crs_connectors.base import CRSReply
from crs_connectors.baselines.retrieval import RetrievalConfig, RetrievalCRS
from crs_connectors.baselines.rule_based import DialogueState, read_state
from crs_connectors.transport import seed_for
from crs_connectors.turns import all_turns
from usersimcrs.core.dialogue import USER, Dialogue, ItemRef, Utterance
from usersimcrs.core.items import Item, display_title, normalize_title
from usersimcrs.core.json_types import JSON, JSONSchema
from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.errors import ConfigError, ConnectorError, LLMError
from usersimcrs.llm.base import Message

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

PROMPT_FILE = Path(__file__).with_name("llm_crs_prompt.yaml")


def reply_schema(candidates: int, k: int) -> JSONSchema:
    """The JSON shape of an answer: a reply text and up to k candidate numbers (bounded, so a small
    model cannot loop on the list)."""
    numbers: JSONSchema = {"type": "integer", "minimum": 1, "maximum": max(1, candidates)}
    if candidates:
        numbers["enum"] = list(range(1, candidates + 1))
    return {
        "type": "object",
        "properties": {
            "reply": {"type": "string", "maxLength": 400},
            "recommend": {"type": "array", "items": numbers, "maxItems": k if candidates else 0},
        },
        "required": ["reply", "recommend"],
    }


class LLMCRSConfig(RetrievalConfig):
    """Options of the LLM baseline."""

    candidates: int = Field(8, ge=1, description="retrieved items shown to the LLM each turn")
    temperature: float = 0.0
    max_tokens: int = Field(160, ge=16)
    component: str = Field("crs", description="LLM component name (llm_components in the run config)")
    prompt_file: str | None = Field(None, description="YAML prompt replacing the built-in one")
    history_turns: int = Field(8, ge=1, description="most recent turns given to the LLM")
    elicit_turns: int = Field(1, ge=0)

    def llm_components(self) -> list[str]:
        """The baseline calls its `component`."""
        return [self.component]


def load_prompt(path: str | None) -> dict[str, str]:
    """The prompt pieces (system, candidates, no_candidates, stage_*) from YAML."""
    file = Path(path) if path else PROMPT_FILE
    data = read_yaml(file)
    missing = [k for k in ("system", "candidates", "no_candidates") if k not in data]
    if missing:
        raise ConfigError(f"crs.prompt_file: {file} lacks {', '.join(missing)}")
    return {k: str(v) for k, v in data.items()}


def mentioned_candidates(text: str, candidates: list[Item]) -> list[Item]:
    """Candidates whose (display or bare) title appears in the text, in order of appearance."""
    folded = f" {normalize_title(text)} "
    found = []
    for item in candidates:
        key = normalize_title(item.title)
        if key and f" {key} " in folded:
            found.append((folded.index(f" {key} "), item))
    return [item for _, item in sorted(found, key=lambda pair: pair[0])]


class LLMCRS(RetrievalCRS):
    """An LLM that converses over a retrieved, numbered candidate list."""

    Config = LLMCRSConfig
    config: LLMCRSConfig

    def __init__(self, config: LLMCRSConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.prompt = context.shared(f"llm_crs.prompt:{config.prompt_file}", lambda: load_prompt(config.prompt_file))
        self.llm = context.llm(config.component)
        self.conversation_id = ""
        self.turn = 0

    async def open(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.turn = 0

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        turns = all_turns(history, user_utterance)
        state = read_state(turns, self.items, self.lexicon, self.slots)
        recommend = self.has_preferences(state) or state.questions_asked >= self.config.elicit_turns
        ids = self.rank(state, state.excluded())[: self.config.candidates] if recommend and state.readings else []
        candidates = [item for item in map(self.items.get, ids) if item is not None]
        messages = self.messages(turns, candidates, recommend)
        seed = seed_for(
            getattr(self.context, "run_seed", 0), self.conversation_id or history.conversation_id, self.turn
        )
        self.turn += 1
        try:
            result = await self.llm.complete(
                messages,
                temperature=self.config.temperature,
                max_tokens=self.config.max_tokens,
                seed=seed % (2**31),
                schema=reply_schema(len(candidates), self.config.k),
                component=self.config.component,
            )
        except LLMError as exc:
            raise ConnectorError(f"LLM failed: {exc}") from exc
        reply = self.grounded_reply(result.parsed, result.text, candidates)
        if not reply.text:
            return self.rule_based_fallback(state, reply, reason="the LLM gave no text")
        said = "" if user_utterance is None else user_utterance.text
        if said and normalize_title(reply.text) == normalize_title(said):
            return self.rule_based_fallback(state, reply)
        return reply

    def rule_based_fallback(
        self, state: DialogueState, echoed: CRSReply, reason: str = "the LLM repeated the user"
    ) -> CRSReply:
        """A weak model that parrots the user or says nothing gets the retrieval policy's sentence (marked in raw)."""
        fallback = self.respond(state)
        items = echoed.items or fallback.items
        if echoed.items:
            top = self.items.get(echoed.items[0].id or "")
            text = f"How about {display_title(top.title)}?" if top is not None else fallback.text
        else:
            text = fallback.text
        return CRSReply(text=text, items=items, raw={**(echoed.raw or {}), "fallback": reason})

    def messages(self, turns: list[Utterance], candidates: list[Item], recommend: bool) -> list[Message]:
        system = self.prompt["system"].replace("{k}", str(self.config.k))
        chat = [
            Message(role="user" if u.participant == USER else "assistant", content=u.text)
            for u in turns[-self.config.history_turns :]
            if u.text.strip()
        ]
        if not chat or chat[0].role != "user":
            chat.insert(0, Message(role="user", content="Hello."))
        if candidates:
            lines = "\n".join(f"{n}: {c.describe(self.fields)}" for n, c in enumerate(candidates, start=1))
            stage = self.prompt.get("stage_recommend" if recommend else "stage_elicit", "")
            note = self.prompt["candidates"].replace("{candidates}", lines).replace("{stage}", stage)
        else:
            note = self.prompt["no_candidates"]
        return [Message(role="system", content=f"{system}\n{note}".strip()), *chat]

    def grounded_reply(self, parsed: JSON, raw_text: str, candidates: list[Item]) -> CRSReply:
        """Text from the LLM; items only from the candidates it chose or named."""
        text, picks = "", []
        if isinstance(parsed, dict):
            text = str(parsed.get("reply") or "").strip()
            picks = [p for p in parsed.get("recommend") or [] if isinstance(p, int) and not isinstance(p, bool)]
        if not text:
            text = _strip_json(raw_text)
        chosen: list[Item] = []
        for number in picks:
            if 1 <= number <= len(candidates) and candidates[number - 1] not in chosen:
                chosen.append(candidates[number - 1])
        for item in mentioned_candidates(text, candidates):
            if item not in chosen:
                chosen.append(item)
        raw = {"llm_text": raw_text, "candidates": [c.id for c in candidates], "picks": picks}
        if chosen:
            for item in candidates:
                if len(chosen) >= self.config.k:
                    break
                if item not in chosen:
                    chosen.append(item)
        refs = [ItemRef(id=i.id, title=i.title) for i in chosen[: self.config.k]]
        return CRSReply(text=text, items=refs, raw=raw)


def _strip_json(text: str) -> str:
    """A readable reply from a non-JSON (or broken JSON) completion."""
    match = re.search(r'"reply"\s*:\s*"((?:[^"\\]|\\.)*)', text)
    if match:
        return match.group(1).replace('\\"', '"').strip()
    return text.strip().strip("{}").strip()


__all__ = ["LLMCRS", "LLMCRSConfig"]
