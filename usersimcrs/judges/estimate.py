"""Tokenizer-free token estimates and prices for `--dry-run`: characters / chars-per-token plus the
expected output, priced per model when its price is known.

The constants were calibrated against the token counts the embedded model (Gemma 3 270M, its
own tokenizer) reported on real judging runs (see docs/judges.md, "Dry run"); other tokenizers
land within a similar range for English text and JSON.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from pydantic import BaseModel, Field

from usersimcrs.core.yaml_io import read_yaml
from usersimcrs.errors import UserError
from usersimcrs.judges.base import PlannedCall
from usersimcrs.llm.base import Message

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.llm.config import LLMConfig
    from usersimcrs.llm.provider import LLMProvider

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 4
COMPLETION_FILL = 0.5
PRICES_PATH = Path(__file__).with_name("prices.yaml")
LOCAL_BACKENDS = ("llamacpp", "ollama")
"""Backends that run a model on the user's own machine: no per-token price."""


def prompt_tokens(messages: Iterable[Message]) -> int:
    """Estimated prompt tokens of a chat: characters / CHARS_PER_TOKEN plus a per-message overhead."""
    total = 0
    for message in messages:
        total += math.ceil(len(message.content) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS
    return total


def expected_completion_tokens(max_tokens: int, text_chars: int) -> int:
    """Expected reply length: a JSON object whose free text fills about COMPLETION_FILL of its cap."""
    body = math.ceil(text_chars * COMPLETION_FILL / CHARS_PER_TOKEN) + 12
    return min(max_tokens, body)


def estimate(calls: Iterable[PlannedCall]) -> dict[str, int]:
    """Calls and estimated prompt/completion/total tokens of a plan."""
    calls = list(calls)
    prompt = sum(prompt_tokens(c.messages) for c in calls)
    completion = sum(c.expected_completion_tokens for c in calls)
    return {
        "calls": len(calls),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class Price(BaseModel):
    """US dollars per million prompt and completion tokens, and where the figure comes from."""

    prompt_per_million: float = Field(ge=0)
    completion_per_million: float = Field(ge=0)
    source: str

    def cost(self, prompt: int, completion: int) -> float:
        """The dollar cost of `prompt` and `completion` tokens."""
        return (prompt * self.prompt_per_million + completion * self.completion_per_million) / 1e6


@lru_cache(maxsize=1)
def price_list() -> dict[str, Any]:
    """The bundled list prices (`prices.yaml`: source, date checked, model -> [prompt, completion])."""
    return read_yaml(PRICES_PATH)


def price_for(config: LLMConfig, model: str, given: tuple[float, float] | None = None) -> Price | None:
    """The price of `model` served as `config` says: the one given (`--price`), none per token for a local
    backend, the bundled list price for the official OpenAI API, else None (unknown)."""
    if given is not None:
        return Price(prompt_per_million=given[0], completion_per_million=given[1], source="--price")
    if config.backend in LOCAL_BACKENDS:
        return Price(prompt_per_million=0.0, completion_per_million=0.0, source="local model: no per-token price")
    listed = price_list()
    if config.backend == "openai" and not config.base_url and model in listed["models"]:
        prompt, completion = listed["models"][model]
        return Price(
            prompt_per_million=prompt,
            completion_per_million=completion,
            source=f"OpenAI list price checked {listed['checked']} ({listed['source']})",
        )
    return None


class PlannedModel(BaseModel):
    """One judge model of a dry run: its calls, estimated tokens and, when its price is known, cost."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float | None = Field(None, description="None: no known price (give one with --price IN,OUT)")
    price: str = Field("unknown", description="where the price comes from")


def planned_models(
    calls: list[PlannedCall],
    model_of: Callable[[str], str],
    config_of: Callable[[str], LLMConfig],
    given: tuple[float, float] | None = None,
) -> dict[str, PlannedModel]:
    """The plan split by the model each call's component would use, each priced when a price is known.

    `model_of(component)` -> ``backend:model``; `config_of(component)` -> its `LLMConfig`.
    """
    groups: dict[str, list[PlannedCall]] = {}
    configs: dict[str, LLMConfig] = {}
    for call in calls:
        model = model_of(call.component)
        groups.setdefault(model, []).append(call)
        configs.setdefault(model, config_of(call.component))
    out = {}
    for model, group in sorted(groups.items()):
        figures = estimate(group)
        price = price_for(configs[model], model.partition(":")[2] or model, given)
        cost = price.cost(figures["prompt_tokens"], figures["completion_tokens"]) if price is not None else None
        out[model] = PlannedModel(
            **figures, cost_usd=None if cost is None else round(cost, 6), price=price.source if price else "unknown"
        )
    return out


def model_namer(provider: LLMProvider) -> tuple[Callable[[str], str], Callable[[str], LLMConfig]]:
    """(component -> ``backend:model``, component -> LLMConfig) for a dry run: the backend is built when it
    can be (nothing is loaded or called); when it cannot (no API key yet), the configured names stand."""
    names: dict[str, str] = {}

    def config_of(component: str) -> LLMConfig:
        try:
            return provider.get(component).config
        except UserError:
            return provider.component_config(component)

    def model_of(component: str) -> str:
        if component not in names:
            try:
                names[component] = provider.get(component).slot.model_key
            except UserError:
                config = provider.component_config(component)
                names[component] = f"{config.backend}:{config.model or 'default model'}"
        return names[component]

    return model_of, config_of
