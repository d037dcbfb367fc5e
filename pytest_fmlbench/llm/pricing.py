"""Dollar cost of LLM calls from a maintained price table, which users may extend or override."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..record import Usage
from .errors import LLMSetupError

# dated snapshots and aliases share their family's price: gpt-4.1-2025-04-14, claude-sonnet-4-20250514
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


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
    def __init__(self, prices: dict[str, Price]):
        self.prices = dict(prices)

    @classmethod
    def builtin(cls) -> PriceTable:
        text = resources.files("pytest_fmlbench.llm").joinpath("prices.json").read_text()
        return cls(_TableFile.model_validate_json(text).models)

    @classmethod
    def load(cls, override: Path | None = None) -> PriceTable:
        """The built-in table, with the user's file (JSON or YAML, same shape) laid over it."""
        table = cls.builtin()
        if override is not None:
            table.prices.update(_read_user_table(override))
        return table

    def lookup(self, provider: str, model: str) -> Price | None:
        names = [model]
        if "/" in model:  # openrouter's vendor/model: the vendor's list price
            names.append(model.split("/", 1)[1])
        for name in list(names):
            stripped = _SNAPSHOT_SUFFIX.sub("", name)
            if stripped != name:
                names.append(stripped)
        for name in names:
            for key in (f"{provider}:{name}", name):
                if key in self.prices:
                    return self.prices[key]
        return self.prices.get(f"{provider}:*")

    def usage(self, provider: str, model: str, *, input_tokens: int, output_tokens: int,
              cached_tokens: int = 0, tokens_known: bool = True) -> Usage:
        """One call's usage; ``input_tokens`` counts every prompt token, cached ones included."""
        price = self.lookup(provider, model) if tokens_known else None
        cost = None
        if price is not None:
            cached_rate = price.input if price.cached_input is None else price.cached_input
            uncached = max(0, input_tokens - cached_tokens)
            cost = (uncached * price.input + cached_tokens * cached_rate + output_tokens * price.output) / 1e6
        return Usage(input_tokens=input_tokens, output_tokens=output_tokens, cached_tokens=cached_tokens,
                     calls=1, cost_usd=cost)


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
