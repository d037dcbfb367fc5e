"""A loopback model server for driving real coding tools offline: Anthropic Messages, OpenAI Chat
Completions and OpenAI Responses, each with streaming (SSE) and without, with text and tool calls.

Script the turns the model takes; the server answers each model request with the next one::

    from tests.llm.wire_servers import ToolCall, Turn, WireServer

    with WireServer(
        Turn("Let me look.", [ToolCall("Bash", {"command": "ls"})]),   # Claude Code's tool
        Turn("Done."),
    ) as server:
        env = {"ANTHROPIC_BASE_URL": server.url}                # Anthropic SDKs and Claude Code
        env = {"OPENAI_BASE_URL": server.url + "/v1"}           # OpenAI SDKs, Codex, litellm
        ...                                                     # run the tool (or the gateway in front)
        assert server.model_requests[1].tool_outputs == ["file_a\\nfile_b\\n"]

What it serves (the API is told by the path; a query such as ``?beta=true`` is ignored):

- ``POST .../messages`` (Anthropic Messages, as Claude Code sends it). Streams when the body says
  ``"stream": true``: ``message_start``, ``content_block_start``/``_delta``/``_stop`` (``text_delta``;
  ``input_json_delta`` for a ``tool_use``), ``message_delta`` (stop reason ``tool_use`` or ``end_turn``,
  output tokens), ``message_stop``.
- ``POST .../chat/completions`` (what mini-swe-agent sends through litellm). Tool calls become
  ``tool_calls`` of ``type: function`` (finish reason ``tool_calls``); a stream ends with ``data: [DONE]``
  and carries a usage chunk only when ``stream_options.include_usage`` asks for one, as OpenAI's does.
- ``POST .../responses`` (Codex CLI). Tool calls become ``function_call`` output items (arguments as a
  JSON string, a ``call_id`` to answer with ``function_call_output``); a stream sends
  ``response.created``, ``response.in_progress``, ``response.output_item.added``/``.done``, text and
  argument deltas, and ``response.completed`` with the usage.
- ``GET .../models/ID`` (the model check the plugin makes before a run, with either SDK): the model, so that
  a whole ``pytest --agent=...`` run can start against this server. Not a model call.
- Anything else: 404 in the error shape of the API the path suggests, recorded like every request.

A ``Turn`` is ``text`` and/or ``tool_calls`` (``ToolCall(name, arguments)``; the arguments dict is
sent as the tool expects, e.g. ``{"command": "ls"}`` for Claude Code's ``Bash``, ``{"command": ["bash",
"-lc", "ls"]}`` for Codex's ``shell``; mini-swe-agent reads a fenced bash block in plain ``text``), with
the usage to report: ``input_tokens`` counts every prompt token, cached ones included, like our
``Usage``; each API reports it in its own way (Anthropic's ``input_tokens`` excludes cache reads).
``Failure(status, message)`` answers an error instead (e.g. 429 or 500 to exercise a tool's retries).

Scripted turns are used first, in order, whatever request comes; then ``responder(request) -> Turn |
Failure`` decides, so a test can react to what the tool sent (``request.tool_outputs``: the results
the tool returned for the previous turn's calls; ``request.text``: all the prompt's text). With nothing
left to answer, a request gets a 400 ``wire server: no scripted turn left`` (tools do not retry a 400).

Every request is recorded in ``server.requests`` (``WireRequest``: method, path, query, headers
lower-cased, parsed JSON body, ``api``, ``stream``, ``model``); ``server.model_requests`` keeps the model
calls; ``server.credentials`` is every ``x-api-key``/``authorization``/``api-key`` value received, for
asserting that only the gateway's real key arrived. ``Turn(hold=threading.Event())`` stops a stream after
its first text delta until the event is set (then ``request.released`` says whether it was set in time):
a test can so prove that a relay passes a stream on as it arrives, without timing anything.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

HOLD_LIMIT_S = 30.0  # a held stream goes on after this long even if nobody released it


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None  # default: a fresh id in the API's style (toolu_..., call_...)


@dataclass
class Turn:
    text: str = ""
    tool_calls: Sequence[ToolCall] = ()
    input_tokens: int = 100  # every prompt token, cached ones included
    output_tokens: int = 20
    cached_tokens: int = 0
    hold: threading.Event | None = None  # streams only: pause after the first text delta until set


@dataclass
class Failure:
    status: int
    message: str = "scripted failure"


Answer = Turn | Failure


@dataclass
class WireRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # the parsed JSON body; None when there was none or it was not JSON
    released: bool | None = None  # for a held stream: whether its hold was set in time

    @property
    def api(self) -> str | None:
        """``"anthropic"``, ``"chat"``, ``"responses"``, or None for a path that is not a model call."""
        if self.method != "POST":
            return None
        for suffix, api in (("/messages", "anthropic"), ("/chat/completions", "chat"), ("/responses", "responses")):
            if self.path.endswith(suffix):
                return api
        return None

    @property
    def stream(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def credential(self) -> str | None:
        for name in ("x-api-key", "authorization", "api-key"):
            if name in self.headers:
                return self.headers[name]
        return None

    @property
    def tool_outputs(self) -> list[str]:
        """What the tool sent back for the previous turn's tool calls (the results at the end of the
        conversation), as text."""
        body = self.body if isinstance(self.body, dict) else {}
        if self.api == "anthropic":
            messages = body.get("messages") or []
            last = messages[-1] if messages else {}
            if last.get("role") != "user" or not isinstance(last.get("content"), list):
                return []
            return [_text_of(b.get("content")) for b in last["content"]
                    if isinstance(b, dict) and b.get("type") == "tool_result"]
        if self.api == "chat":
            outputs = []
            for message in reversed(body.get("messages") or []):
                if message.get("role") != "tool":
                    break
                outputs.append(_text_of(message.get("content")))
            return outputs[::-1]
        if self.api == "responses":
            items = body.get("input")
            if not isinstance(items, list):
                return []
            outputs = []
            for item in reversed(items):
                if not isinstance(item, dict) or not str(item.get("type", "")).endswith("_call_output"):
                    break
                outputs.append(_text_of(item.get("output")))
            return outputs[::-1]
        return []

    @property
    def text(self) -> str:
        """Every piece of text in the prompt (system prompt, instructions, messages, tool results), joined."""
        body = self.body if isinstance(self.body, dict) else {}
        parts = [_text_of(body.get(k)) for k in ("system", "instructions") if body.get(k)]
        for message in body.get("messages") or []:
            if isinstance(message, dict):
                parts.append(_text_of(message.get("content")))
        items = body.get("input")
        if isinstance(items, str):
            parts.append(items)
        elif isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    parts.append(_text_of(item.get("content", item.get("output", item.get("arguments")))))
        return "\n".join(p for p in parts if p)


def _text_of(value: Any) -> str:
    """Text of a content value: a string, or a list of blocks with text (any API's spelling)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text_of(block) for block in value)
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            if key in value:
                return _text_of(value[key])
        return ""
    return str(value)


class WireServer:
    def __init__(self, *turns: Answer, responder: Callable[[WireRequest], Answer] | None = None):
        self.responder = responder
        self.requests: list[WireRequest] = []
        self._queue: deque[Answer] = deque(turns)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._started = False

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``; OpenAI clients want ``url + "/v1"``, Anthropic ones ``url``."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> WireServer:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> WireServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *turns: Answer) -> None:
        """More turns, answered after those already scripted."""
        with self._lock:
            self._queue.extend(turns)

    @property
    def model_requests(self) -> list[WireRequest]:
        return [r for r in self.requests if r.api is not None]

    @property
    def credentials(self) -> set[str]:
        return {r.credential for r in self.requests if r.credential is not None}

    # -- internals -----------------------------------------------------------------------------
    def _record(self, request: WireRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _answer(self, request: WireRequest) -> Answer:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        return Failure(400, f"wire server: no scripted turn left for request {len(self.model_requests)}")

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):04d}"


# -- the three APIs: whole replies and their event streams ---------------------------------------------
def _call_id(server: WireServer, call: ToolCall, prefix: str) -> str:
    return call.id or server._id(prefix)


def _anthropic_usage(turn: Turn, output_tokens: int) -> dict[str, int]:
    # Anthropic reports cache reads apart from the uncached input tokens
    return {"input_tokens": turn.input_tokens - turn.cached_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": turn.cached_tokens, "cache_creation_input_tokens": 0}


def _anthropic_blocks(server: WireServer, turn: Turn) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    blocks += [{"type": "tool_use", "id": _call_id(server, c, "toolu"), "name": c.name, "input": c.arguments}
               for c in turn.tool_calls]
    return blocks


def anthropic_message(server: WireServer, request: WireRequest, turn: Turn) -> dict[str, Any]:
    return {"id": server._id("msg"), "type": "message", "role": "assistant", "model": request.model,
            "content": _anthropic_blocks(server, turn), "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
            "stop_sequence": None, "usage": _anthropic_usage(turn, turn.output_tokens)}


def anthropic_events(server: WireServer, request: WireRequest, turn: Turn) -> Iterator[tuple[str | None, Any]]:
    message = anthropic_message(server, request, turn)
    blocks = message.pop("content")
    start = {**message, "content": [], "stop_reason": None, "usage": _anthropic_usage(turn, 1)}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            for piece in _pieces(block["text"]):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": piece}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}
            for piece in _pieces(json.dumps(block["input"]), 2):
                yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": turn.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def _chat_usage(turn: Turn) -> dict[str, Any]:
    return {"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens,
            "prompt_tokens_details": {"cached_tokens": turn.cached_tokens}}


def _chat_calls(server: WireServer, turn: Turn) -> list[dict[str, Any]]:
    return [{"id": _call_id(server, c, "call"), "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for c in turn.tool_calls]


def chat_completion(server: WireServer, request: WireRequest, turn: Turn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
    if turn.tool_calls:
        message["tool_calls"] = _chat_calls(server, turn)
    return {"id": server._id("chatcmpl"), "object": "chat.completion", "created": 0, "model": request.model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if turn.tool_calls else "stop"}],
            "usage": _chat_usage(turn)}


def chat_events(server: WireServer, request: WireRequest, turn: Turn) -> Iterator[tuple[str | None, Any]]:
    base = {"id": server._id("chatcmpl"), "object": "chat.completion.chunk", "created": 0, "model": request.model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for piece in _pieces(turn.text):
        yield chunk({"content": piece})
    for index, call in enumerate(_chat_calls(server, turn)):
        name, arguments = call["function"]["name"], call["function"]["arguments"]
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": {"name": name, "arguments": ""}}]})
        for piece in _pieces(arguments, 2):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if turn.tool_calls else "stop")
    if ((request.body or {}).get("stream_options") or {}).get("include_usage"):
        yield None, {**base, "choices": [], "usage": _chat_usage(turn)}
    yield None, "[DONE]"


def _responses_items(server: WireServer, turn: Turn) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({"type": "message", "id": server._id("msg"), "status": "completed", "role": "assistant",
                      "content": [{"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}]})
    for call in turn.tool_calls:
        items.append({"type": "function_call", "id": server._id("fc"), "call_id": _call_id(server, call, "call"),
                      "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"})
    return items


def responses_object(server: WireServer, request: WireRequest, turn: Turn, *, status: str = "completed",
                     items: list[dict[str, Any]] | None = None, response_id: str | None = None) -> dict[str, Any]:
    body = request.body if isinstance(request.body, dict) else {}
    done = status == "completed"
    return {
        "id": response_id or server._id("resp"), "object": "response", "created_at": 0, "status": status,
        "model": request.model, "output": _responses_items(server, turn) if items is None else items,
        "error": None, "incomplete_details": None, "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"), "metadata": {}, "parallel_tool_calls": True,
        "previous_response_id": body.get("previous_response_id"), "reasoning": {"effort": None, "summary": None},
        "store": bool(body.get("store", False)), "temperature": 1.0, "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools", []), "top_p": 1.0,
        "truncation": "disabled", "user": None,
        "usage": {"input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": turn.cached_tokens},
                  "output_tokens": turn.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": turn.input_tokens + turn.output_tokens} if done else None,
    }


def responses_events(server: WireServer, request: WireRequest, turn: Turn) -> Iterator[tuple[str | None, Any]]:
    sequence = itertools.count()
    response_id = server._id("resp")
    items = _responses_items(server, turn)

    def event(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return kind, {"type": kind, "sequence_number": next(sequence), **fields}

    pending = responses_object(server, request, turn, status="in_progress", items=[], response_id=response_id)
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(items):
        if item["type"] == "message":
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            yield event("response.content_part.added", item_id=item["id"], output_index=index, content_index=0,
                        part=part)
            text = item["content"][0]["text"]
            for piece in _pieces(text):
                yield event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                            delta=piece, logprobs=[])
            yield event("response.output_text.done", item_id=item["id"], output_index=index, content_index=0,
                        text=text, logprobs=[])
            yield event("response.content_part.done", item_id=item["id"], output_index=index, content_index=0,
                        part={**part, "text": text})
        else:
            yield event("response.output_item.added", output_index=index,
                        item={**item, "status": "in_progress", "arguments": ""})
            for piece in _pieces(item["arguments"], 2):
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=piece)
            yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                        arguments=item["arguments"])
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed",
                response=responses_object(server, request, turn, items=items, response_id=response_id))


def _pieces(text: str, n: int = 3) -> list[str]:
    """``text`` in up to ``n`` consecutive pieces, as a model streams it."""
    if not text:
        return []
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]


_WHOLE = {"anthropic": anthropic_message, "chat": chat_completion, "responses": responses_object}
_EVENTS = {"anthropic": anthropic_events, "chat": chat_events, "responses": responses_events}


def error_payload(api: str | None, status: int, message: str) -> dict[str, Any]:
    if api == "anthropic":
        kinds = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "param": None, "code": None}}


def _handler_for(server: WireServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # a reply's headers and body go out in separate writes; Nagle would hold the second one back
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def _read_body(self) -> bytes:
            if "chunked" not in self.headers.get("transfer-encoding", "").lower():
                length = int(self.headers.get("content-length") or 0)
                return self.rfile.read(length) if length else b""
            parts = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return b"".join(parts)

        def _request(self) -> WireRequest:
            raw = self._read_body()
            try:
                body = json.loads(raw) if raw else None
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            target = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            return WireRequest(self.command, target.path, target.query, headers, body)

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                self.close_connection = True

        def _send_events(self, request: WireRequest, turn: Turn, events: Iterator[tuple[str | None, Any]]) -> None:
            try:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("cache-control", "no-cache")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                held = turn.hold is None
                for name, data in events:
                    text = data if isinstance(data, str) else json.dumps(data)
                    event = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                    chunk = event.encode()
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                    if not held and _is_text_delta(data):
                        held = True
                        request.released = turn.hold.wait(HOLD_LIMIT_S)
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

        def _serve(self) -> None:
            request = self._request()
            server._record(request)
            if request.method == "GET" and "/models/" in request.path:
                model = request.path.rsplit("/models/", 1)[1]
                # both SDKs' shapes in one: Anthropic reads type/display_name, OpenAI object/owned_by
                return self._send_json(200, {"id": model, "type": "model", "display_name": model,
                                             "created_at": "2025-01-01T00:00:00Z", "object": "model", "created": 0,
                                             "owned_by": "wire-server"})
            if request.api is None:
                return self._send_json(404, error_payload(
                    "anthropic" if "anthropic-version" in request.headers else None, 404,
                    f"wire server: no route for {request.method} {request.path}"))
            answer = server._answer(request)
            if isinstance(answer, Failure):
                return self._send_json(answer.status, error_payload(request.api, answer.status, answer.message))
            if request.stream:
                return self._send_events(request, answer, _EVENTS[request.api](server, request, answer))
            self._send_json(200, _WHOLE[request.api](server, request, answer))

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    return Handler


def _is_text_delta(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if data.get("type") in ("content_block_delta", "response.output_text.delta"):
        return data.get("type") == "response.output_text.delta" or data["delta"].get("type") == "text_delta"
    choices = data.get("choices") or []
    return bool(choices) and bool(choices[0].get("delta", {}).get("content"))
