"""Every LLM call of a run, on disk: an audit log and the reply cache that makes resumed runs replay.

A resumed run asks the same questions in the same order, so the n-th occurrence of a request (same
provider, model, messages and parameters) gets the n-th reply recorded for it: identical replies, no
second payment. Counting occurrences keeps a repeated prompt (a re-draft after failures) from being
answered with the very same reply, as a live provider would not. A call that failed for good (after its
retries) is kept too, with its error instead of a reply, and fails again on replay: the resumed agent
takes the same fallback it took. The file holds prompts and replies, never keys.
"""

from __future__ import annotations

import hashlib
import json
import os
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
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Ledger:
    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[tuple[str, int], dict[str, Any]] = {}
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
               text: str, usage: Usage, finish_reason: str | None, latency_s: float) -> None:
        entry = {
            "key": key, "n": n, "at": now().isoformat(), "provider": provider, "model": model,
            "purpose": purpose, "latency_s": round(latency_s, 3), "usage": usage.model_dump(),
            "finish_reason": finish_reason, "request": asdict(request), "text": text,
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

    def _write(self, key: str, n: int, entry: dict[str, Any]) -> None:
        self._entries[(key, n)] = entry
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as fh:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
