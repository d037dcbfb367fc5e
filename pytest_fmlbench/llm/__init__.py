"""The LLM layer: providers, retries, cost, budgets, replay. Agents see an ``LLMClient`` as ``session.llm``."""

from .backends import Completion, Request
from .client import LLMClient, Reply
from .errors import LLMCallError, LLMSetupError, TransientLLMError
from .factory import build_client, make_llm_factory, preflight
from .pricing import Price, PriceTable
from .providers import PROVIDERS, Endpoint, infer_provider, resolve
from .redact import redact
from .settings import LLMSettings

__all__ = [
    "PROVIDERS", "Completion", "Endpoint", "LLMCallError", "LLMClient", "LLMSettings", "LLMSetupError", "Price",
    "PriceTable", "Reply", "Request", "TransientLLMError", "build_client", "infer_provider", "make_llm_factory",
    "preflight", "redact", "resolve",
]
