"""What a run shares between its conversations (items, ratings, LLMs, HTTP pool, indexes), typed and closed at run end.

It sits above `core` and `llm` and below the plug-ins (simulators, connectors, judges) that use it,
so no plug-in needs to import the engine.
"""

from usersimcrs.runtime.context import LLMSource, RunContext

__all__ = ["LLMSource", "RunContext"]
