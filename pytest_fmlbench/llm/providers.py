"""Which service answers an LLM call: provider names, endpoints, key variables, inference from model names."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .errors import LLMSetupError

Protocol = Literal["openai", "anthropic", "local"]


@dataclass(frozen=True)
class Provider:
    name: str
    protocol: Protocol
    # None: the SDK's own default endpoint (which also honours OPENAI_BASE_URL / ANTHROPIC_BASE_URL)
    default_base_url: str | None
    key_env: tuple[str, ...]
    key_required: bool
    # True where GET /models/{id} is known to answer; elsewhere the preflight sends a tiny completion
    retrieve_models: bool = False


PROVIDERS: dict[str, Provider] = {
    p.name: p
    for p in (
        Provider("openai", "openai", None, ("OPENAI_API_KEY",), True, retrieve_models=True),
        Provider("anthropic", "anthropic", None, ("ANTHROPIC_API_KEY",), True, retrieve_models=True),
        Provider("google", "openai", "https://generativelanguage.googleapis.com/v1beta/openai/",
                 ("GOOGLE_API_KEY", "GEMINI_API_KEY"), True, retrieve_models=True),
        Provider("openrouter", "openai", "https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY",), True),
        # a user's own server: the key is optional, and never one of the hosted providers' keys, which
        # must not be sent to a third-party address
        Provider("openai-compatible", "openai", None, ("FMLBENCH_LLM_API_KEY",), False),
        Provider("local", "local", None, (), False),
    )
}

# what the embedded model is called when --provider=local is given without --model
LOCAL_DEFAULT_MODEL = "smollm2-135m-instruct"

_OPENAI_MODEL = re.compile(r"^(gpt-|chatgpt-|o[134](-|$))")


@dataclass(frozen=True)
class Endpoint:
    """A resolved provider: everything needed to build a client. ``repr`` never shows the key."""

    provider: Provider
    model: str
    base_url: str | None
    api_key: str | None
    key_source: str | None  # the environment variable the key came from (for messages; never the value)

    def __repr__(self) -> str:
        return (f"Endpoint(provider={self.provider.name!r}, model={self.model!r}, base_url={self.base_url!r}, "
                f"key_source={self.key_source!r})")

    __str__ = __repr__

    @property
    def where(self) -> str:
        return self.base_url or f"the {self.provider.name} API"


def infer_provider(model: str, base_url: str | None = None) -> str:
    """The provider a model name implies; with a custom --base-url, unknown names mean the user's own server."""
    if model.startswith("claude-"):
        return "anthropic"
    if _OPENAI_MODEL.match(model):
        return "openai"
    if base_url:
        return "openai-compatible"
    if model.startswith("gemini-"):
        return "google"
    if "/" in model.strip("/"):
        return "openrouter"
    raise LLMSetupError(
        f"cannot tell the provider of model {model!r}; pass --provider "
        f"({', '.join(PROVIDERS)}) or --base-url for an OpenAI-compatible server"
    )


def resolve(model: str | None, provider: str | None, base_url: str | None,
            env: Mapping[str, str] | None = None) -> Endpoint:
    """Provider, endpoint and key for a model, or one line saying what is missing."""
    env = os.environ if env is None else env
    if provider is not None and provider not in PROVIDERS:
        raise LLMSetupError(f"unknown provider {provider!r}; providers: {', '.join(PROVIDERS)}")
    if not model:
        if provider != "local":
            raise LLMSetupError("no model given: pass --model=MODEL")
        model = LOCAL_DEFAULT_MODEL
    name = provider or infer_provider(model, base_url)
    spec = PROVIDERS[name]
    if name == "openai-compatible" and not base_url:
        raise LLMSetupError("--provider=openai-compatible needs --base-url=http://HOST:PORT/v1")
    if name == "local" and base_url:
        raise LLMSetupError("--base-url does not apply to --provider=local (the model runs in-process)")
    if base_url and not re.match(r"^https?://", base_url):
        raise LLMSetupError(f"--base-url must start with http:// or https://, got {base_url!r}")
    key, source = None, None
    for var in spec.key_env:
        if env.get(var, "").strip():
            key, source = env[var].strip(), var
            break
    if key is None and spec.key_required:
        raise LLMSetupError(
            f"provider {name} needs an API key: set {' or '.join(spec.key_env)} in the environment"
        )
    return Endpoint(spec, model, base_url or spec.default_base_url, key, source)
