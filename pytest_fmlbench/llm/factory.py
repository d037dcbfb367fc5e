"""Building clients from settings, and the preflight that turns a bad setup into one line before any task runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ..record import RunRecord
from .backends import AnthropicMessages, Backend, OpenAIChat
from .client import LLMClient
from .errors import LLMCallError, LLMSetupError
from .ledger import LEDGER_FILE, Ledger
from .pricing import PriceTable
from .providers import Endpoint, resolve
from .settings import LLMSettings


def build_backend(endpoint: Endpoint, settings: LLMSettings) -> Backend:
    protocol = endpoint.provider.protocol
    if protocol == "anthropic":
        return AnthropicMessages(endpoint, settings.timeout_s)
    if protocol == "local":
        from .local import LocalModel  # torch and transformers load only for offline runs

        return LocalModel(endpoint)
    return OpenAIChat(endpoint, settings.timeout_s)


def build_client(settings: LLMSettings, run_dir: Path | None = None,
                 env: Mapping[str, str] | None = None) -> LLMClient:
    """A client for one run; with ``run_dir`` its calls are logged there and replayed on resume."""
    endpoint = resolve(settings.model, settings.provider, settings.base_url, env)
    ledger = Ledger(run_dir / LEDGER_FILE) if run_dir is not None else None
    return LLMClient(endpoint, build_backend(endpoint, settings), PriceTable.load(settings.price_table),
                     settings, ledger)


def make_llm_factory(settings: LLMSettings) -> Callable[[RunRecord, Path], LLMClient]:
    """What the runner calls once per run (in whichever process runs it, xdist workers included)."""

    def factory(record: RunRecord, run_dir: Path) -> LLMClient:
        client = build_client(settings, run_dir)
        # the record counts the calls that failed for good; it is saved with the next step
        client.bind_failures(lambda exc: setattr(record, "llm_failed_calls", record.llm_failed_calls + 1))
        client.bind_truncations(
            lambda purpose: setattr(record, "llm_truncated_calls", record.llm_truncated_calls + 1))

        def count_unsent(fields: list[str]) -> None:
            for field in fields:
                record.llm_unsent[field] = record.llm_unsent.get(field, 0) + 1

        client.bind_unsent(count_unsent)
        return client

    return factory


def preflight(settings: LLMSettings, env: Mapping[str, str] | None = None, *, contact: bool = True) -> Endpoint:
    """Resolve provider and key, load prices, and (``contact``) ask the provider about the model.

    Raises LLMSetupError with one line: what is wrong and what to do.
    """
    endpoint = resolve(settings.model, settings.provider, settings.base_url, env)
    prices = PriceTable.load(settings.price_table)
    name = endpoint.provider.name
    if settings.max_cost_usd is not None and prices.lookup(name, endpoint.model) is None:
        raise LLMSetupError(
            f"--max-cost-usd needs the price of {endpoint.model!r} ({name}), which the price table lacks; "
            "give it with --price-table FILE"
        )
    if not contact:
        return endpoint
    client = LLMClient(endpoint, build_backend(endpoint, settings), prices, settings)
    try:
        client.check_model()
    except LLMCallError as exc:
        raise LLMSetupError(_preflight_line(endpoint, exc)) from None
    return endpoint


def _preflight_line(endpoint: Endpoint, exc: LLMCallError) -> str:
    name, model = endpoint.provider.name, endpoint.model
    if exc.kind == "auth":
        return f"provider {name} rejected the API key from {endpoint.key_source or '(no key)'}: {exc}"
    if exc.kind == "model":
        return f"model {model!r} rejected by provider {name}: {exc}"
    if exc.kind == "quota":
        return f"provider {name}: the account has no quota left: {exc}"
    if exc.kind == "unavailable":
        return f"provider {name} at {endpoint.where} is not answering: {exc}"
    return f"provider {name} refused a check of model {model!r}: {exc}"
