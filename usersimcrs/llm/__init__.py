"""One LLM interface for every backend (Ollama, OpenAI-compatible, embedded llama.cpp).

`LLMProvider` hands out one managed LLM per component; every call goes through one call site for
the response cache, retries, concurrency cap, timeout and usage accounting (see docs/llm.md).
"""

from usersimcrs.core.usage import Usage
from usersimcrs.llm.base import LLM, LLMResult, Message
from usersimcrs.llm.config import LLMConfig
from usersimcrs.llm.provider import LLMProvider

__all__ = ["LLM", "LLMConfig", "LLMProvider", "LLMResult", "Message", "Usage"]
