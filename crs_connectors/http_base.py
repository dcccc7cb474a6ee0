"""The part every HTTP connector shares: a transport per conversation, health check, clean close."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from crs_connectors.base import CRSConnector
from crs_connectors.transport import HTTPAnswer, HTTPOptions, HTTPTransport, Retryable
from usersimcrs.core.items import ItemCollection
from usersimcrs.core.json_types import JSON
from usersimcrs.errors import ConnectorError

if TYPE_CHECKING:  # pragma: no cover
    from usersimcrs.runtime.context import RunContext


class HTTPConnectorBase(CRSConnector):
    """An HTTP CRS; subclasses define the request and how to read the answer."""

    Config: ClassVar[type[HTTPOptions]] = HTTPOptions
    config: HTTPOptions
    keep_cookies: ClassVar[bool] = False

    def __init__(self, config: HTTPOptions, context: RunContext) -> None:
        super().__init__(config, context)
        self.conversation_id: str | None = None
        self.transport = HTTPTransport(config, context, keep_cookies=self.keep_cookies)

    async def open(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self.transport.reset_session(conversation_id, getattr(self.context, "run_seed", 0))

    async def close(self) -> None:
        await self.transport.aclose()

    def health_url(self) -> str:
        """Where a GET tells whether the CRS is up (the connector's own URL unless configured)."""
        return self.config.health_url or self.config.url

    async def health(self) -> str:
        """GET the health URL; returns the (short) body, raises ConnectorError when down."""

        def read(answer: HTTPAnswer) -> str:
            return answer.text().strip()[:200]

        return await self.transport.call("GET", self.health_url(), read, retries=0)

    @property
    def items(self) -> ItemCollection | None:
        """The run's item collection (None when the run has none)."""
        return getattr(self.context, "items", None)


def require_text(value: JSON) -> str:
    """A non-empty reply text, or a retryable 'empty reply text'."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise Retryable("empty reply text")
    if not isinstance(value, str):
        raise Retryable(f"reply text is {type(value).__name__}, not a string")
    return value


__all__ = ["HTTPConnectorBase", "require_text", "ConnectorError"]
