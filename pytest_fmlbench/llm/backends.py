"""Wire protocols: the official openai and anthropic SDKs, each turned into one ``complete`` call.

Both SDKs run with their own retries off: retry, back-off and Retry-After are handled once, in the
client, for every provider alike. SDK exceptions become ``TransientLLMError`` (worth retrying) or
``LLMCallError`` (not), with redacted one-line messages.
"""

from __future__ import annotations

import email.utils
import re
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import LLMCallError, TransientLLMError
from .providers import Endpoint
from .redact import guard_loggers, redact, register_secret
from .sampling import WireSampling, wire_sampling


@dataclass(frozen=True)
class Request:
    messages: tuple[dict[str, str], ...]  # {"role": "system"|"user"|"assistant", "content": str}
    max_output_tokens: int | None  # None: no limit sent (Anthropic, which needs one: the model's maximum)
    temperature: float | None = None
    seed: int | None = None  # the seed asked for; sent where the port sends one (see ``sampling``)
    local_seed: int = 0  # the embedded model's sampling seed, drawn from the request so a run reproduces


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int = 0  # every prompt token, cached ones included
    output_tokens: int = 0
    cached_tokens: int = 0
    tokens_known: bool = True  # False when the server reported no usage
    finish_reason: str | None = None
    # the sampling fields the request carried (temperature, seed, the length limit under its wire name),
    # and what the call asked for that its model family does not send
    sent: dict[str, float | int] = field(default_factory=dict)
    unsent: tuple[str, ...] = ()


# the reasons a reply ends on its length limit: OpenAI-compatible servers, Anthropic
LENGTH_LIMIT_REASONS = frozenset({"length", "max_tokens"})


class Backend(Protocol):
    def complete(self, request: Request) -> Completion: ...

    def check_model(self) -> None: ...


class OpenAIChat:
    """Chat Completions: OpenAI itself, Gemini's and OpenRouter's compatible endpoints, vLLM/llama.cpp/Ollama."""

    def __init__(self, endpoint: Endpoint, timeout_s: float):
        import openai

        self._sdk = openai
        self.endpoint = endpoint
        register_secret(endpoint.api_key)
        kwargs: dict[str, Any] = {}
        if endpoint.base_url:
            kwargs["base_url"] = endpoint.base_url
        # a keyless user server still needs some bearer value: the SDK refuses an empty key
        self.client = openai.OpenAI(api_key=endpoint.api_key or "no-key", timeout=timeout_s, max_retries=0, **kwargs)
        guard_loggers()

    def _sampling(self, request: Request) -> WireSampling:
        return wire_sampling(self.endpoint.model, temperature=request.temperature, seed=request.seed,
                             max_output_tokens=request.max_output_tokens)

    def _params(self, request: Request) -> dict[str, Any]:
        sampling = self._sampling(request)
        messages = [dict(m) for m in request.messages]
        if sampling.system_as_user:
            messages = [{**m, "role": "user"} if m["role"] == "system" else m for m in messages]
        return {"model": self.endpoint.model, "messages": messages, **sampling.params(request.max_output_tokens)}

    def complete(self, request: Request) -> Completion:
        params = self._params(request)
        try:
            resp = self.client.chat.completions.create(**params)
        except self._sdk.APIError as exc:
            raise self._convert(exc) from None
        sent = {k: v for k, v in params.items() if k not in ("model", "messages")}
        unsent = self._sampling(request).unsent
        choice = resp.choices[0] if resp.choices else None
        text = (choice.message.content or "") if choice and choice.message else ""
        finish = choice.finish_reason if choice else None
        usage = resp.usage
        if usage is None:
            return Completion(text, tokens_known=False, finish_reason=finish, sent=sent, unsent=unsent)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        return Completion(text, usage.prompt_tokens or 0, usage.completion_tokens or 0, cached,
                          finish_reason=finish, sent=sent, unsent=unsent)

    def check_model(self) -> None:
        try:
            if self.endpoint.provider.retrieve_models:
                self.client.models.retrieve(self.endpoint.model)
            else:
                # servers without GET /models/{id}: the smallest real request proves key and model
                self.client.chat.completions.create(**self._params(Request(
                    ({"role": "user", "content": "Say OK."},), max_output_tokens=8)))
        except self._sdk.APIError as exc:
            raise self._convert(exc) from None

    def _convert(self, exc: Exception) -> Exception:
        sdk = self._sdk
        name = self.endpoint.provider.name
        if isinstance(exc, sdk.APITimeoutError):
            return TransientLLMError(f"{name}: request timed out")
        if isinstance(exc, sdk.APIConnectionError):
            return TransientLLMError(f"{name}: cannot connect to {self.endpoint.where}: {redact(str(exc))}")
        if isinstance(exc, sdk.APIStatusError):
            return status_error(name, exc.status_code, exc.response.headers, exc.body, str(exc))
        return LLMCallError(f"{name}: {type(exc).__name__}: {redact(str(exc))}")


# when the Models API does not say a model's maximum output: what all Claude 4.x models take (Opus:
# 32,000; Sonnet and Haiku: 64,000)
FALLBACK_MAX_TOKENS = 32000


class AnthropicMessages:
    """Anthropic's native Messages API."""

    def __init__(self, endpoint: Endpoint, timeout_s: float):
        import anthropic

        self._sdk = anthropic
        self.endpoint = endpoint
        register_secret(endpoint.api_key)
        kwargs: dict[str, Any] = {}
        if endpoint.base_url:
            # the SDK appends /v1/messages itself; accept the OpenAI-style .../v1 base users give elsewhere
            kwargs["base_url"] = re.sub(r"/v1/?$", "", endpoint.base_url.rstrip("/"))
        self.client = anthropic.Anthropic(api_key=endpoint.api_key, timeout=timeout_s, max_retries=0, **kwargs)
        self._model_max: int | None = None
        guard_loggers()

    def complete(self, request: Request) -> Completion:
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        messages = [dict(m) for m in request.messages if m["role"] != "system"]
        # the Messages API needs a limit: a call that asks for none gets the model's maximum
        limit = request.max_output_tokens if request.max_output_tokens is not None else self.model_max_tokens()
        params: dict[str, Any] = {"model": self.endpoint.model, "max_tokens": limit, "messages": messages}
        if system:
            params["system"] = system
        sampling = wire_sampling(self.endpoint.model, temperature=request.temperature, seed=request.seed,
                                 max_output_tokens=limit)
        extra: dict[str, Any] = {}
        if sampling.temperature is not None:
            # this SDK's messages.create has no temperature argument; the API still reads the body field,
            # and the port sends its 0.75 to Claude (through OpenRouter, or Anthropic's own API)
            extra["temperature"] = sampling.temperature
        try:
            resp = self.client.messages.create(**params, extra_body=extra or None)
        except self._sdk.APIError as exc:
            raise self._convert(exc) from None
        sent = {"max_tokens": limit, **extra}
        unsent = sampling.unsent  # a seed, asked for: the Messages API has none (nor does the port send one)
        text = "".join(block.text for block in resp.content if getattr(block, "type", "") == "text")
        u = resp.usage
        read = u.cache_read_input_tokens or 0
        # Anthropic counts cache reads and writes apart from input_tokens; ours counts every prompt token
        total_in = (u.input_tokens or 0) + read + (u.cache_creation_input_tokens or 0)
        return Completion(text, total_in, u.output_tokens or 0, read, finish_reason=resp.stop_reason, sent=sent,
                          unsent=unsent)

    def model_max_tokens(self) -> int:
        """The largest ``max_tokens`` the model takes, as the Models API reports it (asked once)."""
        if self._model_max is None:
            try:
                reported = self.client.models.retrieve(self.endpoint.model).max_tokens
            except self._sdk.APIError as exc:
                raise self._convert(exc) from None
            self._model_max = reported or FALLBACK_MAX_TOKENS
        return self._model_max

    def check_model(self) -> None:
        try:
            self.client.models.retrieve(self.endpoint.model)
        except self._sdk.APIError as exc:
            raise self._convert(exc) from None

    def _convert(self, exc: Exception) -> Exception:
        sdk = self._sdk
        if isinstance(exc, sdk.APITimeoutError):
            return TransientLLMError("anthropic: request timed out")
        if isinstance(exc, sdk.APIConnectionError):
            return TransientLLMError(f"anthropic: cannot connect to {self.endpoint.where}: {redact(str(exc))}")
        if isinstance(exc, sdk.APIStatusError):
            return status_error("anthropic", exc.status_code, exc.response.headers, exc.body, str(exc))
        return LLMCallError(f"anthropic: {type(exc).__name__}: {redact(str(exc))}")


def status_error(provider: str, status: int, headers: Any, body: Any, fallback: str) -> Exception:
    """Map an HTTP error answer to retry-or-not, with a one-line message."""
    message, code = _error_fields(body)
    message = redact((message or fallback).replace("\n", " "))[:300]
    line = f"{provider}: HTTP {status}: {message}"
    if status == 429 and code == "insufficient_quota":
        # OpenAI's "out of credit" shares the rate-limit status, but waiting does not help
        return LLMCallError(line, status=status, kind="quota")
    if status in (408, 409, 429) or status >= 500:
        return TransientLLMError(line, retry_after=retry_after_s(headers), status=status)
    if status in (401, 403):
        return LLMCallError(line, status=status, kind="auth")
    lowered = f"{code} {message}".lower()
    # servers word an unknown model as 404, or as a 400 naming the model
    model_unknown = "model" in lowered and any(
        word in lowered for word in ("not found", "does not exist", "invalid", "unknown"))
    if status == 404 or "model_not_found" in lowered or (status == 400 and model_unknown):
        return LLMCallError(line, status=status, kind="model")
    return LLMCallError(line, status=status, kind="request")


def _error_fields(body: Any) -> tuple[str, str]:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            return str(inner.get("message") or ""), str(inner.get("code") or inner.get("type") or "")
        return str(inner), ""
    return (str(body) if body else ""), ""


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait: retry-after-ms, retry-after in seconds, or as an HTTP date."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
