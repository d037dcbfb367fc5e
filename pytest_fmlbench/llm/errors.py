"""The LLM layer's exceptions. Every message is one line and carries no secret."""

from __future__ import annotations


class LLMSetupError(ValueError):
    """The LLM configuration cannot work (unknown provider, missing key, rejected model): fix and re-run."""


class LLMCallError(RuntimeError):
    """A call failed for good: a non-retryable answer, or retries exhausted."""

    def __init__(self, message: str, *, status: int | None = None, kind: str = "error"):
        super().__init__(message)
        self.status = status
        # 'auth', 'model', 'quota', 'request', 'unavailable' - lets the preflight word its one line
        self.kind = kind


class TransientLLMError(RuntimeError):
    """Worth retrying: rate limit, server error, timeout, dropped connection."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status
