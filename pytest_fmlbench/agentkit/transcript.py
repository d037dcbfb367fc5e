"""A coding tool's transcript, kept per step: what the tool printed since the previous step, as events.

Each step's record holds its share in ``extra["transcript"]``, which the harness caps at 1 MiB of JSON
for the whole ``extra``. So every string in an event is cut to ``MAX_STRING_CHARS``, and a step's events
to ``MAX_STEP_BYTES`` of JSON: the first half of that budget keeps the earliest events, the second half
the latest, and one ``{"type": "cut", ...}`` event says how many were left out between them.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

MAX_STRING_CHARS = 4000
MAX_STEP_BYTES = 256 << 10
_MAX_DEPTH = 8


def capped(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data with every string within MAX_STRING_CHARS and nesting within a few levels."""
    if isinstance(value, str):
        if len(value) <= MAX_STRING_CHARS:
            return value
        return value[:MAX_STRING_CHARS] + f" [... {len(value) - MAX_STRING_CHARS} characters cut]"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= _MAX_DEPTH:
        return capped(json.dumps(value, default=str)[:MAX_STRING_CHARS], depth)
    if isinstance(value, dict):
        return {str(k)[:200]: capped(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [capped(v, depth + 1) for v in value]
    return capped(str(value), depth)


def _size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, ensure_ascii=False)) + 1


class Transcript:
    """Events in arrival order, taken a step at a time; safe to feed from one thread and take from another."""

    def __init__(self, max_bytes: int = MAX_STEP_BYTES):
        self._half = max_bytes // 2
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._head: list[dict[str, Any]] = []
        self._head_bytes = 0
        self._tail: deque[tuple[dict[str, Any], int]] = deque()
        self._tail_bytes = 0
        self._cut = 0

    def add(self, event: dict[str, Any]) -> None:
        event = capped(event)
        size = _size(event)
        with self._lock:
            if not self._tail and self._head_bytes + size <= self._half:
                self._head.append(event)
                self._head_bytes += size
                return
            self._tail.append((event, size))
            self._tail_bytes += size
            while self._tail_bytes > self._half and self._tail:
                _, dropped = self._tail.popleft()
                self._tail_bytes -= dropped
                self._cut += 1

    def take(self) -> list[dict[str, Any]]:
        """The events since the last take, within the cap; the transcript starts over."""
        with self._lock:
            events = list(self._head)
            if self._cut:
                events.append({"type": "cut", "events": self._cut,
                               "note": f"{self._cut} events left out: a step keeps at most {2 * self._half} bytes"})
            events += [event for event, _ in self._tail]
            self._reset()
        return events
