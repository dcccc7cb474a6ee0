"""Lazy grammar sampling for the embedded model (issue #36): valid JSON for every schema the toolkit
sends, the grammar applied to the whole vocabulary only on a rejection, same text as the eager path
at temperature 0 and the same text for the same seed."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crs_connectors.baselines.llm_crs import reply_schema
from usersimcrs.judges.parsing import BatchSpec, ScoreSpec
from usersimcrs.llm.backends.llamacpp_embedded import schema_grammar
from usersimcrs.llm.structured import parse_structured, validate
from usersimcrs.simulators.agenda.nlu.act_parser import act_schema
from usersimcrs.simulators.llm_dual import STOP_SCHEMA
from usersimcrs.simulators.prompting import UTTERANCE_SCHEMA
from usersimcrs.simulators.target_free import REFLECTION_SCHEMA

llama_cpp = pytest.importorskip("llama_cpp", reason="the [local] extra (llama-cpp-python) is not installed")
from usersimcrs.llm.backends.lazy_grammar import GrammarCounts, GrammarLlama, shortlist_need  # noqa: E402

# the schemas the toolkit's simulators, judges, NLU and LLM CRS send (schema=...)
SCHEMAS = {
    "utterance": UTTERANCE_SCHEMA,
    "stop": STOP_SCHEMA,
    "reflection": REFLECTION_SCHEMA,
    "acts": act_schema(["inform", "recommend", "elicit"], ["genres", "keywords", "title"]),
    "judge": ScoreSpec(low=1, high=5, text_chars=80).schema(),
    "judge_batch": BatchSpec(
        {"fluency": ScoreSpec(low=1, high=5, text_chars=40), "relevance": ScoreSpec(low=1, high=3, text_chars=40)}
    ).schema(),
    "llm_crs": reply_schema(4, 3),
}
MAX_STEPS = 400


def test_shortlist_need_follows_the_chain():
    """Greedy needs one allowed token among the highest logits, top-k needs k; anything that looks
    beyond the highest logits (penalties, processors, mirostat, no top-k) takes the whole vocabulary."""
    assert shortlist_need({"temp": 0.0, "top_k": 40}) == 1
    assert shortlist_need({"temp": 0.7, "top_k": 40}) == 40
    assert shortlist_need({"temp": 0.7, "top_k": 0}) is None
    assert shortlist_need({"temp": 0.7, "top_k": 40, "mirostat_mode": 2}) is None
    assert shortlist_need({"temp": 0.0, "repeat_penalty": 1.1}) is None
    assert shortlist_need({"temp": 0.0, "presence_penalty": -0.5}) is None
    assert shortlist_need({"temp": 0.0, "logits_processor": [lambda ids, scores: scores]}) is None
    assert shortlist_need({"temp": -1.0}) is None


@pytest.fixture(scope="module")
def vocab_model(embedded_model_path):
    """The embedded model with a small context: its vocabulary and grammar sampler, no generation."""
    llama = GrammarLlama(model_path=embedded_model_path, n_ctx=64, n_threads=1, n_threads_batch=1, verbose=False)
    yield llama
    llama.close()


@pytest.fixture(scope="module")
def closers(vocab_model) -> np.ndarray:
    """Tokens that end a JSON string, object or array, and end-of-generation tokens: favouring them
    in random logits makes random outputs finish within a few dozen tokens."""
    vocab = vocab_model._model.vocab
    mask = np.zeros(vocab_model.n_vocab(), dtype=bool)
    for token in range(len(mask)):
        piece = vocab_model._model.token_to_piece(token, special=True)
        mask[token] = any(c in piece for c in (b'"', b"}", b"]")) or llama_cpp.llama_vocab_is_eog(vocab, token)
    return mask


def sample_random(llama, closers, schema, *, seed: int, temp: float, bonus: float, repeat_penalty: float = 1.0):
    """Run the lazy sampler over random logits (`closers` favoured by `bonus`) until an end-of-generation
    token: the text, whether it finished, and the sampler."""
    rng = np.random.default_rng(seed)
    llama.set_seed(seed)
    llama.grammar_counts = GrammarCounts()
    sampler = llama._init_sampler(temp=temp, top_k=40, repeat_penalty=repeat_penalty, grammar=schema_grammar(schema))
    tokens: list[int] = []
    finished = False
    for _ in range(MAX_STEPS):
        logits = rng.normal(0.0, 3.0, llama.n_vocab()).astype(np.single) + bonus * closers
        token = sampler.sample_logits(logits)
        if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
            finished = True
            break
        tokens.append(token)
    return llama.detokenize(tokens).decode("utf-8"), finished, sampler


@pytest.mark.embedded
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(sorted(SCHEMAS)),
    seed=st.integers(0, 2**31 - 1),
    temp=st.sampled_from([0.0, 0.8]),
    bonus=st.floats(4.0, 12.0),
)
def test_every_lazy_output_parses_against_its_schema(vocab_model, closers, name, seed, temp, bonus):
    """Random logits reject the sampled token at most steps, so the check and both resample paths
    run all the time; whatever they pick, the finished text is JSON valid for the schema."""
    schema = SCHEMAS[name]
    text, finished, sampler = sample_random(vocab_model, closers, schema, seed=seed, temp=temp, bonus=bonus)
    assume(finished)
    assert validate(json.loads(text), schema) == [], text
    assert parse_structured(text, schema) == json.loads(text)
    assert sampler.counts.resampled > 0  # random logits: the grammar rejected some sampled tokens


@pytest.mark.embedded
def test_a_rejected_token_is_resampled_under_the_grammar(vocab_model):
    """A disallowed favourite is checked, rejected and replaced: from the shortlist when it holds an
    allowed token, from the whole vocabulary when none of the highest logits is allowed."""
    schema = SCHEMAS["stop"]
    n_vocab = vocab_model.n_vocab()
    opening = [t for t in range(n_vocab) if vocab_model._model.token_to_piece(t).startswith(b"{")]
    word = vocab_model.tokenize(b"Hello", add_bos=False)[0]

    vocab_model.grammar_counts = GrammarCounts()
    sampler = vocab_model._init_sampler(temp=0.0, grammar=schema_grammar(schema))
    logits = np.zeros(n_vocab, dtype=np.single)
    logits[word], logits[opening[0]] = 10.0, 5.0  # the favourite cannot open a JSON object
    assert sampler.sample_logits(logits) == opening[0]
    assert (sampler.counts.resampled, sampler.counts.whole_vocabulary) == (1, 0)

    vocab_model.grammar_counts = GrammarCounts()
    sampler = vocab_model._init_sampler(temp=0.0, grammar=schema_grammar(schema))
    logits = np.linspace(10.0, 0.0, n_vocab, dtype=np.single)
    logits[opening] = -50.0  # every token that can open the object is far below the shortlists
    token = sampler.sample_logits(logits)
    assert vocab_model._model.token_to_piece(token).startswith(b"{")
    assert (sampler.counts.resampled, sampler.counts.whole_vocabulary) == (1, 1)

    vocab_model.grammar_counts = GrammarCounts()
    sampler = vocab_model._init_sampler(temp=0.0, grammar=schema_grammar(schema))
    logits = np.zeros(n_vocab, dtype=np.single)
    logits[opening[0]] = 10.0  # an allowed favourite is kept without a resample
    assert sampler.sample_logits(logits) == opening[0]
    assert (sampler.counts.tokens, sampler.counts.resampled) == (1, 0)


@pytest.mark.embedded
def test_penalties_take_the_whole_vocabulary_and_stay_valid(vocab_model, closers):
    schema = SCHEMAS["utterance"]
    text, finished, sampler = sample_random(
        vocab_model, closers, schema, seed=3, temp=0.0, bonus=8.0, repeat_penalty=1.3
    )
    assert finished and validate(json.loads(text), schema) == []
    assert sampler.counts.resampled > 0 and sampler.counts.whole_vocabulary == sampler.counts.resampled


@pytest.mark.embedded
def test_lazy_and_eager_generate_the_same_text_and_repeat_it(embedded_model_path):
    """Through the backend: greedy lazy output is the eager output; a seeded sample is the same in a
    fresh model; the backend counts the rejected tokens."""
    from usersimcrs.llm.backends.llamacpp_embedded import LlamaCppEmbedded
    from usersimcrs.llm.base import Message
    from usersimcrs.llm.config import LLMConfig

    messages = [
        Message(role="system", content="You are a user looking for a film. Answer with JSON."),
        Message(role="user", content="Recommender: What kind of film would you like tonight?"),
    ]
    schema = SCHEMAS["utterance"]

    def backend(mode: str) -> LlamaCppEmbedded:
        config = LLMConfig(
            backend="llamacpp", model_path=embedded_model_path, n_ctx=256, n_threads=1, grammar_sampling=mode
        )
        return LlamaCppEmbedded(config)

    async def run(llm: LlamaCppEmbedded, temperature: float) -> tuple[str, tuple[int, int] | None]:
        try:
            result = await llm.complete(messages, temperature=temperature, max_tokens=20, seed=5, schema=schema)
            counts = llm.grammar_counts
            return result.text, None if counts is None else (counts.tokens, counts.resampled)
        finally:
            await llm.aclose()

    greedy_lazy, lazy_counts = asyncio.run(run(backend("lazy"), 0.0))
    greedy_eager, eager_counts = asyncio.run(run(backend("eager"), 0.0))
    assert greedy_lazy.startswith("{") and greedy_lazy == greedy_eager
    assert lazy_counts is not None and lazy_counts[0] > 0 and lazy_counts[1] > 0  # the model's own rejections
    assert eager_counts == (0, 0)  # eager: the grammar is in llama-cpp-python's chain
    sampled, _ = asyncio.run(run(backend("lazy"), 0.8))
    assert sampled.startswith("{") and sampled == asyncio.run(run(backend("lazy"), 0.8))[0]


@pytest.mark.embedded
def test_the_grammar_mode_does_not_reach_the_cache_key(embedded_model_path, tmp_path):
    """An answer cached by the eager mode is the lazy mode's cache hit: the key is what it was."""
    from usersimcrs.llm import LLMProvider, Message
    from usersimcrs.llm.config import LLMConfig

    messages = [Message(role="user", content='Answer with JSON {"end": true or false}: are you done?')]

    async def ask(mode: str):
        config = LLMConfig(
            backend="llamacpp", model_path=embedded_model_path, n_ctx=128, n_threads=1, grammar_sampling=mode
        )
        provider = LLMProvider(config, cache_dir=str(tmp_path))
        try:
            return await provider.get("judge").complete(messages, max_tokens=8, seed=1, schema=SCHEMAS["stop"])
        finally:
            await provider.aclose()

    eager = asyncio.run(ask("eager"))
    lazy = asyncio.run(ask("lazy"))
    assert not eager.cached and lazy.cached and lazy.text == eager.text
