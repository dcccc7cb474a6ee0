"""Score the agenda simulator's NLU on annotated AGENT turns (what `usersimcrs nlu-eval` prints).

Gold acts come from a DialogueKit JSON file; gold codes and predicted intents are mapped into a
shared label set (built-in: IARD codes -> CIR intents, see the label YAML) and intent-level
precision/recall/F1 are computed, micro- and macro-averaged.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import AGENT, Dialogue
from usersimcrs.core.dialoguekit_io import read_dialoguekit
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.usage import UsageSummary
from usersimcrs.engine.loop import run_blocking
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.simulators.agenda.nlu.base import NLUSettings, nlu_components
from usersimcrs.simulators.agenda.nlu.evaluation import load_label_map, score_intents
from usersimcrs.simulators.agenda.policy.domain import Domain, domain_from_items, load_domain
from usersimcrs.simulators.agenda.policy.interaction_model import load_interaction_model


class NLUEvalRequest(BaseModel):
    """What to score: the annotated file, which NLU, its resources and (for the LLM NLU) the model."""

    model_config = ConfigDict(extra="forbid")

    dialogues: str
    nlu: str = "rules"
    structured: bool = False
    labels: str | None = None
    interaction_model: str | None = None
    domain: str | None = None
    items: str | None = None
    limit: int | None = Field(default=None, ge=0)
    max_tokens: int = Field(default=48, ge=1)
    llm: LLMConfig = Field(default_factory=LLMConfig)


class IntentRow(TypedDict):
    """One intent's scores in the report (`support`: its gold occurrences)."""

    intent: str
    precision: float
    recall: float
    f1: float
    support: int


class NLUEvalReport(TypedDict):
    """What `nlu_eval` returns and `usersimcrs nlu-eval` prints (as a table, or as this JSON)."""

    dialogues: str
    nlu: str
    utterances: int
    micro: dict[str, float]
    macro: dict[str, float]
    exact_match: float
    per_intent: list[IntentRow]
    dropped: int
    llm_usage: NotRequired[UsageSummary]  # the LLM NLU's calls and tokens


async def nlu_eval_async(request: NLUEvalRequest) -> NLUEvalReport:
    """Run the NLU over every annotated AGENT utterance of `request.dialogues` and score it."""
    dialogues = read_dialoguekit(request.dialogues)
    labels = load_label_map(request.labels)
    items = (
        ItemCollection.from_csv(request.items, delimiters={"genres": "|", "keywords": "|"}) if request.items else None
    )
    domain = (
        load_domain(request.domain)
        if request.domain
        else (
            domain_from_items(items)
            if items is not None
            else Domain(slot_names=["TITLE", "GENRE", "ACTORS", "DIRECTOR", "YEAR", "KEYWORD"])
        )
    )
    provider = LLMProvider(request.llm) if request.nlu == "llm" else None
    settings = NLUSettings(
        interaction_model=load_interaction_model(request.interaction_model),
        domain=domain,
        items=items,
        llm=(lambda: provider.get("nlu")) if provider is not None else None,
        structured=request.structured,
        max_tokens=request.max_tokens,
    )
    nlu = nlu_components.get(request.nlu)(settings)  # an unknown name is a one-line ConfigError
    gold: list[set[str]] = []
    predicted: list[set[str]] = []
    dropped = 0
    try:
        for dialogue in dialogues:
            history = Dialogue(conversation_id=dialogue.conversation_id)
            for index, utterance in enumerate(dialogue.utterances):
                if request.limit is not None and len(gold) >= request.limit:
                    break
                if utterance.participant == AGENT and utterance.dialogue_acts:
                    result = await nlu.understand(utterance, history, seed=index)
                    dropped += len(result.dropped)
                    gold.append(labels.map_gold([a.intent for a in utterance.dialogue_acts]))
                    predicted.append(labels.map_predicted([a.intent for a in result.acts]))
                history.utterances.append(utterance)
    finally:
        if provider is not None:
            await provider.aclose()
    report = score_intents(gold, predicted)
    out: NLUEvalReport = {
        "dialogues": request.dialogues,
        "nlu": request.nlu + (" (structured)" if request.structured else ""),
        "utterances": report.utterances,
        "micro": report.micro,
        "macro": report.macro,
        "exact_match": report.exact_match,
        "per_intent": [
            {"intent": s.intent, "precision": s.precision, "recall": s.recall, "f1": s.f1, "support": s.tp + s.fn}
            for s in report.per_intent
        ],
        "dropped": dropped,
    }
    if provider is not None:
        out["llm_usage"] = provider.usage_summary()
    return out


def nlu_eval(request: NLUEvalRequest) -> NLUEvalReport:
    """`nlu_eval_async` from synchronous code (also inside a running event loop)."""
    return run_blocking(nlu_eval_async(request))
