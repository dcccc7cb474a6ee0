"""LLM NLU: the CRS utterance and the allowed intents/slots go to a model that writes the acts.

Two output modes: the act string ``intent(slot="value")|...`` read by the tolerant parser, or
JSON constrained by a schema (``structured: true``). Temperature 0; the seed comes from the
simulator's seed and the turn. When the call fails the rule NLU answers and the fallback is noted.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from usersimcrs.config import read_yaml
from usersimcrs.core.dialogue import USER, Dialogue, DialogueAct, SlotValue, Utterance
from usersimcrs.core.json_types import JSON
from usersimcrs.errors import LLMError
from usersimcrs.llm.base import Message
from usersimcrs.simulators.agenda.nlu.act_parser import ParseResult, act_schema, acts_from_json, parse_acts
from usersimcrs.simulators.agenda.nlu.base import NLU, NLUSettings
from usersimcrs.simulators.agenda.nlu.rules import RuleNLU

PROMPT_PATH = Path(__file__).resolve().parents[1] / "prompts" / "nlu_llm.yaml"


@lru_cache(maxsize=8)
def load_prompt(path: str = str(PROMPT_PATH)) -> dict[str, Any]:
    """The NLU prompt file (read-only data)."""
    return read_yaml(path)


class LLMNLU(NLU):
    """Dialogue-act extraction by an LLM, with the rule NLU as the fallback."""

    uses_llm = True

    def __init__(self, settings: NLUSettings, prompt: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        self.prompt = prompt or load_prompt()
        self.vocab = settings.vocabulary()
        self.rules = RuleNLU(settings)

    def messages(self, utterance: Utterance, dialogue: Dialogue) -> list[Message]:
        """System instruction with the vocabulary, a few worked examples, then the turn to label."""
        fields = {
            "intents": ", ".join(self.settings.agent_intents),
            "slots": ", ".join(self.settings.domain.slot_names),
        }
        key = "structured_system" if self.settings.structured else "system"
        messages = [Message(role="system", content=self.prompt[key].format(**fields).strip())]
        if not self.settings.structured:
            for example in self.prompt.get("examples") or []:
                messages.append(Message(role="user", content=self._user(example["utterance"], "")))
                messages.append(Message(role="assistant", content=example["acts"]))
        previous = next((u.text for u in reversed(dialogue.utterances) if u.participant == USER), "")
        messages.append(Message(role="user", content=self._user(utterance.text, previous)))
        return messages

    def _user(self, utterance: str, previous: str) -> str:
        return self.prompt["user"].format(utterance=utterance, previous=previous or "(none)").strip()

    async def understand(self, utterance: Utterance, dialogue: Dialogue, *, seed: int) -> ParseResult:
        if self.settings.llm is None:
            raise LLMError("the LLM NLU needs an LLM")
        schema = (
            act_schema(self.settings.agent_intents, self.settings.domain.slot_names)
            if self.settings.structured
            else None
        )
        try:
            result = await self.settings.llm().complete(
                self.messages(utterance, dialogue),
                temperature=0.0,
                max_tokens=self.settings.max_tokens,
                seed=seed,
                schema=schema,
                component="nlu",
            )
        except LLMError as exc:
            fallback = await self.rules.understand(utterance, dialogue, seed=seed)
            return fallback.model_copy(update={"note": f"llm failed, rules used: {exc}"})
        parsed = self._parse(result.text, result.parsed)
        return self._with_items(parsed, utterance)

    def _parse(self, text: str, parsed: JSON) -> ParseResult:
        if self.settings.structured:
            data = parsed
            if data is None:
                try:
                    data = json.loads(text)
                except (TypeError, ValueError):
                    return parse_acts(text, self.vocab)
            result = acts_from_json(data, self.vocab)
            return result.model_copy(update={"raw": text})
        return parse_acts(text, self.vocab)

    def _with_items(self, result: ParseResult, utterance: Utterance) -> ParseResult:
        """The CRS's separate item list is evidence of a recommendation the model may have missed."""
        retrieval = set(self.settings.interaction_model.agent_set_retrieval)
        if not utterance.items or any(a.intent in retrieval for a in result.acts):
            return result
        titles = [SlotValue(slot="TITLE", value=i.title or i.raw) for i in utterance.items if (i.title or i.raw)]
        act = DialogueAct(intent=self.settings.roles.get("recommend", "REVEAL"), slot_values=titles)
        return result.model_copy(update={"acts": [act, *result.acts]})
