"""A loopback server speaking the OpenAI Chat Completions and Anthropic Messages wire protocols.

The real SDKs talk to it over HTTP. Each test scripts what it answers: a queue of items (``Say`` a
reply, ``Fail`` with a status, after an optional delay), then a ``responder`` callable for anything
beyond the queue. Every request is recorded (headers lower-cased, JSON body) for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Say:
    text: str
    input_tokens: int = 120  # every prompt token, cached ones included (as our Usage counts them)
    output_tokens: int = 40
    cached_tokens: int = 0
    finish_reason: str = "stop"
    delay_s: float = 0.0


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Item = Say | Fail


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at: float

    @property
    def protocol(self) -> str:
        return "anthropic" if "anthropic-version" in self.headers else "openai"

    @property
    def prompt(self) -> str:
        """System prompt and messages as one text (for responders deciding what a request asks)."""
        if not self.body:
            return ""
        parts = [self.body.get("system") or ""] if isinstance(self.body.get("system"), str) else []
        parts += [m.get("content", "") for m in self.body.get("messages", []) if isinstance(m.get("content"), str)]
        return "\n".join(parts)


class FakeLLM:
    def __init__(self) -> None:
        self.queue: deque[Item] = deque()
        self.responder: Callable[[Seen], Item] | None = None
        self.requests: list[Seen] = []
        self.unknown_models: set[str] = set()
        # what GET /v1/models/ID says of an Anthropic model's largest max_tokens (None: the field is absent)
        self.anthropic_max_tokens: int | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # a short poll interval keeps shutdown (each test's teardown) quick
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def start(self) -> FakeLLM:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *items: Item) -> None:
        with self._lock:
            self.queue.extend(items)

    @property
    def completions(self) -> list[Seen]:
        return [r for r in self.requests if r.method == "POST"]

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)

    def _next(self, seen: Seen) -> Item:
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        if self.responder is not None:
            return self.responder(seen)
        return Fail(400, "fake server: no scripted reply left", code="script_exhausted")


def _handler_for(fake: FakeLLM):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # keep test output clean
            pass

        def _seen(self, body) -> Seen:
            headers = {k.lower(): v for k, v in self.headers.items()}
            return Seen(self.command, self.path, headers, body, time.monotonic())

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

        def _error(self, seen: Seen, fail: Fail) -> None:
            if seen.protocol == "anthropic":
                kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                         429: "rate_limit_error", 529: "overloaded_error"}
                payload = {"type": "error", "error": {"type": fail.code or kinds.get(fail.status, "api_error"),
                                                      "message": fail.message}}
            else:
                payload = {"error": {"message": fail.message, "type": "invalid_request_error", "code": fail.code}}
            self._send(fail.status, payload, fail.headers)

        def do_GET(self) -> None:
            seen = self._seen(None)
            fake._record(seen)
            model = self.path.rstrip("/").rsplit("/", 1)[-1]
            if "/models/" not in self.path:
                return self._error(seen, Fail(404, f"no route {self.path}"))
            if model in fake.unknown_models:
                return self._error(seen, Fail(404, f"The model `{model}` does not exist", code="model_not_found"))
            if seen.protocol == "anthropic":
                info = {"type": "model", "id": model, "display_name": model, "created_at": "2026-01-01T00:00:00Z"}
                if fake.anthropic_max_tokens is not None:
                    info["max_tokens"] = fake.anthropic_max_tokens
                return self._send(200, info)
            self._send(200, {"id": model, "object": "model", "created": 0, "owned_by": "fake"})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            seen = self._seen(body)
            fake._record(seen)
            item = fake._next(seen)
            if item.delay_s:
                time.sleep(item.delay_s)
            if isinstance(item, Fail):
                return self._error(seen, item)
            model = body.get("model", "?")
            if self.path.endswith("/chat/completions"):
                self._send(200, {
                    "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "finish_reason": item.finish_reason,
                                 "message": {"role": "assistant", "content": item.text}}],
                    "usage": {"prompt_tokens": item.input_tokens, "completion_tokens": item.output_tokens,
                              "total_tokens": item.input_tokens + item.output_tokens,
                              "prompt_tokens_details": {"cached_tokens": item.cached_tokens}},
                })
            elif self.path.endswith("/messages"):
                stop = {"stop": "end_turn", "length": "max_tokens"}.get(item.finish_reason, item.finish_reason)
                self._send(200, {
                    "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": item.text}], "stop_reason": stop, "stop_sequence": None,
                    # Anthropic reports cache reads apart from (uncached) input tokens
                    "usage": {"input_tokens": item.input_tokens - item.cached_tokens,
                              "output_tokens": item.output_tokens,
                              "cache_read_input_tokens": item.cached_tokens, "cache_creation_input_tokens": 0},
                })
            else:
                self._error(seen, Fail(404, f"no route {self.path}"))

    return Handler
