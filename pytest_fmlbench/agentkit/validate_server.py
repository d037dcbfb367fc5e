"""The driver's end of ``fmlbench-validate``: a UNIX socket in the agent's private ``/tmp``, served by a thread.

Calls are taken one at a time, in the order they connect: a tool that validates from two shells at once
gets two steps, one after the other. Also writes the ``fmlbench-validate`` script the tool runs.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from .validate_cmd import MAX_REPLY_BYTES, NOT_RUN, SOCKET_ENV

COMMAND = "fmlbench-validate"
SOCKET_NAME = "validate.sock"
MAX_REQUEST_BYTES = 64 << 10
# a reply line stays well within what the command reads, whatever the characters' encoded size
MAX_OUTPUT_CHARS = MAX_REPLY_BYTES // 8

Handler = Callable[[list[str]], tuple[str, int]]


class ValidateServer:
    def __init__(self, folder: Path, handle: Handler):
        """``handle(args) -> (output, exit status)``; it must not raise (the driver keeps its own failures)."""
        self.path = folder / SOCKET_NAME
        self._handle = handle
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._sock.listen(16)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fmlbench-validate", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                try:
                    line = conn.makefile("rb").readline(MAX_REQUEST_BYTES)
                    request = json.loads(line)
                    args = request["args"]
                    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
                        raise ValueError("args must be a list of strings")
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # not the command: nothing to answer
                if self._closed.is_set():
                    output, code = "fmlbench-validate: the tool's session is over; nothing was run\n", NOT_RUN
                else:
                    output, code = self._handle(args)
                if len(output) > MAX_OUTPUT_CHARS:
                    output = "[...]\n" + output[-MAX_OUTPUT_CHARS:]
                reply = json.dumps({"output": output, "exit": code}).encode()
                try:
                    conn.sendall(reply + b"\n")
                except OSError:
                    pass  # the caller is gone (the tool was stopped while its step ran)

    def write_command(self, bin_dir: Path) -> Path:
        """The ``fmlbench-validate`` script, which runs this interpreter on the command's module."""
        bin_dir.mkdir(parents=True, exist_ok=True)
        script = bin_dir / COMMAND
        package_root = Path(__file__).resolve().parents[2]
        script.write_text(
            "#!/bin/sh\n"
            f"{SOCKET_ENV}={shlex.quote(str(self.path))} PYTHONPATH={shlex.quote(str(package_root))} "
            f"exec {shlex.quote(sys.executable)} -s -B -m pytest_fmlbench.agentkit.validate_cmd \"$@\"\n")
        script.chmod(0o755)
        return script

    def close(self) -> None:
        """Stop taking calls; waits for a call being served to finish."""
        self._closed.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join()
