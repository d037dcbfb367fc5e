"""The user's LLM configuration, as typed settings (built from the command line)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    max_cost_usd: float | None = Field(None, gt=0, description="stop the run once this many dollars are spent")
    max_tokens: int | None = Field(None, gt=0, description="stop the run once this many tokens are used")
    price_table: Path | None = Field(None, description="JSON/YAML prices laid over genai-prices' list prices")
    timeout_s: float = Field(600.0, gt=0, description="per request")
    retries: int = Field(6, ge=0, description="retries after a 429, 5xx, timeout or dropped connection")
    backoff_s: float = Field(1.0, ge=0, description="first back-off; doubles each retry (plus jitter)")
    max_wait_s: float = Field(60.0, ge=0, description="longest single wait, Retry-After included")
