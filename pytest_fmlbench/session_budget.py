"""One LLM budget for a whole session (``--session-max-cost-usd``, ``--session-max-tokens``).

``--max-cost-usd`` and ``--max-tokens`` stop one run; these cap everything a session spends, whichever
process spends it: the controller, every xdist worker and every Slurm job charge one ledger file under the
output folder (which Slurm nodes share), under a file lock. The controller writes the ledger afresh, with
the caps, when the session starts (a later session starts from nothing: a rerun with a higher cap resumes
the stopped runs); workers and jobs only charge and read it.

Once a cap is reached a running item's next LLM call raises RunStopped (status ``stopped``, the reason
recorded, its steps kept); an item that has not started is not run (skipped with one line).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .stops import RunStopped

LEDGER_NAME = "session_budget.json"
NOT_RUN = "not run: the session's budget is spent"


class SessionCaps(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max_cost_usd: float | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)

    @property
    def given(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None


class Spent(BaseModel):
    """The ledger file: the caps and what the session spent so far (calls made now, not replayed ones)."""

    caps: SessionCaps
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0  # calls whose price is unknown: a dollar cap cannot be enforced past them
    calls: int = 0


class SessionLedger:
    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / LEDGER_NAME
        self.lock = FileLock(str(self.path) + ".lock")

    def start(self, caps: SessionCaps) -> None:
        """The session's first moment (its controller only): a fresh ledger with these caps, or none."""
        if not caps.given:
            self.path.unlink(missing_ok=True)  # a cap of an earlier session must not hold this one
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            self._write(Spent(caps=caps))

    def read(self) -> Spent | None:
        try:
            return Spent.model_validate_json(self.path.read_text())
        except (OSError, ValueError, ValidationError):
            return None

    def charge(self, usage: Any) -> None:
        """One call's usage (a record.Usage), charged to the session."""
        with self.lock:
            spent = self.read()
            if spent is None:
                return
            cost = usage.cost_usd
            self._write(spent.model_copy(update={
                "tokens": spent.tokens + usage.total_tokens, "calls": spent.calls + 1,
                "cost_usd": spent.cost_usd + (cost or 0.0),
                "unpriced_calls": spent.unpriced_calls + (cost is None)}))

    def exceeded(self) -> str | None:
        """Why no further LLM call may be made in this session; None while the caps allow it."""
        spent = self.read()
        if spent is None:
            return None
        caps = spent.caps
        if caps.max_tokens is not None and spent.tokens > caps.max_tokens:
            return f"session-max-tokens {caps.max_tokens} reached ({spent.tokens} used across the session)"
        if caps.max_cost_usd is not None:
            if spent.unpriced_calls:
                return (f"session-max-cost-usd {caps.max_cost_usd:.2f} cannot be enforced: "
                        f"{spent.unpriced_calls} call(s) of the session have no known price")
            if spent.cost_usd > caps.max_cost_usd:
                return (f"session-max-cost-usd {caps.max_cost_usd:.2f} reached ({spent.cost_usd:.4f} spent "
                        "across the session)")
        return None

    def check(self) -> None:
        reason = self.exceeded()
        if reason is not None:
            raise RunStopped(reason)

    def _write(self, spent: Spent) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(spent.model_dump_json())
        os.replace(tmp, self.path)


def caps_from(getoption: Callable[[str], Any]) -> SessionCaps:
    """The caps from the command line; raises ValueError (pydantic's) on a bad value."""
    return SessionCaps(max_cost_usd=getoption("session_max_cost_usd"), max_tokens=getoption("session_max_tokens"))


def budget_keys(caps: SessionCaps) -> dict[str, float | int]:
    """What the run record's ``budget`` adds for the session caps: a run they stopped is resumed, not
    reused, by a session with other caps (as a raised --max-cost-usd does)."""
    return {key: value for key, value in (("session_max_cost_usd", caps.max_cost_usd),
                                          ("session_max_tokens", caps.max_tokens)) if value is not None}


def guarded(factory: Callable[..., Any], out_dir: Path) -> Callable[..., Any]:
    """The runner's LLM client factory, its clients charging the session's ledger and stopped by it."""

    def build(*args: Any, **kwargs: Any) -> Any:
        client = factory(*args, **kwargs)
        ledger = SessionLedger(out_dir)
        if ledger.read() is not None:
            _charge_session(client, ledger)
        return client

    return build


def _charge_session(client: Any, ledger: SessionLedger) -> None:
    """Wrap the client's two budget points: ``check_budget`` (before each call, the agent's and the LLM
    gateway's) and the usage of each call made now. A replayed reply (a resumed run's) cost nothing this
    session: ``complete`` charges only fresh ones, and ``account`` only the gateway's, made outside it."""
    own_check, own_complete, own_account = client.check_budget, client.complete, client.account
    inside = threading.local()

    def check_budget() -> None:
        own_check()
        ledger.check()

    def complete(*args: Any, **kwargs: Any) -> Any:
        inside.active = True
        try:
            reply = own_complete(*args, **kwargs)
        finally:
            inside.active = False
        if not reply.replayed:
            ledger.charge(reply.usage)
        return reply

    def account(usage: Any) -> None:
        own_account(usage)
        if not getattr(inside, "active", False):
            ledger.charge(usage)

    client.check_budget, client.complete, client.account = check_budget, complete, account


def refusal(out_dir: Path, run_is_final: Callable[[], bool]) -> str | None:
    """The one line for an item that would start a run while the session's budget is spent; None when it
    may run (no cap, budget left, or its run is final and only collected from its record)."""
    reason = SessionLedger(out_dir).exceeded()
    if reason is None or run_is_final():
        return None
    return f"{NOT_RUN} ({reason})"


def run_is_final(settings: Any, task: Any, seed: int) -> bool:
    """Whether the runner would only collect this run from its record (the rule of runner.execute)."""
    from .record import RunStore
    from .runner import FINAL_STATUSES, run_dir_for

    store = RunStore(run_dir_for(settings, task, seed)[1])
    try:
        record = store.load() if store.exists() else None
    except Exception:
        return False
    if record is None or record.status not in FINAL_STATUSES or settings.fresh:
        return False
    return not (record.status == "stopped" and record.budget != settings.budget)


def summary(out_dir: Path) -> dict[str, Any] | None:
    """The ledger as plain values, for the session summary; None without session caps."""
    spent = SessionLedger(out_dir).read()
    return json.loads(spent.model_dump_json()) if spent is not None else None
