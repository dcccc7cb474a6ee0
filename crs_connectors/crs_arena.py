"""`crs_arena`: a CRS served by the CRS Arena / iEvaLM server (KBRD, BARCOR, UniCRS, ChatGPT).

Wire protocol (one route ``/``): ``POST {"context": [turns, user first], "message": text}`` ->
``{"response": text}``; ``GET /`` answers "Model is running.". The server keeps conversation
state in a signed session cookie, so each conversation has its own cookie jar. Recommendations
exist only in the text ("I would recommend the following items: 1: Title (Year) ..."); they are
parsed out and mapped to the item collection.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from crs_connectors.base import CRSReply
from crs_connectors.http_base import HTTPConnectorBase, require_text
from crs_connectors.item_parsing import items_from_text
from crs_connectors.transport import HTTPAnswer, HTTPOptions, Retryable
from crs_connectors.turns import alternating_texts, prior_turns
from usersimcrs.core.dialogue import Dialogue, Utterance


class CRSArenaConfig(HTTPOptions):
    """Options of the CRS Arena connector (the defaults match a locally started iEvaLM server)."""

    url: str = "http://127.0.0.1:5005/"
    title_mentions: bool = Field(
        True, description="without a list, take 'Title (Year)' mentions found in the collection"
    )


class CRSArenaConnector(HTTPConnectorBase):
    """Talks to one iEvaLM model server; one cookie jar per conversation."""

    Config = CRSArenaConfig
    config: CRSArenaConfig
    keep_cookies: ClassVar[bool] = True

    async def reply(self, history: Dialogue, user_utterance: Utterance | None) -> CRSReply:
        body = {
            "context": alternating_texts(prior_turns(history, user_utterance)),
            "message": "" if user_utterance is None else user_utterance.text,
        }
        payload, text = await self.transport.call("POST", self.config.url, _read_response, json_body=body)
        items = items_from_text(text, self.items, mentions=self.config.title_mentions)
        return CRSReply(text=text, items=items, raw=payload, items_from_text=True)


def _read_response(answer: HTTPAnswer) -> tuple[dict, str]:
    payload = answer.json()
    if not isinstance(payload, dict) or "response" not in payload:
        raise Retryable("reply without a 'response' field")
    return payload, require_text(payload["response"])
