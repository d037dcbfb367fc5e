"""The harness's end of one warm parent: starting its program (``parent/main.py``) with the imports,
reading its ready report, and asking it, over the control socket, to fork a child for a command.
The messages are described in ``parent/__init__.py``."""

from __future__ import annotations

import json
import select
import shlex
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from .imports import FIRST_USE_IMPORTS


PARENT_SCRIPT = Path(__file__).with_name("parent") / "main.py"
# a parent's imports may take a while on a loaded machine; beyond this, commands start cold
READY_TIMEOUT_S = 300.0
# from the request to the script's first line: forks, namespaces, mounts
START_TIMEOUT_S = 60.0
# from a closed parent's exit to the end of its output
LOG_DRAIN_S = 5.0


class StartsCold(Exception):
    """This command starts cold; the message says why (one line)."""


@dataclass(frozen=True)
class ParentKey:
    kind: str                     # "experiment" or "harness": never the same process
    flags: tuple[str, ...]        # the interpreter flags of its commands
    env: tuple[tuple[str, str], ...]
    sandboxed: bool


class WarmParent:
    """A started warm parent: its process, its control socket, its ready report."""

    def __init__(self, key: ParentKey, imports: list[tuple[str, list[str]]], optional: bool,
                 guard: dict | None, log_path: Path):
        self.key = key
        self.imports = imports
        self._report: dict | None = None
        self._refusal: str | None = None
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        from ...executor import CappedLog, die_with_harness

        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = CappedLog(log_path, f"warm parent ({key.kind}): {shlex.join(m for m, _ in imports)}\n".encode())
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *key.flags, str(PARENT_SCRIPT), str(theirs.fileno())], cwd="/",
                env=dict(key.env), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=[theirs.fileno()], start_new_session=True, preexec_fn=die_with_harness)
        finally:
            theirs.close()
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        ours.send(json.dumps({"imports": imports, "optional": optional, "guard": guard,
                              "first_use": FIRST_USE_IMPORTS}).encode())

    def _drain(self) -> None:
        self.log.drain(self.proc.stdout)
        self.log.close()

    def refusal(self, timeout_s: float = READY_TIMEOUT_S) -> str | None:
        """None when this parent may serve commands, else why not (one line). Waits for its imports."""
        with self.lock:
            if self._report is None and self._refusal is None:
                self._refusal = self._await_report(timeout_s)
            return self._refusal

    @property
    def top_level(self) -> set[str]:
        return set((self._report or {}).get("top_level", ()))

    def _await_report(self, timeout_s: float) -> str | None:
        ready, _, _ = select.select([self.control], [], [], timeout_s)
        if not ready:
            return f"its imports took longer than {timeout_s:g} s"
        try:
            message = self.control.recv(1 << 20)
        except OSError as exc:
            message, error = b"", exc
        else:
            error = None
        if not message:
            self.proc.wait(timeout=10)
            return f"it exited while importing (code {self.proc.returncode}{f', {error}' if error else ''}; see {self.log.path.name})"
        self._report = report = json.loads(message)
        for problem, why in (
            ("failed", "importing {}"),
            ("refused", "importing did what a sandbox would have answered differently: {}"),
            ("devices", "a GPU was initialised while importing ({}): CUDA cannot be forked"),
            ("shared_writable", "importing left a writable shared mapping ({}) that every child would share"),
            ("fds", "importing left descriptors open ({})"),
            ("outside", "it holds files the sandbox does not show ({})"),
        ):
            if report.get(problem):
                return why.format(report[problem][0])
        if report["threads"] != 1:
            return (f"{report['threads'] - 1} thread(s) started while importing keep running across a fork "
                    "(their state would be torn in every child)")
        return None

    def spawn(self, request: dict, fds: list[int]) -> int:
        """Fork a child for ``request``; its pid on this machine."""
        with self.lock:
            socket.send_fds(self.control, [json.dumps(request).encode()], fds)
            ready, _, _ = select.select([self.control], [], [], START_TIMEOUT_S)
            reply = self.control.recv(1 << 16) if ready else b""
        if not reply:
            raise StartsCold("the warm parent did not answer")
        answer = json.loads(reply)
        if "pid" not in answer:
            raise StartsCold(f"the warm parent refused: {answer.get('error')}")
        return answer["pid"]

    def close(self) -> None:
        self.control.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        # the log is written out when its reader sees the end of the parent's output: whoever reads it
        # once the parent is closed (a test, the user after the run) must find it whole. A forked command
        # that still holds that pipe cannot delay the close beyond the wait: what came by then is kept
        self._drainer.join(timeout=LOG_DRAIN_S)
        self.log.close()
