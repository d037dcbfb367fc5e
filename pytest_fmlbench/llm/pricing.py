"""Dollar cost of LLM calls: providers' list prices from ``genai-prices``, with the user's table laid over them.

``genai-prices`` (pydantic's maintained price data) ships its price snapshot inside the wheel; we only read
that bundled snapshot and never start its auto-updater, so pricing needs no network and a pinned version
prices the same call the same way. Long-context tiers and prompt-cache reads are priced as it defines them.
A model neither the user's table nor genai-prices knows costs ``None`` ("unknown"), never 0.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..record import Usage
from .errors import LLMSetupError

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo

# dated snapshots and aliases share their family's price: gpt-4.1-2025-04-14, claude-sonnet-4-20250514
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
# our provider names -> genai-prices' provider ids. A user's own server (openai-compatible) has no list
# price: whatever model name it serves, its cost is unknown unless --price-table gives one.
_GENAI_PROVIDER = {"openai": "openai", "anthropic": "anthropic", "google": "google", "openrouter": "openrouter"}
# the embedded offline model runs on this machine: no provider bills it
_FREE_PROVIDERS = {"local"}


class Price(BaseModel):
    """USD per 1M tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    # absent: cached prompt tokens are charged as ordinary input (never cheaper than we know)
    cached_input: float | None = Field(None, ge=0)


class _TableFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    about: str = ""
    models: dict[str, Price]


class PriceTable:
    """The user's prices (``--price-table``) first, then genai-prices' bundled list prices."""

    def __init__(self, overrides: dict[str, Price] | None = None):
        self.overrides = dict(overrides or {})

    @classmethod
    def builtin(cls) -> PriceTable:
        return cls()

    @classmethod
    def load(cls, override: Path | None = None) -> PriceTable:
        """genai-prices' list prices, with the user's file (JSON or YAML) laid over them."""
        return cls(_read_user_table(override) if override is not None else {})

    def lookup(self, provider: str, model: str) -> Price | None:
        """The standard-tier price per 1M tokens, or None when no source prices the model."""
        fixed = self._fixed(provider, model)
        if fixed is not None:
            return fixed
        prices = self._listed_prices(provider, model)
        if prices is None:
            return None
        cached = prices.cache_read_mtok
        return Price(input=_base(prices.input_mtok), output=_base(prices.output_mtok),
                     cached_input=None if cached is None else _base(cached))

    def usage(self, provider: str, model: str, *, input_tokens: int, output_tokens: int,
              cached_tokens: int = 0, tokens_known: bool = True) -> Usage:
        """One call's usage; ``input_tokens`` counts every prompt token, cached ones included."""
        cost = self._cost(provider, model, input_tokens, output_tokens, cached_tokens) if tokens_known else None
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached_tokens,
                     calls=1, cost_usd=cost)

    # -- internals ---------------------------------------------------------------------------------
    def _cost(self, provider: str, model: str, input_tokens: int, output_tokens: int, cached_tokens: int) -> float | None:
        price = self._fixed(provider, model)
        if price is not None:
            cached_rate = price.input if price.cached_input is None else price.cached_input
            uncached = max(0, input_tokens - cached_tokens)
            return (uncached * price.input + cached_tokens * cached_rate + output_tokens * price.output) / 1e6
        listed = self._listed_prices(provider, model)
        if listed is None:
            return None
        if listed.cache_read_mtok is None and cached_tokens:
            # no cache-read price listed: cached tokens cost as ordinary input, never less than we know
            cached_tokens = 0
        from genai_prices import Usage as PricedUsage

        calc = listed.calc_price(PricedUsage(input_tokens=input_tokens, cache_read_tokens=cached_tokens,
                                               output_tokens=output_tokens))
        return float(calc["total_price"])

    def _fixed(self, provider: str, model: str) -> Price | None:
        """A price that needs no list: the user's override, else free for the offline model."""
        override = self._override(provider, model)
        if override is None and provider in _FREE_PROVIDERS:
            return Price(input=0.0, cached_input=0.0, output=0.0)
        return override

    def _listed_prices(self, provider: str, model: str):
        """Today's list prices when genai-prices prices both input and output, else None."""
        info = self._listed(provider, model)
        if info is None:
            return None
        prices = info.get_prices(datetime.now(timezone.utc))
        if prices.input_mtok is None or prices.output_mtok is None:
            return None
        return prices

    def _override(self, provider: str, model: str) -> Price | None:
        for name in _names(model):
            for key in (f"{provider}:{name}", name):
                if key in self.overrides:
                    return self.overrides[key]
        return self.overrides.get(f"{provider}:*")

    @staticmethod
    def _listed(provider: str, model: str) -> ModelInfo | None:
        provider_id = _GENAI_PROVIDER.get(provider)
        if provider_id is None:
            return None
        # imported (and its price data read, ~0.7 s) only when a hosted model is priced
        from genai_prices import data_snapshot

        snapshot = data_snapshot.get_snapshot()
        refs = [(provider_id, model)]
        if provider == "openrouter" and "/" in model:  # openrouter's vendor/model: else the vendor's list price
            vendor, name = model.split("/", 1)
            refs.append((vendor, name))
        for pid, ref in refs:
            try:
                return snapshot.find_provider_model(ref, None, pid, None)[1]
            except LookupError:
                continue
        return None


def _names(model: str) -> list[str]:
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in list(names):
        stripped = _SNAPSHOT_SUFFIX.sub("", name)
        if stripped != name:
            names.append(stripped)
    return names


def _base(price) -> float:
    """A flat price, or the first tier of a tiered one (e.g. prompts up to 200k tokens)."""
    return float(price if isinstance(price, Decimal) else price.base)


def _read_user_table(path: Path) -> dict[str, Price]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise LLMSetupError(f"--price-table {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LLMSetupError(f"--price-table {path}: not valid JSON/YAML: {first}") from None
    if isinstance(data, dict) and "models" not in data:
        data = {"models": data}  # a bare {model: price} mapping is accepted too
    try:
        return _TableFile.model_validate(data).models
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        raise LLMSetupError(f"--price-table {path}: {where}: {err['msg']}") from None
