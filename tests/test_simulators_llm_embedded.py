"""The four LLM simulator types against the embedded model (Gemma 3 270M): short, valid dialogues.

The model is weak and slow on a CPU; one model load serves all four types and each dialogue is
two user turns with tiny token limits. The test checks that every type produces usable, valid
records through the real backend (schema-constrained output, cleaning, fallbacks), not the
quality of what the model says.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.llm_sim_support import converse, list_crs, movie_items, profile_for
from usersimcrs.core.dialogue import Dialogue
from usersimcrs.core.profile import SeenItem
from usersimcrs.runtime.context import RunContext
from usersimcrs.simulators.base import simulators

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

OPTIONS = {
    "llm_single": {"max_tokens": 20},
    "llm_dual": {"max_tokens": 20, "min_turns": 1},
    "target_free": {"max_tokens": 20, "reflection_max_tokens": 32, "top_k": 1},
    "target_biased": {"max_tokens": 20, "min_rounds": 1, "max_rounds": 2},
}


async def run_all(model_path: str) -> dict[str, Dialogue]:
    provider_module = pytest.importorskip("usersimcrs.llm.provider")
    from usersimcrs.llm.config import LLMConfig

    # one llama.cpp thread: the suite runs one test per core, and a second thread per test only spins
    provider = provider_module.LLMProvider(
        LLMConfig(backend="llamacpp", model_path=model_path, n_ctx=2048, n_threads=1)
    )
    items = movie_items()
    context = RunContext(items=items, llms=provider)
    out = {}
    try:
        for kind, options in OPTIONS.items():
            profile = profile_for(["1"], items)
            profile.seen_items = [SeenItem(item=items.get("5").ref(), rating=9, review="[Like]\ntense night drive")]
            cls = simulators.get(kind)
            sim = cls(cls.Config.model_validate({"type": kind, **options}), context, profile, 11)
            pages = [["1", "3"]] if kind == "target_biased" else [["5", "2"], ["1", "3"]]
            crs = list_crs(pages, text="Here are two picks.")
            out[kind] = await converse(sim, crs, max_turns=2, conversation_id=kind)
    finally:
        await provider.aclose()
    return out


def test_each_llm_simulator_type_runs_on_the_embedded_model(embedded_model_path):
    dialogues = asyncio.run(run_all(embedded_model_path))
    for kind, d in dialogues.items():
        assert d.end_reason is not None, kind
        users = d.user_turns
        assert users and all(re.search(r"\w", u.text) for u in users), kind
        assert all("<END>" not in u.text and not u.text.startswith(("USER:", "RECOMMENDER:")) for u in users), kind
        json.loads(d.model_dump_json())
    assert not any(re.search(r"\bheat\b", u.text, re.I) for u in dialogues["target_biased"].user_turns)
    assert dialogues["target_biased"].end_reason == "target_hit"  # the target is shown in round 1
    assert "persuasiveness_detail" in dialogues["target_biased"].metadata
    reflected = dialogues["target_free"].user_turns[1].metadata["reflected_preferences"]
    assert reflected[0]["item"] == "5" and reflected[0]["seen"] is True
