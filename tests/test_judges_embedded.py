"""One judge call on the embedded model: schema-constrained output keeps even a 270M model parseable,
and the dry run's estimate of it is within 25% of the tokens the model's own tokenizer counted."""

from __future__ import annotations

import asyncio

import pytest

from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.judges.base import JudgeOptions
from usersimcrs.judges.estimate import estimate, prompt_tokens
from usersimcrs.judges.prompt_builder import ConversationView, criterion_messages
from usersimcrs.judges.quality import QualityJudge
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider
from usersimcrs.runtime.context import RunContext

pytestmark = [pytest.mark.embedded, pytest.mark.slow]


def test_embedded_model_gives_a_valid_score_and_the_estimate_is_close(embedded_model_path):
    dialogue = Dialogue(conversation_id="emb-1")
    dialogue.add(Utterance(participant="USER", text="I'd like a funny movie for tonight."))
    dialogue.add(
        Utterance(
            participant="AGENT",
            text="Try Airplane! (1980), a classic spoof.",
            items=[ItemRef(title="Airplane! (1980)")],
        )
    )
    dialogue.add(Utterance(participant="USER", text="Seen it. Anything newer?"))
    dialogue.add(
        Utterance(participant="AGENT", text="Superbad (2007) is very funny.", items=[ItemRef(title="Superbad (2007)")])
    )
    judge = QualityJudge(JudgeOptions(criteria=["fluency"], max_tokens=96, rationale_chars=160))
    # one llama.cpp thread: the suite runs one test per core, and a second thread per test only spins
    provider = LLMProvider(
        LLMConfig(backend="llamacpp", model_path=embedded_model_path, cache=False, n_ctx=2048, n_threads=1)
    )

    async def go():
        try:
            return await judge.score(dialogue, RunContext(llms=provider))
        finally:
            await provider.aclose()

    planned = estimate(judge.plan_in(dialogue, None, RunContext(llms=provider)))  # what `judge --dry-run` prints
    (judgment,) = asyncio.run(go())
    assert judgment.status == "ok", judgment.error
    assert 1 <= judgment.value <= 5 and judgment.value == int(judgment.value)
    assert judgment.usage.prompt_tokens > 0 and judgment.usage.completion_tokens > 0
    view = ConversationView.from_dialogue(dialogue)
    messages = criterion_messages(judge.rubric, judge.criteria[0], view, layout=judge.layout_for(view, None))
    estimated_prompt = prompt_tokens(messages)
    assert abs(estimated_prompt - judgment.usage.prompt_tokens) / judgment.usage.prompt_tokens < 0.2
    # the dry run's whole estimate against the tokens llama.cpp's own tokenizer counted for the call
    spent = judgment.usage.prompt_tokens + judgment.usage.completion_tokens
    assert planned["calls"] == 1 and abs(planned["total_tokens"] - spent) / spent <= 0.25, (planned, judgment.usage)
