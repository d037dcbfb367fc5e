"""Reading a model's reply as the LLM gateway passes it on: its usage, text and tool calls, from the JSON
body or from the SSE events as they pass, in each wire API's shape (Anthropic's Messages, OpenAI's Chat
Completions and Responses). The gateway (``gateway.py``) charges and records what this reads."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .redact import redact


@dataclass
class ReplyContents:
    """What one reply held, as the gateway charges and records it."""

    input_tokens: int = 0  # every prompt token, cached ones included
    output_tokens: int = 0
    cached_tokens: int = 0
    usage_known: bool = False
    finish_reason: str | None = None
    text: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # {"name", "arguments"}


class ReplyReader:
    """Usage, text and tool calls of one reply, from its JSON or from its SSE events as they pass."""

    def __init__(self, api: str):
        self.api = api
        self._pending = b""
        self._body: Any = None
        self._usage: dict[str, int] = {}
        self._finish: str | None = None
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}  # by content block / tool call index
        self._response: dict[str, Any] | None = None  # Responses: the final response object
        self._items: list[dict[str, Any]] = []  # Responses: output items as they end
        self._error: str | None = None
        self._held: list[bytes] = []  # the stream's closing events, passed on once the call is settled

    # -- feeding -------------------------------------------------------------------------------
    def feed_body(self, data: bytes) -> None:
        try:
            self._body = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._error = data[:300].decode("utf-8", "replace")
            return
        if not isinstance(self._body, dict):
            return
        if self._body.get("error"):
            self._error = _error_text(self._body)
            if self.api != "responses":  # a failed response object still carries its usage
                return
        if self.api == "anthropic":
            self._anthropic_message(self._body)
        elif self.api == "chat":
            self._chat_chunk(self._body, whole=True)
        else:
            self._response = self._body

    def feed_stream(self, chunk: bytes) -> bytes:
        """Read the events ``chunk`` completes; returns the bytes to pass on now."""
        self._pending += chunk
        ready = []
        while True:
            cut = _event_end(self._pending)
            if cut is None:
                return b"".join(ready)
            start, end = cut
            event, whole, self._pending = self._pending[:start], self._pending[:end], self._pending[end:]
            if self._event(event):
                self._held.append(whole)
            elif not self._held:
                ready.append(whole)
            else:
                self._held.append(whole)  # nothing overtakes a held event

    def rest(self) -> bytes:
        """What is left to pass on once the stream has ended: the held events, any unfinished one."""
        rest = b"".join(self._held) + self._pending
        self._held, self._pending = [], b""
        return rest

    def _event(self, raw: bytes) -> bool:
        """Read one SSE event; True when it closes the stream (the tool's SDK ends its reply there)."""
        name, data = None, []
        for line in raw.decode("utf-8", "replace").splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        text = "\n".join(data)
        if text.startswith("[DONE]"):
            return True
        if not text:
            return False
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            return False
        if not isinstance(payload, dict):
            return False
        kind = payload.get("type") or name
        if kind == "error" or (self.api == "chat" and "error" in payload):
            self._error = _error_text(payload)
        elif self.api == "anthropic":
            self._anthropic_event(kind, payload)
        elif self.api == "chat":
            self._chat_chunk(payload, whole=False)
        else:
            self._responses_event(kind, payload)
        return kind in _CLOSING

    # -- Anthropic Messages --------------------------------------------------------------------
    def _anthropic_message(self, message: dict[str, Any]) -> None:
        for index, block in enumerate(message.get("content") or []):
            self._anthropic_block(index, block)
        self._anthropic_usage(message.get("usage"))
        self._finish = message.get("stop_reason") or self._finish

    def _anthropic_block(self, index: int, block: Any) -> None:
        if not isinstance(block, dict):
            return
        if block.get("type") == "text":
            self._text.append(str(block.get("text") or ""))
        elif block.get("type") in ("tool_use", "server_tool_use"):
            given = block.get("input")
            self._calls[index] = {"name": str(block.get("name", "")),
                                  "arguments": [json.dumps(given, ensure_ascii=False)] if given else []}

    def _anthropic_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            # message_delta repeats the running totals: the latest value of each count holds
            self._usage.update({k: v for k, v in usage.items() if isinstance(v, int)})

    def _anthropic_event(self, kind: str | None, event: dict[str, Any]) -> None:
        if kind == "message_start":
            self._anthropic_usage((event.get("message") or {}).get("usage"))
        elif kind == "content_block_start":
            self._anthropic_block(event.get("index", -1), event.get("content_block"))
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self._text.append(str(delta.get("text") or ""))
            elif delta.get("type") == "input_json_delta" and event.get("index") in self._calls:
                self._calls[event["index"]]["arguments"].append(str(delta.get("partial_json") or ""))
        elif kind == "message_delta":
            self._finish = (event.get("delta") or {}).get("stop_reason") or self._finish
            self._anthropic_usage(event.get("usage"))

    # -- OpenAI Chat Completions ---------------------------------------------------------------
    def _chat_chunk(self, chunk: dict[str, Any], *, whole: bool) -> None:
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            part = (choice.get("message") if whole else choice.get("delta")) or {}
            if isinstance(part.get("content"), str):
                self._text.append(part["content"])
            for n, call in enumerate(part.get("tool_calls") or []):
                index = call.get("index", n)
                function = call.get("function") or {}
                entry = self._calls.setdefault(index, {"name": "", "arguments": []})
                entry["name"] += str(function.get("name") or "")
                entry["arguments"].append(str(function.get("arguments") or ""))
            self._finish = choice.get("finish_reason") or self._finish
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details") or {}
            self._usage = {"input": usage.get("prompt_tokens") or 0, "output": usage.get("completion_tokens") or 0,
                           "cached": details.get("cached_tokens") or 0}

    # -- OpenAI Responses ----------------------------------------------------------------------
    def _responses_event(self, kind: str | None, event: dict[str, Any]) -> None:
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self._response = event.get("response") if isinstance(event.get("response"), dict) else None
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self._items.append(event["item"])
        elif kind == "response.output_text.delta" and not self._items:
            self._text.append(str(event.get("delta") or ""))

    def _responses_result(self, got: ReplyContents) -> None:
        response = self._response or {}
        items = response.get("output") or self._items
        if items:
            got.text = []
        for item in items:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "message":
                got.text += [str(part.get("text") or "") for part in item.get("content") or []
                             if isinstance(part, dict) and part.get("type") == "output_text"]
            elif item.get("type") in ("function_call", "custom_tool_call"):
                got.tool_calls.append({"name": str(item.get("name", "")),
                                       "arguments": str(item.get("arguments", item.get("input", "")))})
            elif item.get("type") == "local_shell_call":
                got.tool_calls.append({"name": "local_shell",
                                       "arguments": json.dumps(item.get("action"), ensure_ascii=False)})
        usage = response.get("usage")
        if isinstance(usage, dict):
            got.usage_known = True
            got.input_tokens = usage.get("input_tokens") or 0
            got.output_tokens = usage.get("output_tokens") or 0
            got.cached_tokens = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
        status = response.get("status")
        got.finish_reason = (response.get("incomplete_details") or {}).get("reason") or status

    # -- the result ----------------------------------------------------------------------------
    def result(self) -> ReplyContents:
        got = ReplyContents(text=list(self._text), finish_reason=self._finish)
        if self.api == "responses":
            self._responses_result(got)
            return got
        got.tool_calls = [{"name": c["name"], "arguments": "".join(c["arguments"])}
                          for _, c in sorted(self._calls.items())]
        u = self._usage
        if u and self.api == "anthropic":
            read = u.get("cache_read_input_tokens") or 0
            # Anthropic counts cache reads and writes apart from input_tokens; ours counts every prompt token
            got.input_tokens = (u.get("input_tokens") or 0) + read + (u.get("cache_creation_input_tokens") or 0)
            got.output_tokens, got.cached_tokens, got.usage_known = u.get("output_tokens") or 0, read, True
        elif u:
            got.input_tokens, got.output_tokens, got.cached_tokens = u["input"], u["output"], u["cached"]
            got.usage_known = True
        return got

    def error_message(self) -> str | None:
        if self._error is None and isinstance(self._body, dict):
            return _error_text(self._body)
        return self._error


# the events after which a tool's SDK considers a streamed reply complete
_CLOSING = frozenset({"message_stop", "response.completed", "response.incomplete", "response.failed"})


def _event_end(buffer: bytes) -> tuple[int, int] | None:
    """Where the first complete SSE event of ``buffer`` ends: (end of its text, start of what follows)."""
    found = [(i, i + len(sep)) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := buffer.find(sep)) >= 0]
    return min(found) if found else None


def _error_text(payload: dict[str, Any]) -> str:
    inner = payload.get("error", payload)
    if isinstance(inner, dict):
        return one_line(inner.get("message") or inner)
    return one_line(inner)


def one_line(value: Any) -> str:
    return redact(" ".join(str(value).split()))[:300]
