"""Single-prompt LLM simulator (`llm_single`): task, persona, need and history -> next utterance.

After UserSimCRS v2 (section 4.3): zero-shot by default, few-shot examples optional (read from a
DialogueKit JSON file). The model ends the conversation with the prompt's stop token, or with
``"end": true`` in structured mode.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from pydantic import Field

from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.llm.base import Message
from usersimcrs.simulators.base import Stop
from usersimcrs.simulators.llm_base import Generated, LLMSimulatorConfig, LLMUserSimulator
from usersimcrs.simulators.prompting import (
    fill,
    optional,
    render_history,
    render_need,
    user_turn_count,
)
from usersimcrs.user_model.persona import render_persona


class SinglePromptConfig(LLMSimulatorConfig):
    """Options of the single-prompt simulator."""

    type: str = "llm_single"
    few_shot_file: str | None = Field(None, description="DialogueKit JSON with example conversations")
    few_shot_dialogues: int = Field(0, ge=0, description="how many examples to show (0: zero-shot)")
    few_shot_max_utterances: int = Field(12, ge=2)
    show_persona: bool = True
    show_preferences: bool = True
    show_targets: bool = Field(False, description="name the target items in the need (off: no title leaks)")
    min_turns: int = Field(2, ge=0, description="user turns before a stop request is honoured")


class SinglePromptSimulator(LLMUserSimulator):
    """Generates each user turn from one prompt; stops when the model says so."""

    Config: ClassVar[type[SinglePromptConfig]] = SinglePromptConfig
    config: SinglePromptConfig
    prompt_name: ClassVar[str] = "simulators/llm_single"

    async def start(self) -> Utterance | None:
        """The opening message (a stop request is ignored here, and marked `end_ignored`)."""
        generated = await self.generate(self.messages([], opening=True), turn=0)
        sent = self.usable(generated, 0)
        return self.user_utterance(sent.text, generation=sent.source, **self.end_ignored(generated))

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        turn = user_turn_count(dialogue)
        generated = await self.generate(self.messages(dialogue.utterances), turn=turn, history=dialogue.utterances)
        return self.outcome(generated, turn)

    def outcome(self, generated: Generated, turn: int) -> Utterance | Stop:
        """Utterance, or Stop("user_stop") when the model ended and enough turns passed."""
        if generated.end and turn >= self.config.min_turns:
            closing = self.user_utterance(generated.text, generation=generated.source) if generated.text else None
            return Stop(reason="user_stop", utterance=closing)
        sent = self.usable(generated, turn)
        return self.user_utterance(sent.text, generation=sent.source, **self.end_ignored(generated))

    # -- prompt -------------------------------------------------------------------------------

    def variables(self) -> dict[str, Any]:
        """Values for the prompt's placeholders that do not depend on the history, rendered once per
        conversation (the profile does not change during it; callers copy before adding to them)."""
        return self._variables

    @cached_property
    def _variables(self) -> dict[str, Any]:
        cfg = self.config
        sections = self.prompt.get("sections", {})
        mode = "structured" if cfg.structured else "text"
        persona = render_persona(self.profile.persona) if cfg.show_persona else ""
        prefs = self.rendered_preferences() if cfg.show_preferences else ""
        need = render_need(self.profile.need, self.context.items, show_targets=cfg.show_targets)
        stop_token = self.prompt.get("stop_token", "")
        return {
            "persona_section": optional(sections.get("persona"), persona),
            "need_section": optional(sections.get("need"), need),
            "need_reminder": optional(sections.get("need_reminder"), need),
            "preferences_section": optional(sections.get("preferences"), prefs),
            "examples_section": optional(sections.get("examples"), self.examples()),
            **self.style_sections(),
            "end_instruction": fill(self.prompt.get("end_instruction", {}).get(mode, ""), {"stop_token": stop_token}),
            "format": self.prompt.get("format", {}).get(mode, ""),
            "stop_token": stop_token,
        }

    def messages(self, history: list[Utterance], *, opening: bool = False) -> list[Message]:
        """System prompt plus the history, rendered once (as chat turns or inside the prompt)."""
        variables = self.variables()
        instruction = self.prompt.get("instruction", {}).get("opening" if opening or not history else "next", "")
        return self.compose(self._system, history, {**variables, "instruction": instruction})

    @cached_property
    def _system(self) -> str:
        """The system text: filled from the conversation's variables, so once per conversation."""
        return fill(self.prompt["system"], self.variables())

    def examples(self) -> str:
        """Few-shot example conversations (empty in the default zero-shot setting)."""
        cfg = self.config
        if not cfg.few_shot_file or cfg.few_shot_dialogues <= 0:
            return ""
        path = cfg.few_shot_file
        dialogues = self.context.shared(f"dialoguekit:{path}", lambda: read_dialoguekit(path))
        blocks = [
            render_history(d.utterances[: cfg.few_shot_max_utterances], self.labels)
            for d in dialogues[: cfg.few_shot_dialogues]
        ]
        return "\n---\n".join(blocks)
