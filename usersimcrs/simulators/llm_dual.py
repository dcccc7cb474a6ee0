"""Dual-prompt LLM simulator (`llm_dual`): a yes/no stop decision first, then generation.

After UserSimCRS v2 (section 4.3). The stopping prompt has the task recast as a binary decision,
the persona and the full history (both participants; the anchor's stop prompt missed the user's
own turns). When it says stop, the configured stop utterance closes the conversation.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.generation import TEMPLATE
from usersimcrs.core.json_types import JSONSchema
from usersimcrs.llm.base import LLMResult, Message
from usersimcrs.simulators.base import Stop
from usersimcrs.simulators.llm_single import SinglePromptConfig, SinglePromptSimulator
from usersimcrs.simulators.prompting import fill, render_history, squeeze, user_turn_count

STOP_SCHEMA: JSONSchema = {
    "type": "object",
    "properties": {"end": {"type": "boolean"}},
    "required": ["end"],
    "additionalProperties": False,
}
STOP_TEMPLATE = f"{TEMPLATE}:stop_utterance"
"""The closing line the configuration writes once the model decided to stop (not a replacement)."""
_YES = re.compile(r"\b(yes|true|end|stop)\b", re.I)
_NO = re.compile(r"\b(no|false|continue|carry on)\b", re.I)


class DualPromptConfig(SinglePromptConfig):
    """Options of the dual-prompt simulator."""

    type: str = "llm_dual"
    stop_utterance: str | None = Field(None, description="closing message (default: from the prompt data)")
    stop_max_tokens: int = Field(16, ge=4, le=256)


def read_decision(result: LLMResult) -> tuple[bool | None, str]:
    """(end?, how it was read): the parsed JSON, else a yes/no word in the text, else None."""
    parsed = result.parsed if isinstance(result.parsed, dict) else None
    if parsed is not None and isinstance(parsed.get("end"), bool):
        return parsed["end"], "structured"
    text = result.text or ""
    yes, no = _YES.search(text), _NO.search(text)
    if yes and (not no or yes.start() < no.start()):
        return True, "text"
    if no:
        return False, "text"
    return None, "unparsed"


class DualPromptSimulator(SinglePromptSimulator):
    """Decides whether to stop with its own prompt, otherwise generates like `llm_single`."""

    Config: ClassVar[type[DualPromptConfig]] = DualPromptConfig
    config: DualPromptConfig
    prompt_name: ClassVar[str] = "simulators/llm_dual"
    base_prompts: ClassVar[tuple[str, ...]] = ("simulators/llm_single",)

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        cfg = self.config
        turn = user_turn_count(dialogue)
        decision: dict[str, Any] | None = None
        if turn >= cfg.min_turns:
            result = await self.call(
                self.stop_messages(dialogue.utterances),
                turn=turn,
                purpose="stop",
                schema=STOP_SCHEMA if cfg.structured else None,
                max_tokens=cfg.stop_max_tokens,
            )
            end, how = read_decision(result)
            decision = {"end": end, "read": how}
            if end:
                text = cfg.stop_utterance or self.prompt.get("stop_utterance", "Thanks, bye!")
                closing = self.user_utterance(text, generation=STOP_TEMPLATE, stop_decision=decision)
                return Stop(reason="user_stop", utterance=closing)
        generated = await self.generate(self.messages(dialogue.utterances), turn=turn, history=dialogue.utterances)
        sent = self.usable(generated, turn)  # its stopping prompt decides the end: an end asked for here is ignored
        return self.user_utterance(
            sent.text, generation=sent.source, stop_decision=decision, **self.end_ignored(generated)
        )

    def stop_messages(self, history: list[Utterance]) -> list[Message]:
        """The stopping prompt: task as a yes/no decision, persona, need and the whole history."""
        variables = self.variables()
        mode = "structured" if self.config.structured else "text"
        rendered = render_history(
            history,
            self.labels,
            empty=self.prompt.get("empty_history", "(none)"),
            max_utterances=self.config.max_history_utterances,
        )
        system = squeeze(fill(self.prompt["stop_system"], variables))
        user = squeeze(
            fill(
                self.prompt["stop_user"],
                {**variables, "history": rendered, "stop_format": self.prompt.get("stop_format", {}).get(mode, "")},
            )
        )
        return [Message(role="system", content=system), Message(role="user", content=user)]
