"""Run one command of a task: its own process group, a timeout that kills the whole group, no secrets."""

from __future__ import annotations

import ctypes
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .isolation.limits import StepGroup

# The original's agents feed back this much of a failed run's stderr (its max_stderr_output).
ERROR_TAIL_CHARS = 1500
# A command's stderr kept apart from the combined log, for the agents that show it (the port's executor
# hands them the whole of it): its first and its last STDERR_KEEP_CHARS characters, the middle cut.
STDERR_KEEP_CHARS = 16_000
LOG_HEAD_BYTES = 64_000
LOG_KEEP_BYTES = 256_000
_KILL_GRACE_S = 3.0
_POLL_S = 0.05

_SECRET_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ACCESS_KEY|PRIVATE_KEY|AUTH)", re.IGNORECASE
)
_SECRET_PREFIXES = ("OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_API", "OPENROUTER_", "AZURE_OPENAI", "AWS_", "HF_TOKEN")


def scrubbed_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for task commands: API keys and other secrets removed."""
    env = {
        name: value
        for name, value in (os.environ if base is None else base).items()
        if not _SECRET_NAME.search(name) and not name.upper().startswith(_SECRET_PREFIXES)
    }
    # bytecode is never written into workspaces: a planted .pyc is then always a new, flagged file
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class CommandResult:
    returncode: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    # the resource limit that ended the command ("out of memory", "too many processes"), if one did
    limit: str | None = None
    # what the command wrote to stderr alone (head and tail kept, see STDERR_KEEP_CHARS)
    stderr: str = ""
    # the command's CPU time (user + system, its processes', as the kernel counted them): a warm command's
    # from its parent's report, another's from its step's control group (cgroup v2); None where neither
    # counts it (bubblewrap passes on no CPU time of the processes in its PID namespace)
    cpu_s: float | None = None
    # whether it was forked from a warm parent (isolation.warm) rather than started afresh
    warm: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and self.limit is None

    def describe_failure(self, what: str, timeout_s: float) -> str:
        if self.limit:
            head = f"{what} failed: {self.limit} (the step's limit was reached; its processes were killed)"
        elif self.timed_out:
            head = f"{what} timed out after {timeout_s:g} s (process group killed)"
        else:
            head = f"{what} exited with code {self.returncode}"
        return f"{head}\n{self.output_tail_with_error()}".strip()

    def output_tail_with_error(self) -> str:
        """The output's tail, ending with the end of stderr. The two streams reach the log through two
        pipes in whatever order their readers run, and Python flushes stdout at exit after printing its
        error, so a long stdout can push the error itself out of the tail."""
        error = self.stderr.rstrip("\n")
        if not error or error[-200:] in self.output_tail:
            return self.output_tail
        return f"{self.output_tail.rstrip()}\n[... the end of its standard error:]\n{error[-ERROR_TAIL_CHARS // 2:]}"


def format_command(template: str, values: dict[str, str | Path], python: list[str] | None = None) -> list[str]:
    """Split a task command template, each placeholder one argument; ``python`` replaces ``{python}``."""
    quoted = {name: shlex.quote(str(value)) for name, value in values.items()}
    quoted.setdefault("python", shlex.join(python or [sys.executable]))
    return shlex.split(template.format(**quoted))


def run_command(argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path,
                group: StepGroup | None = None, shown: str | None = None,
                launcher: Callable[[StepGroup | None], Any] | None = None,
                meanwhile: Callable[[], None] | None = None) -> CommandResult:
    """Run ``argv`` to completion, its output kept in ``log_path`` within a fixed size.

    ``group`` (a step's resource limits) is joined by the child before exec; a limit it reports as
    reached ends the command at once. ``launcher`` may start the command warm (see
    ``isolation.warm``): it returns a started process with what is used here of a Popen, or None, and
    the command then starts as usual. ``meanwhile`` is called once the command has started, while it
    runs (the harness's own work that need not wait for it); what it raises ends the command and
    propagates.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = False
    limit = None
    proc = launcher(group) if launcher is not None else None
    if proc is not None:
        ahead = "[built ahead] " if getattr(proc, "built_ahead", False) else ""
        shown = f"[warm] {ahead}{shown or '$ ' + shlex.join(argv)}"
        if getattr(proc, "group", group) is not group:
            # it runs in the group it was built in, ahead of this call: that one bounds it
            if group is not None:
                group.close()
            group = proc.group
    if group is not None:
        group = group.now()
    sink = CappedLog(log_path, f"{shown or '$ ' + shlex.join(argv)}\n".encode())
    errors = _HeadTail(STDERR_KEEP_CHARS * 4)

    def before_exec() -> None:
        die_with_harness()
        if group is not None:
            group.enter()

    warm = proc is not None
    try:
        if proc is None:
            proc = _Reaped(subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=before_exec,
            ))
    except (OSError, subprocess.SubprocessError) as exc:
        sink.feed(f"could not start: {exc}\n".encode())
        sink.close()
        if group is not None:
            group.close()
        return CommandResult(None, False, 0.0, f"could not start {argv[0]}: {exc}",
                             stderr=f"could not start {argv[0]}: {exc}")
    # both streams go to the one log (interleaved as they arrive); stderr is also kept on its own
    readers = [threading.Thread(target=sink.drain, args=(proc.stdout,), daemon=True),
               threading.Thread(target=sink.drain, args=(proc.stderr, errors.feed), daemon=True)]
    for reader in readers:
        reader.start()
    deadline = start + timeout_s
    try:
        if meanwhile is not None:
            meanwhile()
        while True:
            try:
                proc.wait(timeout=_POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            if group is not None and (limit := group.tripped()):
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
        if timed_out:
            _kill_group(proc.pid, signal.SIGTERM)
            if group is not None:
                group.kill_all(signal.SIGTERM)
            try:
                proc.wait(timeout=_KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
    finally:
        # the command's own children (data loaders, detached jobs) die with it
        _kill_group(proc.pid, signal.SIGKILL)
        if group is not None:
            group.kill_all(signal.SIGKILL)
        proc.wait()
        group_cpu_s = None
        if group is not None:
            limit = limit or group.tripped()
            group_cpu_s = group.cpu_seconds()
            group.close(wait=not getattr(proc, "ended_whole", False))
        for reader in readers:
            reader.join(timeout=5.0)
        sink.close()
    duration = time.monotonic() - start
    usage = getattr(proc, "usage", None)
    return CommandResult(proc.returncode, timed_out, duration, tail(log_path, ERROR_TAIL_CHARS), limit,
                         errors.text(STDERR_KEEP_CHARS), usage.cpu_s if usage is not None else group_cpu_s, warm)


class _Reaped:
    """A started Popen, waited for with a pidfd: the exit is seen at once, where Popen's timed wait
    polls with sleeps of up to 50 ms."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self.pid = popen.pid
        self.stdout = popen.stdout
        self.stderr = popen.stderr
        try:
            self._pidfd: int | None = os.pidfd_open(popen.pid)
        except OSError:
            self._pidfd = None

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.popen.returncode is not None:
            return self.popen.returncode
        if self._pidfd is None:
            return self.popen.wait(timeout)
        if timeout is not None and not select.select([self._pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.popen.args, timeout)
        _, status = os.waitpid(self.pid, 0)
        # set before anything else can wait for the pid: the Popen never waits for it again
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        os.close(self._pidfd)
        self._pidfd = None
        return self.popen.returncode


class _LastBytes:
    """At least the last ``keep`` bytes of a stream, in the chunks they came in; older chunks are dropped
    (and counted) as soon as the newer ones alone hold ``keep`` bytes. Not locked: its owner locks."""

    def __init__(self, keep: int):
        self.keep = keep
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.cut = 0  # bytes dropped

    def add(self, chunk: bytes) -> None:
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size - len(self.chunks[0]) >= self.keep:
            dropped = self.chunks.popleft()
            self.size -= len(dropped)
            self.cut += len(dropped)

    def joined(self) -> bytes:
        return b"".join(self.chunks)


class CappedLog:
    """A command's output on disk: its first LOG_HEAD_BYTES, then only the last LOG_KEEP_BYTES.

    A chatty or hostile experiment can neither fill the disk nor the harness's memory.
    """

    def __init__(self, path: Path, first_line: bytes):
        self.path = path
        self.fh = open(path, "wb")
        self.fh.write(first_line)
        self.written = len(first_line)
        self.tail = _LastBytes(LOG_KEEP_BYTES)
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            if self.fh.closed:
                # a reader that outlived its wait (a pipe some leftover process still held): the log is final
                return
            room = max(0, LOG_HEAD_BYTES - self.written)
            if room:
                self.fh.write(chunk[:room])
                self.written += min(room, len(chunk))
                chunk = chunk[room:]
            if chunk:
                self.tail.add(chunk)

    def drain(self, stream, also=None) -> None:
        for chunk in iter(lambda: stream.read1(1 << 16), b""):
            self.feed(chunk)
            if also is not None:
                also(chunk)

    def close(self) -> None:
        with self.lock:
            if self.fh.closed:
                return
            tail = self.tail.joined()
            excess = max(0, len(tail) - LOG_KEEP_BYTES)
            if self.tail.cut or excess:
                self.fh.write(f"\n[... {self.tail.cut + excess} bytes cut ...]\n".encode())
            self.fh.write(tail[excess:])
            self.fh.close()


class _HeadTail:
    """A stream's first and last ``keep`` bytes; what lies between is dropped as it arrives."""

    def __init__(self, keep: int):
        self.keep = keep
        self.head = bytearray()
        self.tail = _LastBytes(keep)
        self.lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self.lock:
            self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail.add(chunk)

    def text(self, chars: int) -> str:
        """The stream as text: whole when it has at most 2 x ``chars`` characters, else its first and
        last ``chars`` characters with a line marking the cut between them."""
        with self.lock:
            return self._text(chars)

    def _text(self, chars: int) -> str:
        if not self.tail.cut:
            whole = (bytes(self.head) + self.tail.joined()).decode(errors="replace")
            if len(whole) <= 2 * chars:
                return whole
            head, tail = whole[:chars], whole[-chars:]
        else:
            head = bytes(self.head).decode(errors="replace")[:chars]
            tail = self.tail.joined().decode(errors="replace")[-chars:]
        return f"{head}\n[... middle of the output cut ...]\n{tail}"


def die_with_harness() -> None:
    """In the child before exec: if the harness is killed outright, the experiment is killed too."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def tail(path: Path, chars: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - chars * 4))
        text = fh.read().decode(errors="replace")
    return text[-chars:]
