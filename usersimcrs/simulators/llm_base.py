"""Common ground of the LLM-driven simulators: options, prompt data, one LLM call site, output parsing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from usersimcrs.core.dialogue import USER, Utterance
from usersimcrs.core.generation import REPAIRED_CLOSED, REPAIRED_PROSE, STRUCTURED, TEXT, fallback_label
from usersimcrs.core.human_reference import load_reference
from usersimcrs.core.json_types import JSONSchema
from usersimcrs.core.profile import ReadOnlyDict, ReadOnlyList, UserProfile
from usersimcrs.llm.base import LLMResult, Message
from usersimcrs.prompts import load_prompt, load_prompt_file
from usersimcrs.simulators.base import SimulatorConfig, UserSimulator
from usersimcrs.simulators.prompting import (
    UTTERANCE_SCHEMA,
    clean_utterance,
    derive_seed,
    fill,
    history_messages,
    labels_of,
    parse_json_object,
    render_history,
    render_preferences,
    squeeze,
    unusable_reason,
)

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class UserStyle(BaseModel):
    """How the simulated user writes, told to the model in the prompt's style section.

    Defaults come from the bundled human reference (people writing to a recommender: median words per
    turn, 90th percentile, preferences named per turn, suggestions per conversation); the run's manifest
    records the values used under `simulator_options.style`.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="off: the prompts say nothing about style")
    words_per_turn: int = Field(
        default_factory=lambda: load_reference().style.words_per_turn, ge=1, description="typical words per message"
    )
    max_words: int = Field(
        default_factory=lambda: load_reference().style.max_words, ge=1, description="words a message rarely exceeds"
    )
    reveal_per_turn: int = Field(
        default_factory=lambda: load_reference().style.reveal_per_turn,
        ge=1,
        description="preferences the user names in one message at most",
    )
    patience: int = Field(
        default_factory=lambda: load_reference().style.patience,
        ge=1,
        description="suggestions that miss before the user gives up",
    )

    def variables(self) -> dict[str, int]:
        return {
            "words_per_turn": self.words_per_turn,
            "max_words": self.max_words,
            "reveal_per_turn": self.reveal_per_turn,
            "patience": self.patience,
        }


class LLMSimulatorConfig(SimulatorConfig):
    """Options every LLM simulator shares."""

    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(96, ge=8, le=4096, description="cap on generated tokens per utterance")
    structured: bool = Field(True, description="ask for JSON {utterance, end} (robust with small models)")
    prompt_file: str | None = Field(None, description="YAML overriding keys of the built-in prompt")
    history_mode: Literal["chat", "prompt"] = Field(
        "chat", description="history as chat turns (robust with small models) or inside one prompt"
    )
    max_history_utterances: int | None = Field(None, ge=2, description="keep only the last N utterances (None: all)")
    max_utterance_chars: int = Field(500, ge=20)
    style: UserStyle = Field(
        default_factory=UserStyle, description="how the user writes: words per turn, preferences per turn, patience"
    )
    on_unusable: Literal["fallback", "fail"] = Field(
        "fallback",
        description="when the model's answer cannot be sent (empty, a placeholder, an echo): send a canned "
        "utterance labelled generation: fallback:<problem> and counted per run, or fail the conversation",
    )

    def llm_components(self) -> list[str]:
        """Every LLM simulator calls the `simulator` component."""
        return ["simulator"]


RENDER_MEMO_LIMIT = 1024  # rendered profile parts remembered per run (one per user in a ratings run)


class UnusableAnswer(RuntimeError):
    """The model's answer could not be sent as the user's turn and the simulator is set to fail
    (`on_unusable: fail`) rather than send a canned utterance; the conversation is recorded as failed."""


@dataclass
class Generated:
    """A cleaned generation: the text, whether the model asked to end, and how it was obtained."""

    text: str
    end: bool
    source: (
        str  # a generation label of usersimcrs.core.generation: structured, text, repaired:*, fallback:*, template:*
    )
    raw: str = ""
    problem: str | None = None  # why the model's own text was unusable, if it was


def _prompt_data(names: tuple[str, ...], prompt_file: str | None) -> dict[str, Any]:
    """The built-in prompts `names` merged in order, then the user's prompt file (if any) over them."""
    base: dict[str, Any] = {}
    for name in names:
        base.update(load_prompt(name))
    return load_prompt_file(prompt_file, base=base) if prompt_file else base


class LLMUserSimulator(UserSimulator):
    """Base of the LLM simulators: loads its prompt data and calls `context.llm("simulator")`."""

    Config: ClassVar[type[SimulatorConfig]] = LLMSimulatorConfig
    config: LLMSimulatorConfig
    prompt_name: ClassVar[str] = ""
    base_prompts: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: LLMSimulatorConfig, context: RunContext, profile: UserProfile, seed: int) -> None:
        super().__init__(config, context, profile, seed)
        # the prompt data is read once per run (a deep copy of the parsed YAML per conversation was
        # 0.3 ms of CPU each); every conversation gets its own top-level copy of the run's mapping
        names = (*self.base_prompts, self.prompt_name)
        shared = getattr(context, "shared", None)
        key = f"simulator.prompt:{':'.join(names)}:{config.prompt_file or ''}"
        prompt = shared(key, lambda: _prompt_data(names, config.prompt_file)) if callable(shared) else None
        self.prompt: dict[str, Any] = (
            dict(prompt) if isinstance(prompt, dict) else _prompt_data(names, config.prompt_file)
        )
        self.labels = labels_of(self.prompt)
        self.calls = 0
        # per conversation: what the turns render alike (the prompt's head, history messages, label patterns)
        self._heads: dict[tuple[str, str], Message] = {}
        self._turn_messages: dict[tuple[bool, str], Message] = {}
        self._label_sets: tuple[list[str], list[str]] | None = None

    async def call(
        self,
        messages: list[Message],
        *,
        turn: int,
        purpose: str,
        schema: JSONSchema | None = None,
        max_tokens: int | None = None,
    ) -> LLMResult:
        """One LLM call with the configured temperature and a seed fixed by (seed, turn, purpose)."""
        self.calls += 1
        return await self.context.llm("simulator").complete(
            messages,
            temperature=self.config.temperature,
            max_tokens=max_tokens or self.config.max_tokens,
            seed=derive_seed(self.seed, turn, purpose),
            schema=schema,
            component="simulator",
        )

    async def generate(
        self,
        messages: list[Message],
        *,
        turn: int,
        purpose: str = "utterance",
        history: list[Utterance] | None = None,
    ) -> Generated:
        """Ask for the next user utterance and make it usable (structured or plain text).

        `history` lets the check tell echoes apart: repeating one of the user's own turns, or
        parroting a CRS turn or the instructions, counts as unusable.
        """
        schema = UTTERANCE_SCHEMA if self.config.structured else None
        result = await self.call(messages, turn=turn, purpose=purpose, schema=schema)
        return self.interpret(result, turn=turn, messages=messages, history=history)

    def interpret(
        self,
        result: LLMResult,
        *,
        turn: int = 0,
        messages: list[Message] | None = None,
        history: list[Utterance] | None = None,
    ) -> Generated:
        """Read {utterance, end} when available, else clean the plain text; fall back when unusable."""
        stop_token = self.prompt.get("stop_token")
        parsed = result.parsed if isinstance(result.parsed, dict) else None
        if parsed is None and self.config.structured:
            parsed = parse_json_object(result.text or "")
        if parsed is not None and isinstance(parsed.get("utterance"), str):
            raw, end = parsed["utterance"], parsed.get("end") is True
            source = REPAIRED_CLOSED if result.truncated else STRUCTURED
        else:  # plain text as asked, or prose where JSON was asked for (a repair the run counts)
            raw, end, source = result.text or "", False, REPAIRED_PROSE if self.config.structured else TEXT
        if self._label_sets is None:
            self._label_sets = (
                [self.labels[USER], "USER", "User", "You"],
                [label for key, label in self.labels.items() if key != USER]
                + ["AGENT", "ASSISTANT", "SYSTEM", "RECOMMENDER"],
            )
        own_labels, other_labels = self._label_sets
        text, saw_stop = clean_utterance(
            raw,
            own_labels=own_labels,
            other_labels=other_labels,
            stop_token=stop_token,
            max_chars=self.config.max_utterance_chars,
        )
        end = end or saw_stop
        own = [u.text for u in history or [] if u.participant == USER]
        crs = [u.text for u in history or [] if u.participant != USER]
        instructions = [m.content for m in messages or [] if m.role != "assistant"]
        problem = unusable_reason(text, instructions, own, crs)
        if problem is not None:
            if end:  # the wish to stop stands; only a usable closing line is kept
                return Generated(text if problem == "repeated" else "", True, source, raw, problem)
            return self.substitute(turn, problem, raw)
        return Generated(text, end, source, raw)

    def usable(self, generated: Generated, turn: int) -> Generated:
        """`generated` when it holds words of the model that can be sent (or is already a fallback),
        else `substitute`."""
        if generated.source.startswith("fallback") or (generated.text and not generated.problem):
            return generated
        return self.substitute(turn, generated.problem or "empty", generated.raw)

    @staticmethod
    def end_ignored(generated: Generated) -> dict[str, bool]:
        """`{"end_ignored": True}` for a turn sent although the model asked to end (at the opening, before
        `min_turns`, or where the simulator's own rule decides the end), else {}: every path that sends
        such a turn marks it, so a run can count how often the model wanted out."""
        return {"end_ignored": True} if generated.end else {}

    def substitute(self, turn: int, problem: str, raw: str = "") -> Generated:
        """The canned utterance sent instead of an unusable answer, labelled ``fallback:<problem>`` so the
        run counts it; with `on_unusable: fail`, an `UnusableAnswer` that fails the conversation instead."""
        if self.config.on_unusable == "fail":
            shown = " ".join(raw.split())[:80]
            raise UnusableAnswer(
                f"the LLM user's answer at turn {turn} is unusable ({problem}): {shown!r}; on_unusable is fail"
            )
        return Generated(self.fallback(turn), False, fallback_label(problem), raw, problem)

    def compose(self, system: str, history: list[Utterance], variables: dict[str, Any]) -> list[Message]:
        """Messages for one generation, the history rendered once, in the configured mode.

        The prompt of turn t+1 extends the prompt of turn t (prefix caching): what stays the same
        for the whole conversation comes first, the history only grows at its end, and what changes
        per turn comes last.

        prompt mode: system message + one user message (the prompt's `user` template, which starts
        with the labelled history). chat mode: system message with the prompt's stable
        `chat_block`, then the prompt's `chat_opening_cue` (a greeting in the CRS's voice, unless
        the CRS spoke first) and the history as chat turns (CRS = 'user', simulated user =
        'assistant'); the prompt's per-turn `chat_turn` text, if any, closes the last CRS message.
        Without one, nothing follows the CRS's last turn, so even a base model simply continues
        as the user.
        """
        cap = self.config.max_history_utterances
        if self.config.history_mode == "chat":
            turns = history[-cap:] if cap else history
            block = fill(self.prompt.get("chat_block", "{format}"), variables)
            cue = self.prompt.get("chat_opening_cue", "Hi! What are you looking for today?")
            head = self._heads.get((system, block))
            if head is None:  # the same every turn of a conversation: squeezed once
                head = self._heads[system, block] = Message(role="system", content=squeeze(f"{system}\n\n{block}"))
            messages = [head]
            if not turns or turns[0].participant == USER:
                messages.append(Message(role="user", content=cue))
            messages.extend(self._history_messages(turns))
            if turns and turns[-1].participant == USER:  # the CRS has not answered: continue as the user
                messages.append(Message(role="user", content=cue))
            tail = squeeze(fill(self.prompt.get("chat_turn", ""), variables))
            if tail:
                messages[-1] = Message(role="user", content=f"{messages[-1].content}\n\n{tail}")
            return messages
        rendered = render_history(
            history, self.labels, empty=self.prompt.get("empty_history", "(none)"), max_utterances=cap
        )
        user = squeeze(fill(self.prompt["user"], {**variables, "history": rendered}))
        return [Message(role="system", content=squeeze(system)), Message(role="user", content=user)]

    def style_sections(self) -> dict[str, str]:
        """`style_section` (words, preferences per message, patience) and `patience_section` (patience alone) from
        the prompt's `sections.style` / `sections.patience` and the config's style; empty when style is off."""
        style = self.config.style
        sections = self.prompt.get("sections", {})
        if not style.enabled:
            return {"style_section": "", "patience_section": ""}
        values = style.variables()
        return {
            "style_section": fill(sections.get("style", ""), values).strip(),
            "patience_section": fill(sections.get("patience", ""), values).strip(),
        }

    def rendered_preferences(self) -> str:
        """`render_preferences` of the profile, remembered for the run while the user's preferences are one
        shared, read-only object (a ratings user's, across their conversations: sorting their ~200 slot
        values again for every conversation cost about 0.1 ms). Keyed by the object, never by an equal copy."""
        prefs = self.profile.preferences
        shared = getattr(self.context, "shared", None)
        if not (callable(shared) and isinstance(prefs.slots, ReadOnlyDict) and isinstance(prefs.likes, ReadOnlyList)):
            return render_preferences(prefs)
        memo: dict[int, tuple[Any, str]] = shared("simulator.rendered_preferences", dict)
        known = memo.get(id(prefs))
        if known is not None and known[0] is prefs:
            return known[1]
        text = render_preferences(prefs)
        if len(memo) >= RENDER_MEMO_LIMIT:
            memo.clear()
        memo[id(prefs)] = (prefs, text)  # kept with its text, so its id cannot be reused meanwhile
        return text

    def _history_messages(self, turns: list[Utterance]) -> list[Message]:
        """`history_messages(turns)`, each turn's (frozen) message made once per conversation, not every turn."""
        known = self._turn_messages
        out = []
        for utterance in turns:
            key = (utterance.participant == USER, utterance.text)
            message = known.get(key)
            if message is None:
                message = known[key] = history_messages([utterance])[0]
            out.append(message)
        return out

    def fallback(self, turn: int = 1) -> str:
        """A safe utterance from the prompt data (opening: from the need; later: rotating by turn)."""
        constraints = ", ".join(f"{slot}: {value}" for slot, value in self.profile.need.constraints.items())
        if turn == 0 and constraints and self.prompt.get("opening_fallback"):
            return fill(self.prompt["opening_fallback"], {"constraints": constraints})
        options = self.prompt.get("fallback_utterances") or [
            self.prompt.get("fallback_utterance", "Could you suggest something else?")
        ]
        return str(options[turn % len(options)])

    def user_utterance(self, text: str, **metadata: Any) -> Utterance:
        """A USER utterance with generation metadata."""
        return Utterance(participant=USER, text=text, metadata={k: v for k, v in metadata.items() if v is not None})
