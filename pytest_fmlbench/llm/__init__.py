"""The LLM layer: providers, retries, cost, budgets, replay. Agents see an ``LLMClient`` as ``session.llm``.

An agent asks::

    reply = session.llm.complete([{"role": "system", "content": ...}, {"role": "user", "content": ...}],
                                 temperature=0.5, max_output_tokens=8192, seed=0, purpose="draft")
    reply.text, reply.usage, reply.finish_reason, reply.replayed

Each call's usage (input, output and cached tokens, dollar cost or None when the price is unknown) is
charged to the session, which records it on the next step. Rate limits, server errors, timeouts and
dropped connections are retried with back-off (Retry-After honoured). Once ``--max-cost-usd`` or
``--max-tokens`` is exceeded, the next call raises ``RunStopped`` and the run ends as 'stopped'. Every
call is appended to ``llm_calls.jsonl`` in the run directory; a resumed run is answered from it.

Modules: ``providers`` (names, endpoints, keys), ``backends`` (the openai/anthropic SDKs), ``sampling`` (which
temperature, seed and length limit a request carries, per model family, as FML-bench's llm.py), ``local`` (the
embedded GGUF model), ``pricing`` (genai-prices' list prices under the user's ``--price-table``), ``ledger`` (call log and replay), ``client``
(retries, budgets), ``factory`` (building clients, the preflight), ``redact`` (keys out of all output),
``gateway`` (a coding tool's model calls, from inside its sandbox, metered by the run's client; imported
where used, as it loads the HTTP client).
"""

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
