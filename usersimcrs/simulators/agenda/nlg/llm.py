"""LLM NLG: the acts to express, recent history and few-shot examples from annotated dialogues.

Temperature 0 with a seed from the simulator's seed and the turn; when the call fails or returns
nothing usable, the template NLG answers and the fallback is recorded as the source.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from usersimcrs.config import read_yaml
from usersimcrs.core.dialogue import Dialogue, DialogueAct
from usersimcrs.errors import LLMError
from usersimcrs.llm.base import Message
from usersimcrs.simulators.agenda.nlg.base import NLG, NLGResult, NLGSettings
from usersimcrs.simulators.agenda.nlg.template import TemplateNLG
from usersimcrs.simulators.agenda.nlu.act_parser import format_acts

PROMPT_PATH = Path(__file__).resolve().parents[1] / "prompts" / "nlg_llm.yaml"


@lru_cache(maxsize=8)
def load_prompt(path: str = str(PROMPT_PATH)) -> dict[str, Any]:
    return read_yaml(path)


def few_shot_examples(
    examples: list[tuple[str, str]], acts: list[DialogueAct], k: int, rng: random.Random
) -> list[tuple[str, str]]:
    """Up to `k` (acts, utterance) examples, those sharing an intent with `acts` first, picked with rng."""
    intents = {a.intent for a in acts}
    related = [e for e in examples if any(f"{i}(" in e[0] for i in intents)]
    others = [e for e in examples if e not in related]
    chosen = rng.sample(related, min(k, len(related)))
    if len(chosen) < k and others:
        chosen += rng.sample(others, min(k - len(chosen), len(others)))
    return chosen


class LLMNLG(NLG):
    """Generates the user's message with an LLM."""

    uses_llm = True

    def __init__(self, settings: NLGSettings, prompt: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        self.prompt = prompt or load_prompt()
        self.templates = TemplateNLG(settings)

    def messages(
        self, acts: list[DialogueAct], dialogue: Dialogue, rng: random.Random, ending: str | None = None
    ) -> list[Message]:
        messages = [Message(role="system", content=self.prompt["system"].strip())]
        for example_acts, text in few_shot_examples(self.settings.examples, acts, self.settings.few_shot, rng):
            messages.append(Message(role="user", content=self._user(example_acts, "(example)", "")))
            messages.append(Message(role="assistant", content=text))
        history = "\n".join(
            f"{'You' if u.participant == 'USER' else 'Recommender'}: {u.text}"
            for u in dialogue.utterances[-self.settings.history_turns :]
        )
        note = str(self.prompt.get("endings", {}).get(ending, "")) if ending else ""
        messages.append(Message(role="user", content=self._user(format_acts(acts), history or "(start)", note)))
        return messages

    def _user(self, acts: str, history: str, annotations: str) -> str:
        return self.prompt["user"].format(acts=acts, history=history, annotations=annotations).strip()

    async def generate(
        self, acts: list[DialogueAct], dialogue: Dialogue, *, rng: random.Random, seed: int, ending: str | None = None
    ) -> NLGResult:
        if self.settings.llm is None:
            raise LLMError("the LLM NLG needs an LLM")
        try:
            result = await self.settings.llm().complete(
                self.messages(acts, dialogue, rng, ending),
                temperature=0.0,
                max_tokens=self.settings.max_tokens,
                seed=seed,
                component="nlg",
            )
        except LLMError as exc:
            fallback = self.templates.realise(acts, rng, ending)
            return NLGResult(text=fallback.text, source=f"template (llm failed: {exc})")
        text = " ".join(result.text.strip().split())
        if not text:
            text = self.templates.realise(acts, rng, ending).text
            return NLGResult(text=text, source="template (llm returned nothing)")
        return NLGResult(text=text, source="llm")
