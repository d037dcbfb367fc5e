"""What agents call: ``session.llm.complete(messages)``. Retries, cost, budgets and the replay ledger live here."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import NoReturn

import tenacity

from ..record import Usage
from ..stops import RunStopped
from .backends import LENGTH_LIMIT_REASONS, Backend, Request
from .errors import LLMCallError, TransientLLMError
from .ledger import Ledger, request_key
from .pricing import PriceTable
from .providers import Endpoint
from .settings import LLMSettings

log = logging.getLogger("fmlbench.llm")

_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Reply:
    text: str
    usage: Usage
    finish_reason: str | None = None
    replayed: bool = False  # answered from the run's ledger (a resumed run), not by the provider


class LLMClient:
    def __init__(self, endpoint: Endpoint, backend: Backend, prices: PriceTable, settings: LLMSettings,
                 ledger: Ledger | None = None, *, sleep: Callable[[float], None] = time.sleep):
        self.endpoint = endpoint
        self.backend = backend
        self.prices = prices
        self.settings = settings
        self.ledger = ledger
        self._sleep = sleep
        self._seen: Counter[str] = Counter()
        self._spent = Usage()
        self._sink: Callable[[Usage], None] | None = None
        self._on_failure: Callable[[LLMCallError], None] | None = None
        self.failed_calls = 0  # calls that failed for good (after their retries), replayed ones included
        self.truncated_calls = 0  # replies that ended on their length limit, replayed ones included
        self._on_truncation: Callable[[str], None] | None = None
        self._on_unsent: Callable[[list[str]], None] | None = None
        self._jitter = random.Random()
        # the LLM gateway accounts calls from its own threads, beside the agent's calls
        self._lock = threading.Lock()

    @property
    def provider(self) -> str:
        return self.endpoint.provider.name

    @property
    def model(self) -> str:
        return self.endpoint.model

    @property
    def spent(self) -> Usage:
        """Everything this run's calls cost so far (replayed calls count what they cost when first made)."""
        return self._spent

    def bind_usage(self, sink: Callable[[Usage], None]) -> None:
        """Where each call's usage goes: the session charges it to the next step's record."""
        self._sink = sink

    def bind_failures(self, sink: Callable[[LLMCallError], None]) -> None:
        """Told of each call that fails for good (the run record counts them)."""
        self._on_failure = sink

    def complete(self, messages: Iterable[Mapping[str, str]], *, temperature: float | None = None,
                 max_output_tokens: int | None = 4096, seed: int | None = None, purpose: str = "") -> Reply:
        """One chat completion. Raises RunStopped once a budget is exceeded, LLMCallError if it cannot succeed
        (retries exhausted, or an error not worth retrying); the agent decides what a failed call becomes.

        ``temperature``, ``max_output_tokens`` (None: no limit) and ``seed`` are what the call asks for; the
        request carries them as FML-bench's llm.py would for the model (``sampling``)."""
        self.check_budget()
        request = Request(_normalise(messages), max_output_tokens, temperature, seed)
        key = request_key(self.provider, self.model, request)
        n = self._seen[key]
        self._seen[key] += 1
        cached = self.ledger.lookup(key, n) if self.ledger is not None else None
        if cached is not None and cached.get("error"):
            failure = cached["error"]
            self._failed(LLMCallError(str(failure.get("message", "")), status=failure.get("status"),
                                      kind=str(failure.get("kind", "error"))))
        if cached is not None:
            reply = Reply(cached["text"], Usage.model_validate(cached["usage"]), cached.get("finish_reason"), True)
            unsent = [str(field) for field in cached.get("unsent") or []]
        else:
            started = time.monotonic()
            try:
                # the local model samples; seeding it from the request keeps a run reproducible
                completion = self._with_retries(replace(request, local_seed=int(key[:8], 16) + n))
            except LLMCallError as exc:
                if self.ledger is not None:
                    self.ledger.append_failure(key=key, n=n, provider=self.provider, model=self.model,
                                               purpose=purpose, request=request, message=str(exc), status=exc.status,
                                               kind=exc.kind, latency_s=time.monotonic() - started)
                self._failed(exc)
            usage = self.prices.usage(self.provider, self.model, input_tokens=completion.input_tokens,
                                      output_tokens=completion.output_tokens, cached_tokens=completion.cached_tokens,
                                      tokens_known=completion.tokens_known)
            reply = Reply(completion.text, usage, completion.finish_reason)
            unsent = list(completion.unsent)
            if self.ledger is not None:
                self.ledger.append(key=key, n=n, provider=self.provider, model=self.model, purpose=purpose,
                                   request=request, text=completion.text, usage=usage,
                                   finish_reason=completion.finish_reason, latency_s=time.monotonic() - started,
                                   sent=completion.sent, unsent=completion.unsent)
        if reply.finish_reason in LENGTH_LIMIT_REASONS:
            self._truncated(reply, purpose)
        if unsent and self._on_unsent is not None:
            self._on_unsent(unsent)
        self.account(reply.usage)
        cost = "unknown" if reply.usage.cost_usd is None else f"${reply.usage.cost_usd:.4f}"
        log.debug("llm %s%s: %d in (%d cached) / %d out tokens, %s", purpose or "call",
                  " (replayed)" if reply.replayed else "", reply.usage.input_tokens, reply.usage.cached_tokens,
                  reply.usage.output_tokens, cost)
        return reply

    def bind_truncations(self, sink: Callable[[str], None]) -> None:
        """Told of each reply that ended on its length limit (with the call's purpose)."""
        self._on_truncation = sink

    def bind_unsent(self, sink: Callable[[list[str]], None]) -> None:
        """Told, per call (replayed ones included), of the sampling fields it asked for that its request did
        not carry (the model's family is sent none, or the provider's API has no such field)."""
        self._on_unsent = sink

    def _truncated(self, reply: Reply, purpose: str) -> None:
        with self._lock:
            self.truncated_calls += 1
        log.warning("LLM reply %scut off at its length limit (%d output tokens)",
                    f"for {purpose!r} " if purpose else "", reply.usage.output_tokens)
        if self._on_truncation is not None:
            self._on_truncation(purpose)

    def _failed(self, exc: LLMCallError) -> NoReturn:
        self.failed_calls += 1
        log.warning("LLM call failed for good: %s", exc)
        if self._on_failure is not None:
            self._on_failure(exc)
        raise exc

    def check_model(self) -> None:
        """A cheap request proving the key and the model; retried like any call."""
        self._retrying(self.backend.check_model)

    # -- budgets --------------------------------------------------------------------------------
    def account(self, usage: Usage) -> None:
        """Charge one call made outside ``complete`` (the LLM gateway's): it counts towards the budgets and
        lands on the next step's record, as the agent's own calls do."""
        with self._lock:
            self._spent = self._spent + usage
            if self._sink is not None:
                self._sink(usage)

    def count_spent(self, usage: Usage) -> None:
        """Usage spent before this process, by calls that will not be made again (a resumed coding tool's):
        it counts towards the budgets, and is on its steps' records already."""
        with self._lock:
            self._spent = self._spent + usage

    def check_budget(self) -> None:
        """Raises RunStopped once a budget is exceeded. Checked before each call: the call that crosses a
        limit is used; none is made after it."""
        spent, s = self._spent, self.settings
        if s.max_tokens is not None and spent.total_tokens > s.max_tokens:
            raise RunStopped(f"max-tokens {s.max_tokens} exceeded ({spent.total_tokens} used)")
        if s.max_cost_usd is not None:
            if spent.cost_usd is None:
                raise RunStopped(f"max-cost-usd {s.max_cost_usd:.2f} cannot be enforced: "
                                 f"the price of {self.model} is unknown")
            if spent.cost_usd > s.max_cost_usd:
                raise RunStopped(f"max-cost-usd {s.max_cost_usd:.2f} exceeded ({spent.cost_usd:.4f} spent)")


    # -- retries --------------------------------------------------------------------------------
    def _with_retries(self, request: Request):
        return self._retrying(lambda: self.backend.complete(request))

    def _retrying(self, call):
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(TransientLLMError),
            stop=tenacity.stop_after_attempt(self.settings.retries + 1),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            return retrying(call)
        except TransientLLMError as exc:
            raise LLMCallError(f"{exc} (gave up after {self.settings.retries + 1} attempts)",
                               status=exc.status, kind="unavailable") from None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        s = self.settings
        backoff = min(s.max_wait_s, s.backoff_s * 2 ** (state.attempt_number - 1))
        backoff *= 0.5 + self._jitter.random() / 2  # callers sharing a limit should not retry in lockstep
        exc = state.outcome.exception() if state.outcome else None
        asked = getattr(exc, "retry_after", None)
        return backoff if asked is None else max(backoff, min(asked, s.max_wait_s))

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        log.warning("%s (attempt %d of %d); retrying in %.2fs", exc, state.attempt_number,
                    self.settings.retries + 1, state.next_action.sleep if state.next_action else 0.0)


def _normalise(messages: Iterable[Mapping[str, str]]) -> tuple[dict[str, str], ...]:
    out = []
    for m in messages:
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES or not isinstance(content, str):
            raise ValueError(f"a message needs role in {_ROLES} and string content, got {dict(m)!r:.80}")
        out.append({"role": role, "content": content})
    if not out:
        raise ValueError("no messages")
    return tuple(out)
