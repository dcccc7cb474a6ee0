"""Lazy grammar sampling for the embedded model, the way llama.cpp's common sampler does it.

llama-cpp-python puts the JSON grammar in its sampler chain, so every generated token runs the
grammar over the whole vocabulary (262k candidates for Gemma 3: about 65 ms of CPU a token here,
more than the model's own forward pass). Here each step samples from the unconstrained chain,
checks the one sampled token against the grammar and keeps it when the grammar allows it; only on
a rejection does it sample again under the grammar (`common_sampler_sample` with
grammar_first=false). The resample first runs the grammar over the highest-logit tokens alone
(`SHORTLISTS`): when enough of them are allowed for the chain (1 for greedy, k for top-k) the draw
is the one the whole vocabulary would give, else the grammar runs over the whole vocabulary. Every
token kept is allowed by the grammar, so the output is as valid as the eager path's; a greedy call
gives the eager path's text token for token from the same model state (docs/llm.md).

This module imports llama_cpp: the backend imports it only when it loads a model.
"""

from __future__ import annotations

import ctypes
import math
import weakref
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np
from llama_cpp import Llama, LlamaGrammar
from llama_cpp._internals import LlamaContext, LlamaSampler


@dataclass
class GrammarCounts:
    """Tokens sampled lazily under a grammar, how many of them the grammar rejected (each resampled
    under the grammar), and how many of those resamples needed the whole vocabulary."""

    tokens: int = 0
    resampled: int = 0
    whole_vocabulary: int = 0


SHORTLISTS = (256, 4096, 32768)
"""Sizes of the highest-logit shortlists a resample tries before the whole vocabulary."""


class Candidates:
    """A reusable llama_token_data_array over the whole vocabulary (samplers may move its pointer
    and shrink it, so `fill` sets every field again)."""

    def __init__(self, n_vocab: int) -> None:
        self.data = np.zeros(n_vocab, dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)]))
        self.ids = np.arange(n_vocab, dtype=np.intc)
        self.array = llama_cpp.llama_token_data_array(
            data=self.data.ctypes.data_as(llama_cpp.llama_token_data_p), size=n_vocab, selected=-1, sorted=False
        )
        self._pointer = self.array.data

    def fill(self, logits: np.ndarray, ids: np.ndarray | None = None) -> Any:
        """The array holding every token with its logit (or only the tokens `ids`, in that order, with
        `logits` theirs), unsorted and nothing selected (a ctypes pointer)."""
        size = len(logits)
        self.data["id"][:size] = self.ids if ids is None else ids
        self.data["logit"][:size] = logits
        self.data["p"][:size] = 0.0
        self.array.data, self.array.size = self._pointer, size
        self.array.selected, self.array.sorted = -1, False
        return ctypes.byref(self.array)

    def finite(self) -> int:
        """How many candidates the samplers applied so far left possible (a logit above -inf)."""
        return int(np.isfinite(self.data["logit"][: self.array.size]).sum())

    def selected(self) -> int:
        """The token id the chain picked (read through the array's current pointer)."""
        if self.array.selected < 0:
            raise RuntimeError("llama.cpp sampler chain selected no token")
        return int(self.array.data[self.array.selected].id)


class LazyGrammarSampler:
    """Stands in for llama-cpp-python's sampler chain in `Llama.generate` (its `sample(ctx, idx)` call):
    the unconstrained `chain` first, the grammar only to check that token, or on a rejection."""

    def __init__(
        self,
        chain: LlamaSampler,
        vocab: Any,
        grammar: LlamaGrammar,
        n_vocab: int,
        counts: GrammarCounts,
        need: int | None = None,
    ) -> None:
        self.chain = chain
        self.need = need
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.grammar:
            raise ValueError("llama.cpp could not parse the grammar built from the JSON schema")
        weakref.finalize(self, llama_cpp.llama_sampler_free, self.grammar)  # the chain frees itself
        self.n_vocab = n_vocab
        self.counts = counts
        self.candidates = Candidates(n_vocab)

    def sample(self, ctx: LlamaContext, idx: int = -1) -> int:
        """The next token from the logits of output `idx` of `ctx`, accepted by chain and grammar."""
        pointer = llama_cpp.llama_get_logits_ith(ctx.ctx, idx)
        return self.sample_logits(np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)))

    def sample_logits(self, logits: np.ndarray) -> int:
        """One lazy step over `logits`: sample unconstrained, keep the token if the grammar allows it,
        else sample again under the grammar (a shortlist, else every candidate); then accept it."""
        token = self._pick(logits, constrained=False)
        if not self.allows(token):
            self.counts.resampled += 1
            shortlisted = self._shortlisted(logits)
            if shortlisted is None:
                self.counts.whole_vocabulary += 1
            token = self._pick(logits, constrained=True) if shortlisted is None else shortlisted
        self.accept(token)
        self.counts.tokens += 1
        return token

    def allows(self, token: int) -> bool:
        """Whether the grammar, in its current state, allows `token` next (a one-candidate pass)."""
        cell = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(id=token, logit=1.0, p=0.0))
        single = llama_cpp.llama_token_data_array(data=cell, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(single))
        return math.isfinite(cell[0].logit)

    def _pick(self, logits: np.ndarray, *, constrained: bool) -> int:
        """The chain's draw over every token, under the grammar when `constrained`."""
        if self.need == 1 and not constrained:  # a penalty-free greedy chain picks the first highest logit
            return int(np.argmax(logits))
        array = self.candidates.fill(logits)
        if constrained:
            llama_cpp.llama_sampler_apply(self.grammar, array)
        llama_cpp.llama_sampler_apply(self.chain.sampler, array)
        return self.candidates.selected()

    def _shortlisted(self, logits: np.ndarray) -> int | None:
        """The resample drawn from the highest-logit tokens alone, when at least `need` of them are
        allowed: the chain (penalty-free greedy or top-k) would keep only those, so the draw is the
        one the whole vocabulary gives; None when the shortlist cannot tell (then the full pass)."""
        if self.need is None:
            return None
        for size in SHORTLISTS:
            if size < self.need or size >= len(logits):
                continue
            top = np.argpartition(logits, -size)[-size:]
            top = top[np.lexsort((top, -logits[top]))]  # highest first, ties by id as llama.cpp scans them
            array = self.candidates.fill(logits[top], top)
            llama_cpp.llama_sampler_apply(self.grammar, array)
            if self.candidates.finite() >= self.need:
                llama_cpp.llama_sampler_apply(self.chain.sampler, array)
                return self.candidates.selected()
        return None

    def accept(self, token: int) -> None:
        """Advance the grammar and the chain (repetition penalties, mirostat) past `token`."""
        llama_cpp.llama_sampler_accept(self.grammar, token)
        llama_cpp.llama_sampler_accept(self.chain.sampler, token)


class GrammarLlama(Llama):
    """`Llama` whose grammar-constrained generations sample lazily (`lazy_grammar`, on by default);
    with it off, the grammar sits in llama-cpp-python's own chain (eager), as in the library."""

    def __init__(self, *args: Any, lazy_grammar: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_grammar = lazy_grammar
        self.grammar_counts = GrammarCounts()

    def _init_sampler(self, **sampling: Any) -> Any:  # type: ignore[override]  # called by keyword only
        """The library's chain (`Llama.generate` passes its sampling arguments by name), unconstrained
        and wrapped in a lazy sampler when there is a grammar."""
        grammar: LlamaGrammar | None = sampling.pop("grammar", None)
        if grammar is None or not self.lazy_grammar:
            return super()._init_sampler(grammar=grammar, **sampling)
        chain = super()._init_sampler(grammar=None, **sampling)
        need = shortlist_need(sampling)
        return LazyGrammarSampler(chain, self._model.vocab, grammar, self._n_vocab, self.grammar_counts, need)


def shortlist_need(sampling: dict[str, Any]) -> int | None:
    """How many allowed tokens a resample needs among the highest-logit ones to be the draw of the whole
    vocabulary: 1 for greedy, k for top-k sampling; None (whole vocabulary) when penalties, logits
    processors, mirostat or sampling without top-k look beyond the highest logits."""
    penalties = (
        sampling.get("repeat_penalty", 1.0) != 1.0
        or sampling.get("frequency_penalty", 0.0) != 0.0
        or sampling.get("presence_penalty", 0.0) != 0.0
    )
    if penalties or sampling.get("logits_processor") is not None:
        return None
    temp = sampling.get("temp", 0.8)
    if temp == 0.0:
        return 1
    top_k = int(sampling.get("top_k", 40))
    if temp > 0.0 and sampling.get("mirostat_mode", 0) == 0 and top_k > 0:
        return top_k
    return None
