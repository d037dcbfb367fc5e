"""Every LLM call of a run, on disk: an audit log and the reply cache that makes resumed runs replay.

A resumed run asks the same questions in the same order, so the n-th occurrence of a request (same
provider, model, messages and parameters) gets the n-th reply recorded for it: identical replies, no
second payment. Counting occurrences keeps a repeated prompt (a re-draft after failures) from being
answered with the very same reply, as a live provider would not. A call that failed for good (after its
retries) is kept too, with its error instead of a reply, and fails again on replay: the resumed agent
takes the same fallback it took. The file holds prompts and replies, never keys.

A coding tool's model calls come through the LLM gateway and are logged here too (``via: "gateway"``,
keys ``gateway:<sha256 of the body>``), but never replayed: a resumed coding tool is a new session.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..record import Usage, now
from .backends import Request

LEDGER_FILE = "llm_calls.jsonl"


def request_key(provider: str, model: str, request: Request) -> str:
    payload = {"provider": provider, "model": model, "messages": list(request.messages),
               "max_output_tokens": request.max_output_tokens, "temperature": request.temperature}
    if request.seed is not None:  # only then: the keys of calls without a seed stay what they were
        payload["seed"] = request.seed
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Ledger:
    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[tuple[str, int], dict[str, Any]] = {}
        # the gateway appends from its request threads; one line must never interleave with another
        self._lock = threading.RLock()
        if path.is_file():
            for line in path.read_text().splitlines():
                try:
                    entry = json.loads(line)
                    key = (entry["key"], int(entry["n"]))
                    Usage.model_validate(entry["usage"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError, ValidationError):
                    continue  # a line torn by a kill mid-write
                self._entries[key] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: str, n: int) -> dict[str, Any] | None:
        return self._entries.get((key, n))

    def append(self, *, key: str, n: int, provider: str, model: str, purpose: str, request: Request,
               text: str, usage: Usage, finish_reason: str | None, latency_s: float,
               sent: dict[str, Any] | None = None, unsent: tuple[str, ...] = ()) -> None:
        """A call answered; ``sent``: the sampling fields its request carried on the wire, ``unsent``: what
        it asked for that the model's family is not sent (see ``sampling``)."""
        entry = {
            "key": key, "n": n, "at": now().isoformat(), "provider": provider, "model": model,
            "purpose": purpose, "latency_s": round(latency_s, 3), "usage": usage.model_dump(),
            "finish_reason": finish_reason, "request": asdict(request), "text": text,
            "sent": dict(sent or {}), "unsent": list(unsent),
        }
        self._write(key, n, entry)

    def append_failure(self, *, key: str, n: int, provider: str, model: str, purpose: str, request: Request,
                       message: str, status: int | None, kind: str, latency_s: float) -> None:
        """A call that failed for good: no reply, no usage, the error a replay raises again."""
        entry = {
            "key": key, "n": n, "at": now().isoformat(), "provider": provider, "model": model,
            "purpose": purpose, "latency_s": round(latency_s, 3), "usage": Usage().model_dump(),
            "finish_reason": None, "request": asdict(request), "text": "",
            "error": {"message": message, "status": status, "kind": kind},
        }
        self._write(key, n, entry)

    def append_gateway(self, *, body: bytes, provider: str, model: str, path: str, status: int,
                       latency_s: float, usage: Usage, finish_reason: str | None, request: Any, text: str,
                       tool_calls: list[dict[str, Any]] = (), requested_model: str | None = None,
                       error: str | None = None) -> dict[str, Any]:
        """One model call a coding tool made through the LLM gateway; returns the entry written.

        ``body`` (the request as the tool sent it) only names the entry; ``request`` is what is kept of it.
        The caller keeps headers and keys out of ``request``, ``text`` and ``error``.
        """
        key = "gateway:" + hashlib.sha256(body).hexdigest()
        entry: dict[str, Any] = {
            "key": key, "n": 0, "at": now().isoformat(), "provider": provider, "model": model,
            "purpose": "tool", "via": "gateway", "path": path, "status": status,
            "latency_s": round(latency_s, 3), "usage": usage.model_dump(), "finish_reason": finish_reason,
            "request": request, "text": text, "tool_calls": list(tool_calls),
        }
        if requested_model is not None:
            entry["requested_model"] = requested_model
        if error is not None:
            # not "error": that field makes a replayed call fail again, and gateway calls are not replayed
            entry["upstream_error"] = error
        with self._lock:
            # the same body sent again (a tool retrying) is the next occurrence, counted across resumes too
            while (key, entry["n"]) in self._entries:
                entry["n"] += 1
            # no fsync: nothing replays these, and the tool waits for its reply until the line is written
            self._write(key, entry["n"], entry, sync=False)
        return entry

    def _write(self, key: str, n: int, entry: dict[str, Any], *, sync: bool = True) -> None:
        line = json.dumps(entry, ensure_ascii=False) + "\n"
        with self._lock:
            self._entries[(key, n)] = entry
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as fh:
                fh.write(line)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
