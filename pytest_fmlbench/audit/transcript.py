"""A run's LLM calls (``llm_calls.jsonl``), each assigned to the step it was charged to.

The ledger does not name steps; the step records say when each validation run started. An agent's
calls happen between runs (an agent waits for its step), so a call belongs to the first step that
started after the call ended: the step whose record its usage was charged to. Calls after the last
step's start (a last analysis, a call that crossed a budget) belong to no step (``None``). A coding
tool's calls come through the gateway while the tool works; the same rule charges them to the step the
tool ran next, as the run's usage does.

Messages are kept as ``(role, text)``; a gateway call's request (the tool's own API body) is read for
its system prompt and messages in whichever of the three APIs' shapes it has.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..llm.ledger import LEDGER_FILE
from ..record import StepRecord, Usage


@dataclass(frozen=True)
class Call:
    index: int  # its place in the ledger, 1-based
    purpose: str
    at: datetime | None
    messages: tuple[tuple[str, str], ...]
    reply: str
    usage: Usage
    error: str = ""
    via: str = ""  # "gateway" for a coding tool's call
    tool_calls: str = ""  # a gateway reply's tool calls, as JSON text


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "content", "output", "arguments"):
            if key in value:
                return _text(value[key])
        return json.dumps(value, ensure_ascii=False)[:2000]
    return str(value)


def _messages(request: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(request, dict):
        return (("request", _text(request)),) if request else ()
    out: list[tuple[str, str]] = []
    for key in ("system", "instructions"):
        if request.get(key):
            out.append(("system", _text(request[key])))
    for message in request.get("messages") or ():
        if isinstance(message, dict):
            out.append((str(message.get("role", "?")), _text(message.get("content"))))
    items = request.get("input")
    if isinstance(items, str):
        out.append(("user", items))
    elif isinstance(items, list):
        for item in items:
            if isinstance(item, dict):
                role = item.get("role") or item.get("type") or "input"
                out.append((str(role), _text(item.get("content", item.get("output", item.get("arguments"))))))
    return tuple(out)


def _call(index: int, entry: dict[str, Any]) -> Call:
    try:
        at = datetime.fromisoformat(entry["at"])
    except (KeyError, TypeError, ValueError):
        at = None
    try:
        usage = Usage.model_validate(entry.get("usage") or {})
    except ValueError:
        usage = Usage()
    error = entry.get("error") or entry.get("upstream_error") or ""
    if isinstance(error, dict):
        error = str(error.get("message", ""))
    tool_calls = entry.get("tool_calls") or []
    return Call(index=index, purpose=str(entry.get("purpose") or ""), at=at, messages=_messages(entry.get("request")),
                reply=_text(entry.get("text")), usage=usage, error=str(error), via=str(entry.get("via") or ""),
                tool_calls=json.dumps(tool_calls, ensure_ascii=False) if tool_calls else "")


def load_calls(run_dir: Path, name: str = LEDGER_FILE) -> list[Call]:
    """Every call in the run's ledger, in the order they were made; torn lines are skipped."""
    path = Path(run_dir) / name
    if not path.is_file():
        return []
    calls = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            calls.append(_call(len(calls) + 1, entry))
    return calls


def by_step(calls: list[Call], steps: list[StepRecord]) -> dict[int | None, list[Call]]:
    """``{step: its calls}`` (every step has a list, maybe empty); calls after the last step under None."""
    starts = [s.started_at for s in steps]
    out: dict[int | None, list[Call]] = {s.step: [] for s in steps}
    out[None] = []
    ordered = sorted(range(len(starts)), key=lambda i: starts[i])
    times = [starts[i] for i in ordered]
    for call in calls:
        if call.at is None or not steps:
            out[None].append(call)
            continue
        where = bisect.bisect_left(times, call.at)
        out[steps[ordered[where]].step if where < len(times) else None].append(call)
    return out
