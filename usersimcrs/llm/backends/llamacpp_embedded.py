"""`llamacpp` backend: a GGUF model run in-process by llama-cpp-python (offline, no server).

llama.cpp contexts are not thread-safe, so generation runs in a worker thread under a lock, one
call at a time per loaded model. The model is loaded on first use, once per backend instance (the
provider shares instances between components with the same config). Structured output uses a
grammar built from the JSON schema; bounded integer ranges are turned into enums first because the
grammar converter does not enforce numeric bounds. The grammar is applied lazily by default
(`grammar_sampling`, see lazy_grammar.py): the sampled token is checked, and the whole vocabulary
goes through the grammar only when it rejects that token.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from usersimcrs.core.usage import Usage
from usersimcrs.errors import ConfigError
from usersimcrs.llm.base import ChatRequest, Message, RawBackend, token_usage
from usersimcrs.llm.config import LLMConfig, llama_threads
from usersimcrs.llm.embedded_model import LOCAL_EXTRA, default_model_path
from usersimcrs.llm.failures import PermanentLLMError, TransientLLMError, shorten

if TYPE_CHECKING:
    from llama_cpp import LlamaGrammar

    from usersimcrs.llm.backends.lazy_grammar import GrammarCounts

MAX_ENUM_RANGE = 200
ROLE_LABELS = {"system": "Instructions", "user": "User", "assistant": "Assistant"}


# llama-cpp-python silences a load by pointing the process's file descriptors 1 and 2 at /dev/null
# and back; two loads in two threads at once (matrix cells in parallel) can restore them in the
# wrong order and leave the process writing to /dev/null for good, so loads take turns
LOADING = threading.Lock()


ROUTING = threading.Lock()


def route_llama_logs() -> Any:
    """Send llama.cpp's own log lines to our debug log (`-v` shows them) instead of stderr.

    llama-cpp-python prints them itself, and with `verbose=False` still lets through lines such as
    `llama_kv_cache_iswa: using full-size SWA cache` (its level table is older than llama.cpp's).
    Installed once per process, after llama_cpp's own logger. The lock matters: two threads loading
    models at once must not each install a callback, since the one not kept would be freed while
    llama.cpp still calls it (that crashed the demo's parallel cells).
    """
    with ROUTING:
        return _installed_log_callback()


@functools.lru_cache(maxsize=1)
def _installed_log_callback() -> Any:
    """The C log callback, made and installed once; the cache keeps it alive for llama.cpp."""
    import llama_cpp

    logger = logging.getLogger("usersimcrs.llm.llamacpp")

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("%s", text.decode("utf-8", "replace").rstrip("\n"))

    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
    return forward


def grammar_schema(schema: Any) -> Any:
    """`schema` with bounded integer ranges spelled out as enums (so the grammar enforces them)."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    tightened = {key: grammar_schema(value) for key, value in schema.items()}
    low, high = schema.get("minimum"), schema.get("maximum")
    bounded = schema.get("type") == "integer" and "enum" not in schema
    if (
        bounded
        and isinstance(low, (int, float))
        and isinstance(high, (int, float))
        and 0 <= high - low <= MAX_ENUM_RANGE
    ):
        tightened = {k: v for k, v in tightened.items() if k not in ("type", "minimum", "maximum")}
        tightened["enum"] = list(range(int(low), int(high) + 1))
    return tightened


def schema_grammar(schema: dict[str, Any]) -> LlamaGrammar:
    """The llama.cpp grammar that constrains output to `schema`."""
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_json_schema(json.dumps(grammar_schema(schema)), verbose=False)


def plain_prompt(messages: list[Message]) -> tuple[str, list[str]]:
    """A transcript-style prompt for base models without a chat template, and its stop strings."""
    lines = [f"{ROLE_LABELS[m.role]}: {m.content.strip()}" for m in messages]
    return "\n\n".join(lines) + "\n\nAssistant:", ["\n\nUser:", "\n\nInstructions:", "\nUser:"]


class LlamaCppEmbedded(RawBackend):
    """Runs a GGUF model in this process; the default is the packaged Gemma 3 270M."""

    backend = "llamacpp"
    max_parallel_calls = 1  # one in-process model serves one request at a time

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._path: Path | None = Path(config.model_path).expanduser() if config.model_path else None
        self.model = config.model or (self._path.stem if self._path else "gemma-3-270m")
        self._lock = threading.Lock()
        self._llama: Any = None
        self._template: Any = None

    # -- loading ---------------------------------------------------------------------------
    def _load(self) -> Any:
        """The llama.cpp model, loaded on first use (call with the lock held)."""
        if self._llama is not None:
            return self._llama
        try:
            # lazy: lazy_grammar imports llama_cpp, which only the [local] extra installs
            from usersimcrs.llm.backends.lazy_grammar import GrammarLlama
        except ImportError as exc:
            if exc.name == "llama_cpp":
                raise ConfigError(
                    f"llm.backend llamacpp (the embedded model) needs the [local] extra: {LOCAL_EXTRA}"
                ) from None
            raise ConfigError(
                f"llm.backend llamacpp: llama-cpp-python is installed but cannot be loaded ({exc})"
            ) from None
        if self._path is None:
            self._path = default_model_path()
        if not self._path.is_file():
            raise ConfigError(f"llm.model_path: no model file at {self._path}")
        threads = llama_threads(self.config.n_threads)
        with LOADING:
            route_llama_logs()
            self._llama = GrammarLlama(
                model_path=str(self._path),
                lazy_grammar=self.config.grammar_sampling == "lazy",
                n_ctx=self.config.n_ctx,
                n_threads=threads,
                # prompts too: llama.cpp's default is one thread per CPU for them, which, beside other busy
                # processes, spin at every barrier (2.3x the CPU of one thread on 2 loaded cores)
                n_threads_batch=threads,
                seed=0,
                verbose=False,
            )
        self._template = self._chat_template(self._llama)
        return self._llama

    @staticmethod
    def _chat_template(llama: Any) -> Any:
        """A formatter for the GGUF's chat template, or None for base models without one."""
        template = llama.metadata.get("tokenizer.chat_template")
        if not template:
            return None
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def token_text(key: str) -> str:
            token_id = llama.metadata.get(key)
            return llama.detokenize([int(token_id)], special=True).decode("utf-8", "ignore") if token_id else ""

        return Jinja2ChatFormatter(
            template=template,
            eos_token=token_text("tokenizer.ggml.eos_token_id"),
            bos_token=token_text("tokenizer.ggml.bos_token_id"),
        )

    @property
    def grammar_counts(self) -> GrammarCounts | None:
        """Tokens sampled lazily under a grammar and how many the grammar rejected (a `GrammarCounts`),
        None before the model is loaded."""
        return None if self._llama is None else self._llama.grammar_counts

    # -- generation ------------------------------------------------------------------------
    def _prompt_tokens(self, llama: Any, messages: list[Message]) -> tuple[list[int], list[str]]:
        """Prompt token ids and stop strings: the model's chat template if any, else a transcript."""
        if self._template is not None:
            formatted = self._template(messages=[{"role": m.role, "content": m.content} for m in messages])
            stops = formatted.stop if isinstance(formatted.stop, list) else [formatted.stop] if formatted.stop else []
            return llama.tokenize(formatted.prompt.encode("utf-8"), add_bos=False, special=True), stops
        prompt, stops = plain_prompt(messages)
        return llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False), stops

    def _generate(
        self,
        messages: list[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        schema: dict[str, Any] | None,
        cancelled: threading.Event,
    ) -> dict[str, Any]:
        """One completion in the worker thread; stops early when the caller has given up."""
        with self._lock:
            llama = self._load()  # first, so that a missing [local] extra is its one-line ConfigError
            from llama_cpp import StoppingCriteriaList

            tokens, stops = self._prompt_tokens(llama, messages)
            grammar = None if schema is None else schema_grammar(schema)
            return llama.create_completion(
                tokens,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed if seed is not None else 0,
                stop=[] if grammar is not None else stops,
                grammar=grammar,
                stopping_criteria=StoppingCriteriaList([lambda _ids, _logits: cancelled.is_set()]),
                **self.config.options,
            )

    async def call(self, request: ChatRequest) -> tuple[str, Usage]:
        """One generation in a worker thread (cancelling the await also stops the generation)."""
        cancelled = threading.Event()
        try:
            output = await asyncio.to_thread(
                self._generate,
                request.messages,
                request.temperature,
                request.max_tokens,
                request.seed,
                request.schema,
                cancelled,
            )
        except asyncio.CancelledError:
            cancelled.set()
            raise
        except ConfigError:
            raise
        except ValueError as exc:  # e.g. the prompt does not fit in n_ctx
            raise PermanentLLMError(f"llamacpp: {shorten(str(exc))}") from None
        except RuntimeError as exc:
            raise TransientLLMError(f"llamacpp: {shorten(str(exc))}") from None
        usage = output.get("usage") or {}
        text = output["choices"][0]["text"].strip()
        return text, token_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))

    async def aclose(self) -> None:
        """Free the model."""
        with self._lock:
            if self._llama is not None:
                self._llama.close()
                self._llama = None
