"""`http`: any JSON-over-HTTP CRS, described by a request template and JSON paths.

The request body is a JSON template whose strings may hold placeholders: ``{conversation_id}``,
``{message}``, ``{turn}`` inside strings, and a string that is exactly ``"{history}"`` (a list of
``{"role", "text"}``) or ``"{history_texts}"`` (a list of strings) becomes that list.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from crs_connectors.base import CRSReply
from crs_connectors.http_base import HTTPConnectorBase, require_text
from crs_connectors.item_parsing import items_from_text, ref_from_value
from crs_connectors.json_paths import parse_path, select
from crs_connectors.transport import HTTPAnswer, HTTPOptions, Retryable
from crs_connectors.turns import alternating_texts, history_records, prior_turns
from usersimcrs.core.dialogue import Dialogue, ItemRef, Utterance
from usersimcrs.core.json_types import JSON

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext

_PLACEHOLDER = re.compile(r"\{(conversation_id|message|turn)\}")
_LIST_PLACEHOLDERS = ("{history}", "{history_texts}")


class HTTPConfig(HTTPOptions):
    """Options of the generic HTTP connector."""

    method: Literal["POST", "PUT", "GET"] = "POST"
    request_template: JSON = Field(
        default_factory=lambda: {"conversation_id": "{conversation_id}", "message": "{message}"},
        description="JSON body with placeholders",
    )
    text_path: str = Field("text", description="JSON path of the reply text (several matches are joined)")
    items_path: str | None = Field(None, description="JSON path of the recommended items, e.g. 'items[*]'")
    item_id_field: str | None = "id"
    item_title_field: str | None = "title"
    items_from_text: bool = Field(False, description="parse items out of the text when there is no items_path")
    keep_cookies: bool = Field(True, description="keep a cookie jar per conversation")
    join_with: str = "\n"

    @model_validator(mode="after")
    def _check_paths(self) -> HTTPConfig:
        parse_path(self.text_path)
        if self.items_path:
            parse_path(self.items_path)
        return self


def fill_template(template: JSON, values: dict[str, str], lists: dict[str, list[JSON]]) -> JSON:
    """The template with placeholders replaced (recursively through objects and lists)."""
    if isinstance(template, str):
        if template in lists:
            return lists[template]
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if isinstance(template, dict):
        return {key: fill_template(value, values, lists) for key, value in template.items()}
    if isinstance(template, list):
        return [fill_template(value, values, lists) for value in template]
    return template


class HTTPConnector(HTTPConnectorBase):
    """A configurable JSON HTTP CRS."""

    Config = HTTPConfig
    config: HTTPConfig

    def __init__(self, config: HTTPConfig, context: RunContext) -> None:
        super().__init__(config, context)
        self.transport.keep_cookies = config.keep_cookies
        self.turn = 0

    def request_body(self, history: Dialogue, user_utterance: Utterance | None) -> JSON:
        turns = prior_turns(history, user_utterance)
        values = {
            "conversation_id": self.conversation_id or history.conversation_id,
            "message": "" if user_utterance is None else user_utterance.text,
            "turn": str(self.turn),
        }
        lists: dict[str, list[JSON]] = {
            "{history}": history_records(turns),
            "{history_texts}": alternating_texts(turns),
        }
        return fill_template(self.config.request_template, values, lists)

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        body = self.request_body(history, user_utterance)
        self.turn += 1
        method = self.config.method
        payload = await self.transport.call(
            method, self.config.url, self.read_payload, json_body=None if method == "GET" else body
        )
        texts = [t for t in select(payload, self.config.text_path) if isinstance(t, str) and t.strip()]
        text = self.config.join_with.join(t.strip() for t in texts)
        items = self.items_of(payload)
        from_text = False
        if not items and self.config.items_from_text and not self.config.items_path:
            items = items_from_text(text, self.items)
            from_text = True
        return CRSReply(text=text, items=items, raw=payload, items_from_text=from_text)

    def read_payload(self, answer: HTTPAnswer) -> JSON:
        payload = answer.json()
        values = select(payload, self.config.text_path)
        if not values:
            raise Retryable(f"reply without '{self.config.text_path}'")
        if not any(isinstance(v, str) and v.strip() for v in values):
            require_text(values[0] if values else None)
        return payload

    def items_of(self, payload: JSON) -> list[ItemRef]:
        if not self.config.items_path:
            return []
        refs = []
        for value in select(payload, self.config.items_path):
            ref = ref_from_value(
                value, self.items, id_field=self.config.item_id_field, title_field=self.config.item_title_field
            )
            if ref is not None:
                refs.append(ref)
        return refs
