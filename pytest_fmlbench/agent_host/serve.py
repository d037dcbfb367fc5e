"""Serving one agent over a stream socket until it says it is done, or fails.

The agent's time budget counts its own time only: the wall clock, less the time the harness spends
on its requests (a step's run, a model call). A stalled sender, a flood of output, a limit or a dead
process ends the session with one line saying which; the harness's own failures propagate.
"""

from __future__ import annotations

import selectors
import socket
import time
from typing import Protocol

from .protocol import MAX_MESSAGE_BYTES, ProtocolViolation
from .server import Dispatcher

POLL_S = 0.05
# how long a process that exited may still have unread messages in flight
_EXIT_GRACE_S = 1.0


class Watched(Protocol):
    """What the loop checks on the agent's process between messages."""

    flooded: bool

    def poll(self) -> int | None: ...

    def limit(self) -> str | None: ...


# the ways serving ends without the agent saying it is done
TIMED_OUT = "timed out"
FLOODED = "flooded"
LIMIT = "limit"
EXITED = "exited"
CLOSED = "closed"
BROKE_PROTOCOL = "protocol"


class Ended(Exception):
    """The session ended without ``done``; ``kind`` is one of the constants above."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(message or kind)
        self.kind = kind


def serve(conn: socket.socket, dispatcher: Dispatcher, budget_s: float, watched: Watched | None = None) -> None:
    """Serve requests until ``dispatcher.done`` is set; raises Ended otherwise."""
    conn.setblocking(False)
    # a selector, not select(): the harness may hold more than 1024 descriptors
    waiter = selectors.DefaultSelector()
    waiter.register(conn, selectors.EVENT_READ)
    try:
        _serve(conn, waiter, dispatcher, budget_s, watched)
    finally:
        waiter.close()


def _serve(conn: socket.socket, waiter: selectors.BaseSelector, dispatcher: Dispatcher, budget_s: float,
           watched: Watched | None) -> None:
    buffer = bytearray()
    scanned = 0
    started = time.monotonic()
    served = 0.0
    exited_at = None
    while dispatcher.done is None:
        own = time.monotonic() - started - served
        if own > budget_s:
            raise Ended(TIMED_OUT)
        if watched is not None:
            if watched.flooded:
                raise Ended(FLOODED)
            if watched.limit():
                raise Ended(LIMIT)
            if exited_at is None and watched.poll() is not None:
                exited_at = time.monotonic()
            if exited_at is not None and time.monotonic() - exited_at > _EXIT_GRACE_S:
                raise Ended(EXITED)
        if not waiter.select(max(0.0, min(POLL_S, budget_s - own))):
            continue
        try:
            chunk = conn.recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            raise Ended(CLOSED) from None
        if not chunk:
            raise Ended(CLOSED)
        buffer += chunk
        while dispatcher.done is None:
            end = buffer.find(b"\n", scanned)
            if end < 0:
                scanned = len(buffer)
                if scanned > MAX_MESSAGE_BYTES:
                    raise Ended(BROKE_PROTOCOL, f"a message of more than {MAX_MESSAGE_BYTES} bytes")
                break
            if end == len(buffer) - 1:
                # the whole buffer is the line (one request at a time): handed over as it is, not copied
                line, buffer = buffer, bytearray()
                del line[end:]
            else:
                line = buffer[:end]
                del buffer[:end + 1]
            scanned = 0
            if len(line) > MAX_MESSAGE_BYTES:
                raise Ended(BROKE_PROTOCOL, f"a message of {len(line)} bytes, more than {MAX_MESSAGE_BYTES}")
            began = time.monotonic()
            try:
                reply = dispatcher.handle_line(line)
            except ProtocolViolation as exc:
                raise Ended(BROKE_PROTOCOL, str(exc)) from None
            served += time.monotonic() - began
            # an agent that does not read its replies spends its own time
            remaining = budget_s - (time.monotonic() - started - served)
            if remaining <= 0:
                raise Ended(TIMED_OUT)
            conn.settimeout(remaining)
            try:
                conn.sendall(reply)
            except TimeoutError:
                raise Ended(TIMED_OUT) from None
            except OSError:
                raise Ended(CLOSED) from None
            finally:
                conn.setblocking(False)
