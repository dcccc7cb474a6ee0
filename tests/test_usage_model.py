"""The one `Usage` record: a call's result, the tracker's slices and a judgment share it; old
judgment records still read; usage summaries of the manifest add up with ratios recomputed."""

from __future__ import annotations

import asyncio

from usersimcrs.core.usage import Usage, add_summaries, upgrade_legacy_usage
from usersimcrs.judges.base import Judgment
from usersimcrs.judges.parsing import ScoreSpec, ask_score
from usersimcrs.llm.base import LLM, LLMResult, Message
from usersimcrs.llm.usage import UsageTracker


def test_a_call_result_the_tracker_slices_and_a_judgment_share_one_usage_class():
    tracker = UsageTracker()
    tracker.record("judge", "openai:m", Usage(calls=1, prompt_tokens=3))
    slices = [tracker._total, *tracker._by_component.values(), *tracker._by_model.values()]
    judgment = Judgment(conversation_id="c", judge="quality", name="fluency", value=4.0, scale=(1.0, 5.0))
    assert LLMResult.model_fields["usage"].annotation is Usage
    assert {type(LLMResult(text="x").usage), type(judgment.usage), *map(type, slices)} == {Usage}


def test_add_makes_a_new_object_and_in_place_add_changes_only_the_left_side():
    a, b = Usage(calls=1, prompt_tokens=3), Usage(cache_hits=1, completion_tokens=2, retries=1, errors=1)
    total = a + b
    assert total.model_dump() == {
        "calls": 1,
        "cache_hits": 1,
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "retries": 1,
        "errors": 1,
    }
    assert a == Usage(calls=1, prompt_tokens=3) and total.total_tokens == 5
    a += b
    assert a == total and b == Usage(cache_hits=1, completion_tokens=2, retries=1, errors=1)
    assert "total_tokens" not in total.model_dump()  # on disk: the six counters only


def test_an_old_judgment_record_with_cached_calls_reads_in_todays_terms():
    old = {
        "conversation_id": "c1",
        "judge": "quality",
        "name": "fluency",
        "value": 4.0,
        "scale": [1.0, 5.0],
        "status": "ok",
        "model": "openai:m",
        "attempts": 2,
        "usage": {"prompt_tokens": 910, "completion_tokens": 31, "calls": 2, "cached_calls": 1},
    }
    judgment = Judgment.model_validate(old)
    assert judgment.usage == Usage(calls=1, cache_hits=1, prompt_tokens=910, completion_tokens=31)
    assert judgment.provenance == {}  # the old key is understood, not kept aside as foreign
    assert "cached_calls" not in judgment.model_dump()["usage"]
    assert judgment.model_dump()["usage"]["cache_hits"] == 1


def test_upgrading_leaves_current_usage_as_it_is():
    current = {"calls": 2, "cache_hits": 1, "by_judge": {"quality": {"calls": 2, "cache_hits": 1}}}
    assert upgrade_legacy_usage(current) == current
    old = {"by_judge": {"quality": {"calls": 5, "cached_calls": 2}}}
    assert upgrade_legacy_usage(old) == {"by_judge": {"quality": {"calls": 3, "cache_hits": 2}}}


def test_summing_two_manifest_usage_summaries_adds_counters_and_recomputes_prefix_reuse():
    first = {
        "calls": 4,
        "cache_hits": 1,
        "prompt_tokens": 100,
        "completion_tokens": 10,
        "retries": 1,
        "errors": 0,
        "by_component": {
            "simulator": {"calls": 4, "prompt_chars": 1000, "prefix_reused_chars": 700, "prefix_reuse": 0.7}
        },
        "by_model": {"openai:a": {"calls": 4}},
    }
    second = {
        "calls": 2,
        "cache_hits": 3,
        "prompt_tokens": 50,
        "completion_tokens": 5,
        "retries": 0,
        "errors": 2,
        "by_component": {
            "simulator": {"calls": 2, "prompt_chars": 500, "prefix_reused_chars": 400, "prefix_reuse": 0.8},
            "nlg": {"calls": 0, "prompt_chars": 0, "prefix_reused_chars": 0, "prefix_reuse": None},
        },
        "by_model": {"openai:b": {"calls": 2}},
    }
    summed = add_summaries(first, second)
    assert {
        k: summed[k] for k in ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "retries", "errors")
    } == {"calls": 6, "cache_hits": 4, "prompt_tokens": 150, "completion_tokens": 15, "retries": 1, "errors": 2}
    simulator = summed["by_component"]["simulator"]
    assert simulator["calls"] == 6 and simulator["prompt_chars"] == 1500 and simulator["prefix_reused_chars"] == 1100
    assert simulator["prefix_reuse"] == round(1100 / 1500, 4)  # recomputed, not 0.7 + 0.8
    assert summed["by_component"]["nlg"]["prefix_reuse"] is None
    assert summed["by_model"] == {"openai:a": {"calls": 4}, "openai:b": {"calls": 2}}
    assert add_summaries(None, second) == add_summaries(second, {})  # a first session adds to nothing
    assert first["calls"] == 4 and second["by_component"]["simulator"]["prefix_reuse"] == 0.8  # inputs unchanged


class _CachedOnce(LLM):
    """Answers a score; the second answer says it came from the response cache."""

    backend, model = "fake", "m"

    def __init__(self) -> None:
        self.answers = 0

    async def complete(self, messages: list[Message], **kw) -> LLMResult:
        self.answers += 1
        return LLMResult(
            text='{"rationale": "ok", "rating": 4}',
            parsed={"rationale": "ok", "rating": 4},
            usage=Usage(prompt_tokens=7, completion_tokens=2),
            cached=self.answers > 1,
            backend=self.backend,
            model=self.model,
        )


def test_a_judgment_counts_backend_calls_and_cache_hits_apart():
    llm = _CachedOnce()
    spec = ScoreSpec(low=1.0, high=5.0)
    messages = [Message(role="user", content="rate")]
    fresh = asyncio.run(ask_score(llm, messages, spec, component="judge"))
    cached = asyncio.run(ask_score(llm, messages, spec, component="judge"))
    assert fresh.usage == Usage(calls=1, prompt_tokens=7, completion_tokens=2)
    assert cached.usage == Usage(cache_hits=1, prompt_tokens=7, completion_tokens=2)
