"""`rasa`: a CRS built with Rasa, reached through its REST channel.

``POST /webhooks/rest/webhook`` with ``{"sender": id, "message": text}`` answers a JSON list of bot
messages ``{"recipient_id", "text"?, "buttons"?, "image"?, "custom"?}``. Texts are joined; items
come from ``custom`` payloads (e.g. ``{"items": [{"id": ..., "title": ...}]}``) when the bot sends
them, else from the text (numbered lists, ``Title (Year)``) and, optionally, button titles.

A server started with ``rasa run --auth-token`` checks a ``token`` query parameter: `token_env` names
the environment variable holding it (the token itself never sits in the config, and the run's
secret scrubber masks it wherever a reply or an error would show it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import Field

from crs_connectors.base import CRSReply
from crs_connectors.http_base import HTTPConnectorBase
from crs_connectors.item_parsing import items_from_text, ref_from_value, resolve_titles
from crs_connectors.json_paths import select
from crs_connectors.transport import HTTPAnswer, HTTPOptions, Retryable
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.json_types import JSONObject
from usersimcrs.core.secrets import Secrets
from usersimcrs.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class RasaConfig(HTTPOptions):
    """Options of the Rasa REST connector."""

    url: str = "http://127.0.0.1:5005/webhooks/rest/webhook"
    health_url: str | None = Field(None, description="defaults to the server root, which Rasa answers with its version")
    custom_items_path: str = Field("items[*]", description="JSON path of the item list inside a 'custom' payload")
    item_id_field: str = "id"
    item_title_field: str = "title"
    buttons_are_items: bool = Field(False, description="treat button titles as recommended item titles")
    open_message: str | None = Field(None, description="text sent on open when the CRS speaks first (e.g. '/greet')")
    join_with: str = "\n"
    token_env: str | None = Field(
        None, description="environment variable holding Rasa's auth token (sent as the `token` query parameter)"
    )


def read_messages(answer: HTTPAnswer) -> list[JSONObject]:
    """The list of bot messages; an empty list or no text and no custom payload is a failure."""
    payload = answer.json()
    if not isinstance(payload, list):
        raise Retryable("reply is not a list of bot messages")
    messages = [m for m in payload if isinstance(m, dict)]
    if not any((m.get("text") or "").strip() or m.get("custom") for m in messages):
        raise Retryable("empty reply text")
    return messages


class RasaConnector(HTTPConnectorBase):
    """One Rasa tracker per conversation (the sender ID is the conversation ID)."""

    Config = RasaConfig
    config: RasaConfig

    def __init__(self, config: RasaConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self._url = config.url
        if config.token_env:
            token = os.environ.get(config.token_env)
            if not token:
                raise ConfigError(f"crs.token_env: environment variable {config.token_env} is not set")
            self.transport.secrets = self.transport.secrets + Secrets([token])
            self._url = _with_query(config.url, "token", token)

    def health_url(self) -> str:
        if self.config.health_url:
            return self.config.health_url
        base = self.config.url.split("/webhooks/", 1)[0]
        return base.rstrip("/") + "/"

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        sender = self.conversation_id or history.conversation_id
        text = user_utterance.text if user_utterance is not None else (self.config.open_message or "")
        body = {"sender": sender, "message": text}
        messages = await self.transport.call("POST", self._url, read_messages, json_body=body)
        return self.to_reply(messages)

    def to_reply(self, messages: list[JSONObject]) -> CRSReply:
        texts = [m["text"].strip() for m in messages if isinstance(m.get("text"), str) and m["text"].strip()]
        text = self.config.join_with.join(texts)
        items = self.custom_items(messages)
        from_text = False
        if not items and self.config.buttons_are_items:
            titles = [b.get("title") for m in messages for b in m.get("buttons") or [] if isinstance(b, dict)]
            items = resolve_titles([t for t in titles if t], self.items)
            from_text = bool(items)
        if not items and text:
            items = items_from_text(text, self.items)
            from_text = True
        buttons = [b for m in messages for b in m.get("buttons") or [] if isinstance(b, dict)]
        images = [m["image"] for m in messages if m.get("image")]
        raw = {"messages": messages, "buttons": buttons, "images": images}
        return CRSReply(text=text, items=items, raw=raw, items_from_text=from_text)

    def custom_items(self, messages: list[JSONObject]) -> list[ItemRef]:
        refs: list[ItemRef] = []
        for message in messages:
            custom = message.get("custom")
            if custom is None:
                continue
            for value in select(custom, self.config.custom_items_path):
                ref = ref_from_value(
                    value, self.items, id_field=self.config.item_id_field, title_field=self.config.item_title_field
                )
                if ref is not None:
                    refs.append(ref)
        return refs


def _with_query(url: str, key: str, value: str) -> str:
    """`url` with the query parameter `key` set to `value`."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key] + [(key, value)]
    return urlunsplit(parts._replace(query=urlencode(query)))
