"""Run one command of a task: its own process group, a timeout that kills the whole group, no secrets."""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The original feeds back this much of stderr after a failed run.
ERROR_TAIL_CHARS = 1500
LOG_KEEP_BYTES = 256_000
_KILL_GRACE_S = 3.0

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

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe_failure(self, what: str, timeout_s: float) -> str:
        if self.timed_out:
            head = f"{what} timed out after {timeout_s:g} s (process group killed)"
        else:
            head = f"{what} exited with code {self.returncode}"
        return f"{head}\n{self.output_tail}".strip()


def format_command(template: str, values: dict[str, str | Path]) -> list[str]:
    quoted = {name: shlex.quote(str(value)) for name, value in values.items()}
    quoted.setdefault("python", shlex.quote(sys.executable))
    return shlex.split(template.format(**quoted))


def run_command(argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, log_path: Path) -> CommandResult:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = False
    with open(log_path, "wb") as log:
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_harness,
            )
        except OSError as exc:
            log.write(f"could not start: {exc}\n".encode())
            return CommandResult(None, False, 0.0, f"could not start {argv[0]}: {exc}")
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=_KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        finally:
            # the command's own children (data loaders, stray background jobs) die with it
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
    duration = time.monotonic() - start
    _trim_log(log_path)
    return CommandResult(proc.returncode, timed_out, duration, _tail(log_path, ERROR_TAIL_CHARS))


def _die_with_harness() -> None:
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


def _tail(path: Path, chars: int) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - chars * 4))
        text = fh.read().decode(errors="replace")
    return text[-chars:]


def _trim_log(path: Path) -> None:
    """Keep the head line and the last LOG_KEEP_BYTES: a chatty experiment must not fill the disk."""
    size = path.stat().st_size
    if size <= LOG_KEEP_BYTES:
        return
    with open(path, "rb") as fh:
        head = fh.readline()
        fh.seek(size - LOG_KEEP_BYTES)
        tail = fh.read()
    path.write_bytes(head + f"[... {size - LOG_KEEP_BYTES - len(head)} bytes cut ...]\n".encode() + tail)
