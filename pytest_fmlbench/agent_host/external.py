"""``--agent=external``: each item waits on its own UNIX socket for any program to drive its run.

The program speaks the protocol (``docs/agent-protocol.md``): ``hello`` gives it the task and the
baseline files (an environment's reset), ``edit`` / ``set_files`` and ``run_step`` are its steps, and
the same budget, records and final test apply. The socket lives in a fresh folder only its owner can
enter; the item announces its path through the live progress display and the log.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from collections.abc import Callable

from .. import scratch
from .outcome import AgentOutcome, from_done
from .protocol import VERSION
from .serve import CLOSED, TIMED_OUT, Ended, serve
from .server import Dispatcher

SOCKET_NAME = "agent.sock"


def serve_one(dispatcher: Dispatcher, item: str, budget_s: float, announce: Callable[[str], None]):
    folder = scratch.mkdtemp(prefix="external-")
    path = os.path.join(folder, SOCKET_NAME)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(path)
        listener.listen(1)
        announce(f"waiting for an external agent on {path} (agent protocol version {VERSION})")
        started = time.monotonic()
        listener.settimeout(budget_s)
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return AgentOutcome("failed", f"no external agent connected to {path} within {budget_s:g} s")
        with conn:
            try:
                serve(conn, dispatcher, budget_s - (time.monotonic() - started))
            except Ended as ended:
                if ended.kind == TIMED_OUT:
                    why = f"exceeded its time budget of {budget_s:g} s (--agent-timeout sets it)"
                elif ended.kind == CLOSED:
                    why = "disconnected before it said it was done"
                else:
                    why = f"broke the protocol ({ended})"
                return AgentOutcome("failed", why)
        return from_done(dispatcher.done)
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)
