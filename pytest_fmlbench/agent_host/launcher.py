"""Starting an agent's own process: in its bubblewrap sandbox (or plainly, under --no-sandbox), under
its limits, holding its end of a socketpair, its output kept in a capped log.

Inside the sandbox the agent sees the interpreter and its libraries, this package and its own code,
all read-only, a private ``/tmp`` and home, and what the harness lent it (a working copy of the
workspace at ``/workspace``, its LLM gateway's socket folder at ``/run/fmlbench``: see ``lent``); not the
run directory, not the task (its ``harness/`` and private data), not the checkout, not the network, not
the harness's processes or environment. Where bubblewrap and the kernel allow, it can make no user
namespace, runs under a seccomp filter and is not uid 0 (``isolation.hardening``; its log's first line
says which of these are on).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from .. import isolation
from .. import scratch
from ..executor import CappedLog, die_with_harness, scrubbed_env, tail
from ..isolation import limits

# more output than this is a flood: the agent is stopped (the log keeps its head and tail either way)
OUTPUT_LIMIT_BYTES = 64 << 20
DEFAULT_MAX_PROCESSES = 1024
_DEFAULT_MEMORY_CAP = 4 << 30
# variables the agent's process gets on top of an experiment's allowlist: its code encoder's choice
_AGENT_ENV = ("FMLBENCH_ENCODER", "FMLBENCH_GRAPHCODEBERT")
_GRAPHCODEBERT_CACHE = "models--microsoft--graphcodebert-base"


@dataclass(frozen=True)
class AgentLimits:
    """An agent process's limits; None picks the default."""

    timeout_s: float | None = None   # its own wall-clock time (see host.own_time_budget)
    memory_mb: int | None = None     # min(4 GiB, an experiment's default)
    max_processes: int = DEFAULT_MAX_PROCESSES

    def memory_bytes(self) -> int:
        if self.memory_mb:
            return self.memory_mb << 20
        return min(_DEFAULT_MEMORY_CAP, limits.default_memory_bytes())


class AgentProcess:
    """One agent process and the harness's end of its socket."""

    def __init__(self, mode: str, *, sandboxed: bool, code: list[Path], hidden: list[Path],
                 hide_data: tuple[str, ...], agent_limits: AgentLimits, log_path: Path,
                 lent: tuple[isolation.Bind, ...] = ()):
        self.sandboxed = sandboxed
        self.limits = agent_limits
        self.flooded = False
        self._tripped: str | None = None
        self._scratch: str | None = None
        self._lent = lent
        # the descriptors bubblewrap reads the sandbox's extra measures from, held until it has started
        self._hardened: isolation.hardening.AgentHardening | None = None
        self.group = self._group()
        self.conn, theirs = socket.socketpair()
        command = [sys.executable, "-s", "-B", "-m", "pytest_fmlbench.agent_host.child", mode, str(theirs.fileno())]
        try:
            argv, env, cwd = self._wrap(command, code, hidden, hide_data)
        except BaseException:
            self._discard(theirs)
            raise
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = log_path
        header = f": bwrap; {self._hardened.measures.summary()}" if self._hardened is not None else ""
        self._sink = CappedLog(log_path, f"[agent process{header}]\n".encode())
        self._written = 0

        def before_exec() -> None:
            die_with_harness()
            # the agent's process is the harness's to stop (SIGKILL, or with the harness): a SIGTERM meant for
            # the whole job (scancel, a scheduler) leaves it running, as it leaves the harness running under
            # submitit, until the job's SIGKILL ends both; the agent's process takes over with a handler
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if self.group is not None:
                self.group.enter()

        try:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT,
                                         pass_fds=(theirs.fileno(), *(self._hardened.fds if self._hardened else ())),
                                         start_new_session=True, preexec_fn=before_exec)
        except (OSError, subprocess.SubprocessError) as exc:
            self._discard(theirs)
            raise isolation.SandboxUnavailable(f"the agent's process could not start: {exc}") from None
        theirs.close()
        self._release_hardening()
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    # -- set-up -----------------------------------------------------------------------------------
    def _group(self) -> limits.StepGroup | None:
        spec = limits.LimitSpec(self.limits.memory_bytes(), self.limits.max_processes)
        try:
            return limits.create(spec)
        except limits.LimitsUnavailable:
            if self.sandboxed:
                raise
            return None  # --no-sandbox on a machine without limits: the run is marked unsandboxed anyway

    def _wrap(self, command: list[str], code: list[Path], hidden: list[Path],
              hide_data: tuple[str, ...]) -> tuple[list[str], dict[str, str], str]:
        extra = {name: os.environ[name] for name in _AGENT_ENV if os.environ.get(name)}
        if not self.sandboxed:
            self._scratch = scratch.mkdtemp(prefix="agent-")
            env = scrubbed_env({**extra, "TMPDIR": self._scratch})
            # the harness's own copy of this package first, whichever way the harness imported it
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_package_root()), env.get("PYTHONPATH")]))
            return command, env, self._scratch
        exposed = [str(c) for c in code if any(_under(h, c) for h in hidden)]
        if exposed:
            raise isolation.SandboxUnavailable(
                f"the agent's code folder {exposed[0]} holds the task or the run records, which its sandbox must "
                "hide; keep the agent's code in a file or package of its own")
        # the encoder's weights, wherever the user keeps them, read-only (or the file of one's own encoder)
        shown = list(code) + [Path(v) for v in extra.values() if os.path.isdir(v)]
        plugged = extra.get("FMLBENCH_ENCODER", "").rpartition(":")[0]
        if plugged.endswith(".py") and os.path.isfile(plugged):
            shown.append(Path(plugged))
        models = _encoder_caches()
        if models:
            shown += models
            extra["HF_HUB_CACHE"] = str(models[0].parent)
        view = isolation.AgentView(code=shown, hidden=hidden, hide_data=hide_data, lent=self._lent)
        env = {**isolation.sandbox_env(scrubbed_env()), **extra}
        self._hardened = isolation.hardening.prepare()
        return isolation.agent_argv(view, command, self._hardened), env, "/"

    def _release_hardening(self) -> None:
        if self._hardened is not None:
            self._hardened.close()

    # -- while it runs ----------------------------------------------------------------------------
    def _drain(self) -> None:
        for chunk in iter(lambda: self.proc.stdout.read1(1 << 16), b""):
            self._written += len(chunk)
            self._sink.feed(chunk)
            if self._written > OUTPUT_LIMIT_BYTES and not self.flooded:
                self.flooded = True
                self.kill()

    def poll(self) -> int | None:
        return self.proc.poll()

    def limit(self) -> str | None:
        """The limit the process hit ('out of memory', 'too many processes'), if any; kept after ``close``."""
        if self._tripped is None and self.group is not None:
            self._tripped = self.group.tripped()
        return self._tripped

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.group is not None:
            self.group.kill_all(signal.SIGKILL)

    def close(self, grace_s: float = 5.0) -> None:
        """Wait up to ``grace_s`` for it to exit, then kill whatever is left of it; idempotent."""
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.proc.wait()
        self.conn.close()
        if self.group is not None:
            self.limit()
            self.group.close()
            self.group = None
        self._reader.join(timeout=5.0)
        self._sink.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def exit_description(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "still running"
        if self.sandboxed and code > 128:
            code = 128 - code  # bwrap's exit status for a child killed by a signal
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def output_tail(self, chars: int = 1500) -> str:
        """The end of its output; complete once ``close`` has run."""
        return tail(self.log_path, chars)

    def _discard(self, theirs: socket.socket) -> None:
        theirs.close()
        self.conn.close()
        self._release_hardening()
        if self.group is not None:
            self.group.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)


def _package_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _under(path: Path | str, folder: Path | str) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _encoder_caches() -> list[Path]:
    """GraphCodeBERT's folder in the Hugging Face cache, if it is there: the one part of the cache an agent
    with a code encoder (adaptive-search) sees, so that it picks the same encoder as outside a sandbox."""
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")
    folder = Path(hub) / _GRAPHCODEBERT_CACHE
    return [folder] if folder.is_dir() else []
