"""Inside the agent sandbox: a loopback TCP port relayed to the LLM gateway's UNIX socket.

The sandbox has no network. Coding tools only know HTTP base URLs, so the agent process listens on
127.0.0.1 and relays each connection, byte for byte, to a new connection to the gateway's socket (bound
into the sandbox by the harness)::

    base_url, stop = start_forwarder("/run/fmlbench/llm.sock")
    # ANTHROPIC_BASE_URL=base_url, or OPENAI_BASE_URL=base_url + "/v1", for the tool
    ...
    stop()

It understands nothing of HTTP, holds no key and needs only the standard library (it runs in the agent's
process, which may not have the harness's dependencies).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable

_CHUNK = 65536


def start_forwarder(socket_path: str) -> tuple[str, Callable[[], None]]:
    """Listen on 127.0.0.1:0 and relay each connection to ``socket_path``; returns (base URL, stop).

    Raises ConnectionError with one line when nothing answers on ``socket_path``.
    """
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(5.0)
        probe.connect(socket_path)  # a missing gateway is said now, not as each of the tool's calls fails
    except OSError as exc:
        raise ConnectionError(f"no LLM gateway answers on {socket_path}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    port = listener.getsockname()[1]
    relay = _Relay(socket_path, listener)
    threading.Thread(target=relay.accept_loop, name="fmlbench-forwarder", daemon=True).start()
    return f"http://127.0.0.1:{port}", relay.stop


class _Relay:
    def __init__(self, socket_path: str, listener: socket.socket):
        self.socket_path = socket_path
        self.listener = listener
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # stop() shut the listener
            threading.Thread(target=self._serve, args=(conn,), name="fmlbench-forwarder-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        # small SSE chunks must leave at once, not wait for the previous one's acknowledgement
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        gateway = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            gateway.connect(self.socket_path)
        except OSError as exc:
            _answer_unreachable(conn, self.socket_path, exc)
            gateway.close()
            return
        if not self._track(conn, gateway):
            return
        back = threading.Thread(target=_pump, args=(gateway, conn), name="fmlbench-forwarder-back", daemon=True)
        back.start()
        _pump(conn, gateway)
        back.join()
        self._untrack(conn, gateway)

    def _track(self, *socks: socket.socket) -> bool:
        with self._lock:
            if not self._stopped:
                self._open.update(socks)
                return True
        for sock in socks:
            sock.close()
        return False

    def _untrack(self, *socks: socket.socket) -> None:
        with self._lock:
            self._open.difference_update(socks)
        for sock in socks:
            sock.close()

    def stop(self) -> None:
        """Stop listening and cut every relayed connection. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            socks = list(self._open)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in its thread
        except OSError:
            pass
        self.listener.close()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends, then pass its end on (the other direction may go on)."""
    try:
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _answer_unreachable(conn: socket.socket, socket_path: str, exc: OSError) -> None:
    """A readable HTTP error for the tool, rather than a connection dropped without a word."""
    # the error shape both SDK families read a message from
    body = json.dumps({"type": "error", "error": {"type": "api_error", "message":
                                 f"fmlbench forwarder: the LLM gateway at {socket_path} is not answering: "
                                 f"{exc.strerror or exc}"}}).encode()
    head = (f"HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n").encode()
    try:
        conn.sendall(head + body)
    except OSError:
        pass
    finally:
        conn.close()
