"""`moviebot`: IAI MovieBot v1.0.1 over its HTTP (Messenger-style) interface.

``POST /`` with ``{"entry": [{"messaging": [{"message": {"text": ...}, "sender": {"id": ...}}]}]}``
answers ``{"message": {"intent", "text", "attachment"?}, "recipient": {"id"}}``. The sender ID is the
conversation ID (each is its own session); the text ``/start`` opens a session (its answer is the
bot's welcome) and ``/exit`` closes it, answered by the plain text "Message Processed".
Recommendations appear as ``Do you like: <Title> <rating> <minutes> min``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from crs_connectors.base import CRSReply
from crs_connectors.http_base import HTTPConnectorBase, require_text
from crs_connectors.item_parsing import items_from_text
from crs_connectors.transport import HTTPAnswer, HTTPOptions, Retryable
from usersimcrs.core.dialogue import Dialogue, Utterance
from usersimcrs.core.json_types import JSONObject
from usersimcrs.errors import ConnectorError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class MovieBotConfig(HTTPOptions):
    """Options of the MovieBot connector."""

    url: str = "http://127.0.0.1:5001/"
    start_command: str = "/start"
    exit_command: str = "/exit"
    buttons_in_text: bool = Field(False, description="append the button titles to the reply text")


def messaging_payload(sender: str, text: str) -> JSONObject:
    """The Messenger-style request body MovieBot's server reads."""
    return {"entry": [{"messaging": [{"message": {"text": text}, "sender": {"id": sender}}]}]}


def buttons_of(message: JSONObject) -> list[JSONObject]:
    """Button records from a MovieBot message's ``attachment``/``attachments`` (any of the shapes used)."""
    found: list[JSONObject] = []
    attachments = message.get("attachments", message.get("attachment"))
    if isinstance(attachments, dict):
        attachments = [attachments]
    for attachment in attachments or []:
        if not isinstance(attachment, dict):
            continue
        payload = attachment.get("payload", attachment)
        buttons = payload.get("buttons", []) if isinstance(payload, dict) else []
        found.extend(b for b in buttons if isinstance(b, dict))
    return found


def read_message(answer: HTTPAnswer) -> JSONObject:
    """The ``message`` object of a MovieBot answer, with non-empty text."""
    payload = answer.json()
    message = payload.get("message") if isinstance(payload, dict) else None
    if not isinstance(message, dict):
        raise Retryable("reply without a 'message' object")
    require_text(message.get("text"))
    return payload


class MovieBotConnector(HTTPConnectorBase):
    """One MovieBot session per conversation, opened with /start and closed with /exit."""

    Config = MovieBotConfig
    config: MovieBotConfig

    def __init__(self, config: MovieBotConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.welcome: JSONObject | None = None
        self.started = False

    async def open(self, conversation_id: str) -> None:
        await super().open(conversation_id)
        body = messaging_payload(conversation_id, self.config.start_command)
        self.welcome = await self.transport.call("POST", self.config.url, read_message, json_body=body)
        self.started = True

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        if self.conversation_id is None:
            await self.open(history.conversation_id)
        if user_utterance is None and self.welcome is not None:
            payload, self.welcome = self.welcome, None
            return self.to_reply(payload)
        self.welcome = None
        text = "" if user_utterance is None else user_utterance.text
        body = messaging_payload(self.conversation_id or history.conversation_id, text)
        payload = await self.transport.call("POST", self.config.url, read_message, json_body=body)
        return self.to_reply(payload)

    def to_reply(self, payload: JSONObject) -> CRSReply:
        message = payload["message"]
        text = message["text"]
        buttons = buttons_of(message)
        items = items_from_text(text, self.items, mentions=False)
        if self.config.buttons_in_text and buttons:
            text = f"{text}\n" + "\n".join(f"[{b.get('title', b.get('payload', ''))}]" for b in buttons)
        raw = {**payload, "intent": message.get("intent"), "buttons": buttons}
        return CRSReply(text=text, items=items, raw=raw, items_from_text=True)

    async def close(self) -> None:
        """Send /exit (answered with plain text, not JSON); a failure here does not fail the dialogue."""
        try:
            if self.started and self.conversation_id is not None:
                body = messaging_payload(self.conversation_id, self.config.exit_command)
                await self.transport.call("POST", self.config.url, lambda a: a.text(), json_body=body, retries=0)
        except ConnectorError:
            pass
        finally:
            self.started = False
            await super().close()
