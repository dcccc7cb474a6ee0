"""A simulated user written as one Python function (the public API's `simulator=`).

The function gets the dialogue so far (empty for the opening turn) and returns the user's next
text, an `Utterance`, a `Stop`, or None to end the conversation. It may be async or plain; a plain
one runs in a worker thread so it does not hold up other conversations.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any, Callable

from usersimcrs.core.dialogue import USER, Dialogue, Utterance
from usersimcrs.core.profile import UserProfile
from usersimcrs.simulators.base import SimulatorConfig, Stop, UserSimulator

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

UserFunction = Callable[[Dialogue], Any]


class FunctionSimulator(UserSimulator):
    """Wraps a user function; `end_reason` is `user_stop` when it returns None."""

    def __init__(
        self, config: SimulatorConfig, context: RunContext, profile: UserProfile, seed: int, function: UserFunction
    ) -> None:
        super().__init__(config, context, profile, seed)
        self.function = function

    async def start(self) -> Utterance | None:
        turn = await self._call(Dialogue(conversation_id=""))
        return turn if isinstance(turn, Utterance) else None

    async def respond(self, dialogue: Dialogue) -> Utterance | Stop:
        return await self._call(dialogue)

    async def _call(self, dialogue: Dialogue) -> Utterance | Stop:
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(dialogue)
        else:
            result = await asyncio.to_thread(self.function, dialogue)
            if inspect.isawaitable(result):
                result = await result
        return as_turn(result)


def as_turn(result: Any) -> Utterance | Stop:
    """What a user function returned, as the simulator seam wants it."""
    if isinstance(result, (Utterance, Stop)):
        return result
    if result is None:
        return Stop(reason="user_stop")
    if isinstance(result, str):
        return Utterance(participant=USER, text=result)
    raise TypeError(f"user function returned {type(result).__name__}; expected str, Utterance, Stop or None")
