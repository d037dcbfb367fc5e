"""One command started warm: the status lines its child and parent write, the step's bubblewrap
sandbox holding its namespaces until the child has joined them, and ``WarmProcess``, what run_command
uses of a Popen."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..limits import StepGroup
from .parent_link import START_TIMEOUT_S, StartsCold


# the command the step's sandbox holds while the child joins it: prints when the sandbox is ready,
# then waits for the harness to close its input (the child has joined by then)
HOLDER = ["/bin/sh", "-c", "echo; read _"]


class StatusLines:
    """The lines a child and its parent write on a command's status pipe."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def next(self, timeout_s: float | None) -> str | None:
        """The next line; None at the timeout; "" once every writer closed the pipe."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while b"\n" not in self.buffer:
            if self.closed:
                return ""
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.closed = True
                if not self.buffer:
                    return ""
                chunk = b"\n"
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode(errors="replace")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(frozen=True)
class CommandUsage:
    """What a warm command used, as the kernel counted it (in sandbox mode with its namespace's init)."""

    cpu_s: float
    minor_faults: int


class WarmProcess:
    """A command forked from a warm parent, with what run_command uses of a Popen. ``group`` is the
    control group it runs in (for a step built ahead, not the one run_command made); ``on_end`` is
    called once it has ended and whatever reported its end is gone."""

    def __init__(self, pid: int, stdout, stderr, status: StatusLines, holder: SandboxHolder | None,
                 group: StepGroup | None = None, on_end: Callable[[], None] | None = None):
        self.pid = pid
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self.usage: CommandUsage | None = None
        self.group = group
        self.built_ahead = False
        # whether, once its exit is reported, no process of it is left but the ones that reported it
        # (sandbox mode): its control group may then be removed once they are gone, unwaited
        self.ended_whole = holder is not None
        self._status = status
        self._holder = holder
        self._on_end = on_end

    def wait(self, timeout: float | None = None) -> int:
        while self.returncode is None:
            line = self._status.next(timeout)
            if line is None:
                raise subprocess.TimeoutExpired("warm command", timeout)
            if line.startswith("exit "):
                code, user, system, faults = line.split()[1:]
                self.returncode = int(code)
                self.usage = CommandUsage(float(user) + float(system), int(faults))
            elif line == "":
                # killed before anyone could report (the step's group, or the harness on a timeout)
                self.returncode = -9
                self.ended_whole = False
        # once its exit is reported, nothing of the command runs any more (a sandboxed one's init has
        # ended and reaped all else first): what reported it may still be ending, which nobody waits for
        self._status.close()
        if self._holder is not None:
            self._holder.reap()
            self._holder = None
        if self._on_end is not None:
            on_end, self._on_end = self._on_end, None
            on_end()
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None


class SandboxHolder:
    """The step's bubblewrap sandbox, built with the step's own arguments, holding its namespaces until
    a warm child has joined them. Started here; ``ready`` waits until it holds them."""

    def __init__(self, bwrap_argv: list[str], cwd: Path, env: dict[str, str]):
        info_r, info_w = os.pipe()
        argv = [bwrap_argv[0], "--info-fd", str(info_w), *bwrap_argv[1:]]
        try:
            # No preexec_fn: without one, subprocess starts bubblewrap by vfork instead of copying this
            # (large) process's page tables, 75 ms less per step on a busy machine. It needs none to die
            # with the harness: its command ends when its input does, at the harness's end included.
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, pass_fds=[info_w], start_new_session=True)
        except OSError as exc:
            os.close(info_r)
            raise StartsCold(f"bubblewrap could not start: {exc}") from None
        finally:
            os.close(info_w)
        self._info = info_r
        self.pid: int | None = None

    def ready(self) -> None:
        """Wait until the sandbox holds its namespaces (its command has started): ``pid`` is then the
        process whose namespaces a child joins. Raises StartsCold, the holder reaped, if it did not start."""
        with os.fdopen(self._info, "rb") as info:
            ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
            line = self.proc.stdout.readline() if ready else b""
            if not line:
                self.release()
                if self.proc.poll() is None:
                    self.proc.kill()
                reason = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
                self.reap()
                raise StartsCold(f"the step's sandbox did not start ({reason[-1] if reason else 'no message'})")
            self.pid = json.loads(info.read())["child-pid"]

    def release(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def reap(self) -> None:
        self.release()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


def child_env(env: dict[str, str], cwd: Path, sandboxed: bool) -> dict[str, str]:
    """The environment a command's process starts with: bubblewrap's --chdir also sets PWD."""
    return {**env, "PWD": str(cwd)} if sandboxed else env


def script_command(argv: list[str], flags: tuple[str, ...], cwd: Path) -> tuple[str, list[str]] | None:
    """``(script as an absolute path, sys.argv)`` of ``[python, *flags, script, args...]``, else None."""
    head = [sys.executable, *flags]
    if argv[: len(head)] != head or len(argv) == len(head) or argv[len(head)].startswith("-"):
        return None
    script = argv[len(head)]
    return os.path.abspath(os.path.join(cwd, script)), argv[len(head):]
