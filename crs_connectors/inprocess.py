"""In-process CRSs: any importable class or callable (`python`), and DialogueKit agents.

`python` accepts, by dotted path (``package.module:Name`` or ``package.module.Name``):

- a class with ``reply(history, user_utterance)`` (and optional ``open(conversation_id)`` and
  ``close()``), built once per conversation with ``options`` as keyword arguments;
- a function ``f(history, user_utterance)`` or ``f(text)``.

Methods may be ``async`` or plain; plain ones run in a worker thread (``asyncio.to_thread``) so a
slow model does not block other conversations. A reply may be a `CRSReply`, a dict with ``text``
and ``items``, a ``(text, items)`` pair, or a plain string; items may be `ItemRef`s, dicts with
``id``/``title``, or strings (an ID the collection knows, else a title).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Callable

from pydantic import Field

from crs_connectors.base import ConnectorConfig, CRSConnector, CRSReply
from crs_connectors.item_parsing import items_from_text, ref_from_value
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.items import ItemCollection
from usersimcrs.errors import ConfigError, ConnectorError
from usersimcrs.registry import _import_dotted

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class PythonConfig(ConnectorConfig):
    """Options of the in-process connector."""

    target: str = Field(description="dotted path of a class or callable implementing the CRS")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments for the class")
    items_from_text: bool = Field(False, description="parse items out of the text when the reply has none")


async def call_maybe_async(function: Callable[..., Any], *args: Any) -> Any:
    """Await a coroutine function; run a plain one in a worker thread."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        return await result
    return result


def to_reply(result: Any, items_collection: ItemCollection | None, *, parse_text: bool) -> CRSReply:
    """Normalise what an in-process CRS returned into a CRSReply."""
    if isinstance(result, CRSReply):
        return result
    text: Any
    raw_items: Any = None
    raw: Any = None
    if isinstance(result, str):
        text = result
    elif isinstance(result, tuple) and len(result) == 2:
        text, raw_items = result
    elif isinstance(result, dict):
        text, raw_items, raw = result.get("text"), result.get("items"), result.get("raw")
    else:
        raise ConnectorError(
            f"in-process CRS returned {type(result).__name__}; expected text, (text, items), dict or CRSReply"
        )
    if not isinstance(text, str):
        raise ConnectorError("in-process CRS reply has no text")
    refs: list[ItemRef] = []
    for value in raw_items or []:
        if isinstance(value, ItemRef):
            refs.append(value)
            continue
        ref = ref_from_value(value, items_collection, id_field="id", title_field="title")
        if ref is not None:
            refs.append(ref)
    from_text = False
    if not refs and parse_text:
        refs, from_text = items_from_text(text, items_collection), True
    return CRSReply(text=text, items=refs, raw=raw, items_from_text=from_text)


class InProcessConnector(CRSConnector):
    """Calls a CRS model or function living in this process; subclasses say where it comes from."""

    model: Any
    function: Callable[..., Any]
    arity: int
    items_from_text: bool = False

    async def open(self, conversation_id: str) -> None:
        hook = getattr(self.model, "open", None)
        if callable(hook):
            await call_maybe_async(hook, conversation_id)

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        if self.arity == 1:
            args: tuple[Any, ...] = ("" if user_utterance is None else user_utterance.text,)
        else:
            args = (history, user_utterance)
        try:
            result = await call_maybe_async(self.function, *args)
        except ConnectorError:
            raise
        except Exception as exc:  # noqa: BLE001 - the CRS's own failure is recorded on the conversation
            raise ConnectorError(f"in-process CRS raised {type(exc).__name__}: {exc}") from exc
        return to_reply(result, getattr(self.context, "items", None), parse_text=self.items_from_text)

    async def close(self) -> None:
        hook = getattr(self.model, "close", None)
        if callable(hook):
            await call_maybe_async(hook)


def bind_target(target: Any, label: str, options: dict[str, Any] | None = None) -> tuple[Any, Callable[..., Any], int]:
    """(model, reply function, arity) for a CRS given as a class (built here), an object with `reply`, or a function."""
    if inspect.isclass(target):
        if not callable(getattr(target, "reply", None)):
            raise ConfigError(f"crs.target: {label} has no reply(history, user_utterance) method")
        try:
            model: Any = target(**(options or {}))
        except TypeError as exc:
            raise ConfigError(f"crs.options: cannot build {label}: {exc}") from None
        return model, model.reply, 2
    if callable(getattr(target, "reply", None)):
        if options:
            raise ConfigError(f"crs.options: {label} is an object already built; options apply to classes only")
        return target, target.reply, 2
    if callable(target):
        if options:
            raise ConfigError(f"crs.options: {label} is a function; options apply to classes only")
        return None, target, _positional_arity(target)
    raise ConfigError(f"crs.target: {label} is neither a class, an object with reply() nor a callable")


class ObjectConfig(ConnectorConfig):
    """Options of a CRS handed over as a Python object (the public API's `crs=`); `type` names it."""

    items_from_text: bool = Field(False, description="parse items out of the text when the reply has none")


class PythonConnector(InProcessConnector):
    """Runs a CRS class, object or function named by a dotted path inside the simulation process."""

    Config = PythonConfig
    config: PythonConfig

    def __init__(self, config: PythonConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.model, self.function, self.arity = bind_target(
            _import_dotted(config.target), config.target, config.options
        )
        self.items_from_text = config.items_from_text


class ObjectConnector(InProcessConnector):
    """A CRS object, class or function given directly (not by dotted path), e.g. from a notebook.

    A class is built once per conversation; an object is shared by every conversation of the run
    (it must keep its per-conversation state itself); a function is called per turn.
    """

    Config = ObjectConfig
    config: ObjectConfig

    def __init__(self, config: ObjectConfig, context: RunContext, target: Any) -> None:
        super().__init__(config, context)
        self.model, self.function, self.arity = bind_target(target, config.type)
        self.items_from_text = config.items_from_text


def _positional_arity(function: Callable[..., Any]) -> int:
    """1 for ``f(text)``, 2 for ``f(history, user_utterance)``."""
    try:
        parameters = [
            p
            for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        return 2
    return 1 if len(parameters) == 1 else 2


# --------------------------------------------------------------------------- DialogueKit agents


class DialogueKitAgentConfig(ConnectorConfig):
    """Options of the DialogueKit agent adapter."""

    agent: str = Field(description="dotted path of a dialoguekit.participant.agent.Agent subclass")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments besides the agent ID")
    items_from_text: bool = True


class _CapturingConnector:
    """Stands in for DialogueKit's DialogueConnector: collects what the agent says."""

    def __init__(self) -> None:
        self.said: list[Any] = []

    def register_agent_utterance(self, annotated_utterance: Any) -> None:
        self.said.append(annotated_utterance)

    def register_user_utterance(self, annotated_utterance: Any) -> None:  # pragma: no cover - unused
        pass

    def register_user_feedback(self, *args: Any, **kwargs: Any) -> None:  # pragma: no cover - unused
        pass

    def take(self) -> list[Any]:
        said, self.said = self.said, []
        return said


class DialogueKitAgentConnector(CRSConnector):
    """Wraps a DialogueKit 0.1.1 `Agent`: welcome() on open, receive_utterance() per turn, goodbye() on close."""

    Config = DialogueKitAgentConfig
    config: DialogueKitAgentConfig

    def __init__(self, config: DialogueKitAgentConfig, context: RunContext) -> None:
        super().__init__(config, context)
        from dialoguekit.participant.agent import Agent

        self.agent_class = _import_dotted(config.agent)
        if not (inspect.isclass(self.agent_class) and issubclass(self.agent_class, Agent)):
            raise ConfigError(f"crs.agent: {config.agent} is not a DialogueKit Agent subclass")
        self.agent: Any = None
        self.capture = _CapturingConnector()
        self.welcome_said: list[Any] = []

    async def open(self, conversation_id: str) -> None:
        try:
            self.agent = self.agent_class(conversation_id, **self.config.options)
        except TypeError as exc:
            raise ConfigError(f"crs.options: cannot build {self.config.agent}: {exc}") from None
        self.agent.connect_dialogue_connector(self.capture)
        await self._run(self.agent.welcome)
        self.welcome_said = self.capture.take()

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        if self.agent is None:
            await self.open(history.conversation_id)
        if user_utterance is None:
            said, self.welcome_said = self.welcome_said, []
        else:
            from dialoguekit.core.annotated_utterance import AnnotatedUtterance
            from dialoguekit.participant.participant import DialogueParticipant

            self.welcome_said = []
            turn = AnnotatedUtterance(
                text=user_utterance.text,
                participant=DialogueParticipant.USER,
                utterance_id=user_utterance.utterance_id,
            )
            await self._run(self.agent.receive_utterance, turn)
            said = self.capture.take()
        return self._to_reply(said)

    def _to_reply(self, said: list[Any]) -> CRSReply:
        text = "\n".join(u.text for u in said if getattr(u, "text", None))
        intents = [str(i) for u in said for i in (u.get_intents() if hasattr(u, "get_intents") else [])]
        items = items_from_text(text, getattr(self.context, "items", None)) if self.config.items_from_text else []
        return CRSReply(text=text, items=items, raw={"intents": intents}, items_from_text=self.config.items_from_text)

    async def close(self) -> None:
        if self.agent is not None:
            try:
                await self._run(self.agent.goodbye)
            except ConnectorError:
                pass
            self.capture.take()
            self.agent = None

    @staticmethod
    async def _run(method: Callable[..., Any], *args: Any) -> None:
        try:
            await call_maybe_async(method, *args)
        except Exception as exc:  # noqa: BLE001
            raise ConnectorError(f"DialogueKit agent raised {type(exc).__name__}: {exc}") from exc


__all__ = ["PythonConnector", "DialogueKitAgentConnector"]
