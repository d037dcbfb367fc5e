"""Every LLM call of every run, for the HTML page: one JSON payload the page renders on demand.

A 100-step run of a long-context agent sends its whole conversation again with every call: written
out call by call, the page would grow with the square of the steps. Here each distinct text (a message,
a reply) is stored once and calls refer to it by index, so the payload grows with what was actually
said. The page shows no call until its step's calls are opened (``<details>``), and builds them with
``textContent`` (never as markup), so hostile text stays text.

Payload: ``{"texts": [...], "runs": [{"steps": {"<step>" | "after": [call, ...]}}]}`` with a call
``{"i": n, "p": purpose, "v": via, "m": [[role, text], ...], "r": reply, "k": tool calls or -1,
"e": error or -1, "in": tokens, "out": tokens, "cached": tokens, "usd": dollars or null}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..audit.transcript import Call, by_step, load_calls
from ..record import StepRecord


@dataclass(frozen=True)
class StepCalls:
    """What a step's row says about its calls before they are opened."""

    count: int
    tokens: int
    cost_usd: float | None


@dataclass
class TranscriptPayload:
    texts: list[str] = field(default_factory=list)
    runs: list[dict] = field(default_factory=list)
    _ids: dict[str, int] = field(default_factory=dict)

    def text(self, value: str) -> int:
        if value not in self._ids:
            self._ids[value] = len(self.texts)
            self.texts.append(value)
        return self._ids[value]

    def call(self, call: Call) -> dict:
        u = call.usage
        return {"i": call.index, "p": call.purpose, "v": call.via,
                "m": [[role, self.text(text)] for role, text in call.messages], "r": self.text(call.reply),
                "k": self.text(call.tool_calls) if call.tool_calls else -1,
                "e": self.text(call.error) if call.error else -1,
                "in": u.input_tokens, "out": u.output_tokens, "cached": u.cached_tokens, "usd": u.cost_usd}

    def add_run(self, run_dir: Path, steps: list[StepRecord]) -> tuple[int, dict[int | None, StepCalls]]:
        """Adds a run's calls; returns its index in the payload and a summary per step (None: after the last)."""
        grouped = by_step(load_calls(run_dir), steps)
        summaries: dict[int | None, StepCalls] = {}
        entry: dict[str, list] = {}
        for step, calls in grouped.items():
            if not calls:
                continue
            entry["after" if step is None else str(step)] = [self.call(c) for c in calls]
            costs = [c.usage.cost_usd for c in calls]
            summaries[step] = StepCalls(len(calls), sum(c.usage.total_tokens for c in calls),
                                        None if any(c is None for c in costs) else sum(costs))
        self.runs.append({"steps": entry})
        return len(self.runs) - 1, summaries

    def to_script(self) -> str:
        """The payload as the body of a ``<script type="application/json">``: nothing in it can close the
        element or start markup (``<``, ``>`` and ``&`` are written as JSON escapes)."""
        text = json.dumps({"texts": self.texts, "runs": self.runs}, ensure_ascii=False, separators=(",", ":"))
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
