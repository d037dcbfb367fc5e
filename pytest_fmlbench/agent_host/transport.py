"""The agent's end of the protocol: send a request, wait for its answer, raise what the harness raised.

``SocketTransport`` speaks over the socket an agent process inherits (or any connected stream socket);
``LocalTransport`` hands the same encoded messages straight to the harness's dispatcher, for an agent
run inside the harness's process (``--agent-in-process``), so both go through one code path. Both send
an agent's texts as the harness takes them (``protocol.clean_args``): a model's reply or a tool's output
quoted in a plan or an ``extra`` never breaks the protocol.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Protocol

from .protocol import (
    BAD_REQUEST, BUDGET_EXHAUSTED, LLM_CALL_ERROR, RUN_STOPPED, VERSION, ProtocolViolation, RequestError, clean_args,
    decode_reply, encode,
)


class Transport(Protocol):
    def request(self, op: str, args: dict[str, Any]) -> dict[str, Any]: ...


class HarnessGone(ConnectionError):
    """The harness closed the connection (it ended the run, or it is gone)."""


class SocketTransport:
    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._next_id = 0
        # one request at a time: an agent that calls from several threads has its calls taken in turn
        self._lock = threading.Lock()

    def request(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            try:
                self._sock.sendall(encode({"id": self._next_id, "op": op, "args": clean_args(op, args)}))
                # a reply may be larger than a request may be (the journal of a long run): the harness wrote it
                line = self._reader.readline()
            except OSError as exc:
                raise HarnessGone(f"the harness closed the connection ({exc})") from None
        if not line.endswith(b"\n"):
            raise HarnessGone("the harness closed the connection")
        return unwrap(decode_reply(line))


class LocalTransport:
    def __init__(self, dispatcher):
        self._dispatcher = dispatcher
        self._next_id = 0
        self._lock = threading.Lock()

    def request(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._next_id += 1
            line = self._dispatcher.handle_line(encode({"id": self._next_id, "op": op, "args": clean_args(op, args)}))
        return unwrap(decode_reply(line))


def hello(transport: Transport) -> dict[str, Any]:
    return transport.request("hello", {"version": VERSION})


def unwrap(reply: dict[str, Any]) -> dict[str, Any]:
    if reply.get("ok") is True and isinstance(reply.get("result"), dict):
        return reply["result"]
    err = reply.get("error")
    if not isinstance(err, dict):
        raise ProtocolViolation("a reply with neither a result nor an error")
    raise exception_for(err)


def exception_for(err: dict[str, Any]) -> Exception:
    """The exception an in-process agent would have seen for the same failure."""
    # imported here: the session module builds on this one
    from ..llm.errors import LLMCallError
    from ..stops import BudgetExhausted, RunStopped

    kind, message = str(err.get("type", "")), str(err.get("message", ""))
    if kind == BUDGET_EXHAUSTED:
        return BudgetExhausted(message)
    if kind == RUN_STOPPED:
        return RunStopped(message)
    if kind == LLM_CALL_ERROR:
        status = err.get("status")
        return LLMCallError(message, status=status if isinstance(status, int) else None,
                            kind=str(err.get("kind", "error")))
    if kind == BAD_REQUEST:
        return RequestError(message)
    return ProtocolViolation(f"{kind}: {message}")
