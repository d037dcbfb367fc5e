"""The person's shell for ``--agent=human``: a tmux server inside the agent's own sandbox.

Why tmux, and not a shell behind a socket of our own: a person detaches and attaches again (from another
terminal, over SSH, from inside their own tmux) and finds the same screen, scrollback and running
programs; tmux keeps all of that in its server, which lives in the sandbox beside the shell, while the
``fmlbench attach`` client on the host only relays the terminal. A killed terminal kills that client,
never the server, the shell or a step it started. tmux's client and server are one binary (``/usr`` is
bound read-only into the sandbox), so their protocol versions always match.

What is recorded, without touching the person's keystrokes:

* commands: bash's ``PROMPT_COMMAND`` appends each finished command (its history entry, the time it was
  entered and its exit status) to a log in the sandbox's private ``/tmp``;
* output: ``pipe-pane`` copies what the shell's pane prints into a FIFO the driver reads (escape
  sequences removed; capped per step by the transcript);
* active time: tmux's ``session_activity`` (the last key press of any attached client), read every
  ``POLL_S`` seconds; see ``ActiveTime`` for the rule.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

SESSION = "human"
SOCKET_NAME = "fmlbench-human.sock"
BEACON_NAME = "fmlbench-human.json"
COMMAND_LOG = "commands.log"
OUTPUT_FIFO = "output.fifo"
POLL_S = 1.0
DEFAULT_IDLE_GAP_S = 300.0
# output kept between two takes: the head and the tail of this many characters each
OUTPUT_KEEP_CHARS = 32_000
_COMMAND_LOG_READ_BYTES = 1 << 20
_TMUX_TIMEOUT_S = 10.0
_RECORD_SEPARATOR = "\x1e"
# CSI and OSC sequences, other two-character escapes, then control characters but tab and newline
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x08\x0b-\x1f\x7f]")
_HISTORY_ENTRY = re.compile(r"^\s*(\d+)\*?\s+(\d+) (.*)$", re.DOTALL)


def idle_rule(idle_gap_s: float) -> str:
    return (f"active time: the time between consecutive key presses in the shell (tmux's session activity, read "
            f"every {POLL_S:g} s), each gap counted in full up to {idle_gap_s:g} s; a longer gap is idle and counts "
            "nothing")


@dataclass
class ActiveTime:
    """The person's active time from the times of their key presses (see ``idle_rule``)."""

    idle_gap_s: float = DEFAULT_IDLE_GAP_S
    active_s: float = 0.0
    last: float | None = None

    def saw(self, when: float) -> None:
        if self.last is not None and when > self.last:
            gap = when - self.last
            if gap <= self.idle_gap_s:
                self.active_s += gap
        if self.last is None or when > self.last:
            self.last = when


def clean_output(raw: str) -> str:
    """Terminal output as text: escape sequences and control characters removed, a line overwritten by a
    carriage return kept as it was last drawn."""
    text = raw.replace("\r\n", "\n")
    lines = []
    for line in text.split("\n"):
        if "\r" in line:
            line = line.rsplit("\r", 1)[-1] or line.replace("\r", "")
        lines.append(_ESCAPES.sub("", line))
    return "\n".join(lines)


def parse_command_log(text: str) -> list[dict]:
    """The commands the shell's ``PROMPT_COMMAND`` logged: one record per finished command."""
    commands = []
    for record in text.split(_RECORD_SEPARATOR)[1:]:
        head, _, entry = record.partition("\n")
        parts = head.split()
        match = _HISTORY_ENTRY.match(entry.rstrip("\n"))
        if len(parts) != 2 or match is None:
            continue
        try:
            exit_code, ended = int(parts[0]), int(parts[1])
        except ValueError:
            continue
        commands.append({"type": "command", "command": match.group(3), "history": int(match.group(1)),
                         "entered": int(match.group(2)), "ended": ended, "exit_code": exit_code})
    return commands


# the person's shell: records each command at the next prompt, and starts in the working copy. Bash reads its
# history file after this one: a new shell's first prompt records the command that ended the one before (its
# exit), which that shell had no prompt left to record
_BASHRC = r"""
[ -r /etc/bash.bashrc ] && . /etc/bash.bashrc
export HISTCONTROL= HISTIGNORE= HISTTIMEFORMAT='%s ' HISTFILE="$HOME/.bash_history"
PS1='[fmlbench \W]\$ '
__fmlbench_record() {
  local code=$? entry
  entry=$(HISTTIMEFORMAT='%s ' builtin history 1)
  if [ -n "$entry" ] && [ "$entry" != "$__fmlbench_seen" ]; then
    __fmlbench_seen=$entry
    printf '\036%s %s\n%s\n' "$code" "$EPOCHSECONDS" "$entry" >> "$FMLBENCH_COMMAND_LOG"
  fi
  return $code
}
__fmlbench_seen=$(HISTTIMEFORMAT='%s ' builtin history 1)
PROMPT_COMMAND=__fmlbench_record
cd "$FMLBENCH_WORKDIR"
cat "$FMLBENCH_BANNER"
"""


@dataclass
class _Output:
    """What the pane printed since the last take: its head and its tail, OUTPUT_KEEP_CHARS each."""

    head: str = ""
    tail: str = ""
    cut: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, text: str) -> None:
        with self.lock:
            room = OUTPUT_KEEP_CHARS - len(self.head)
            if room > 0 and not self.tail:
                self.head += text[:room]
                text = text[room:]
            self.tail += text
            if len(self.tail) > OUTPUT_KEEP_CHARS:
                self.cut += len(self.tail) - OUTPUT_KEEP_CHARS
                self.tail = self.tail[-OUTPUT_KEEP_CHARS:]

    def take(self) -> str:
        with self.lock:
            head, tail, cut = self.head, self.tail, self.cut
            self.head, self.tail, self.cut = "", "", 0
        middle = f"\n[... {cut} characters of output left out ...]\n" if cut else ""
        return clean_output(head + middle + tail)


class Terminal:
    """The tmux server (``tmux -D``, a child of the driver) and the person's shell in it."""

    def __init__(self, binary: str, folder: Path, env: dict[str, str], workdir: Path, banner: str):
        self.binary = binary
        self.folder = folder
        self.socket = folder / SOCKET_NAME
        self.beacon = folder / BEACON_NAME
        self.command_log = folder / COMMAND_LOG
        self.fifo = folder / OUTPUT_FIFO
        self._log_offset = 0
        self._output = _Output()
        self._stop = threading.Event()
        self._server: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._fifo_fd: int | None = None
        (folder / "banner.txt").write_text(banner)
        (folder / "bashrc").write_text(_BASHRC)
        self.command_log.touch()
        self.env = {**env, "FMLBENCH_COMMAND_LOG": str(self.command_log), "FMLBENCH_WORKDIR": str(workdir),
                    "FMLBENCH_BANNER": str(folder / "banner.txt"), "SHELL": "/bin/bash"}
        self.env.setdefault("TERM", "xterm-256color")
        self.env.pop("TMUX", None)

    def _settings(self) -> list[list[str]]:
        """tmux commands run once its server is up, each as its arguments (no configuration file to quote)."""
        bash = f"/bin/bash --rcfile {shlex.quote(str(self.folder / 'bashrc'))} -i"
        # exiting the shell starts a new one in the same pane: the session ends only with fmlbench-submit or the
        # budget. A loop, not tmux's respawn of a dead pane: the pane, its output pipe and the attached clients'
        # view of it never go away (a respawned pane's output was seen lost, or not redrawn)
        shell = f"exec /bin/sh -c {shlex.quote(f'while :; do {bash}; done')}"
        return [
            ["set", "-g", "default-command", shell],
            ["set", "-g", "history-limit", "20000"],
            # the person's terminal's variables (an SSH agent's socket, a display) stay outside the sandbox
            ["set", "-g", "update-environment", ""],
            ["set", "-g", "status-interval", "5"],
            ["set", "-g", "status-right-length", "120"],
            ["set", "-g", "status-right", "fmlbench"],
        ]

    # -- start and stop ----------------------------------------------------------------------------
    def start(self, width: int = 80, height: int = 24) -> None:
        # small: a terminal that attaches grows the window, and growing it pushes no line out of sight
        os.mkfifo(self.fifo, 0o600)
        # read and write: the FIFO never reports an end while the pane's writer comes and goes
        self._fifo_fd = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)
        self._reader = threading.Thread(target=self._read_output, name="human-output", daemon=True)
        self._reader.start()
        self._server = subprocess.Popen([self.binary, "-D", "-S", str(self.socket), "-f", "/dev/null"],
                                        env=self.env, cwd=self.env["FMLBENCH_WORKDIR"], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + _TMUX_TIMEOUT_S
        while not self.socket.exists():
            if self._server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"tmux did not start its server (exit status {self._server.poll()})")
            time.sleep(0.05)
        for setting in self._settings():
            self.tmux(*setting)
        self.tmux("new-session", "-d", "-s", SESSION, "-x", str(width), "-y", str(height),
                  "-c", self.env["FMLBENCH_WORKDIR"])
        self.tmux("pipe-pane", "-t", SESSION, self._pipe_command())

    def alive(self) -> bool:
        return self._server is not None and self._server.poll() is None

    def stop(self) -> int | None:
        """Ends the server, the shell and everything the shell started; returns the server's exit status."""
        if self._server is not None and self._server.poll() is None:
            self.tmux("kill-server", check=False)
            try:
                self._server.wait(timeout=_TMUX_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
        self._stop.set()
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        if self._fifo_fd is not None:
            os.close(self._fifo_fd)
            self._fifo_fd = None
        return None if self._server is None else self._server.returncode

    def tmux(self, *args: str, check: bool = True) -> str:
        """One tmux command on the session's server; its output. Raises RuntimeError (one line) where it fails
        and ``check``; returns "" where it fails otherwise."""
        try:
            done = subprocess.run([self.binary, "-S", str(self.socket), *args], env=self.env, capture_output=True,
                                  text=True, timeout=_TMUX_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            if check:
                raise RuntimeError(f"tmux {args[0]}: {exc}") from None
            return ""
        if check and done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip() or done.returncode}")
        return done.stdout

    # -- what the driver reads -------------------------------------------------------------------------
    def last_key_press(self) -> float | None:
        """When a client last pressed a key in the session (seconds since the epoch), or None. Also pipes the
        pane's output again where its pipe is gone: its ``cat`` runs as the person does, who may end it."""
        text = self.tmux("display-message", "-p", "-t", SESSION, "#{session_activity} #{pane_pipe}", check=False).split()
        if text[1:] == ["0"]:
            self.tmux("pipe-pane", "-t", SESSION, self._pipe_command(), check=False)
        return float(text[0]) if text and text[0].isdigit() else None

    def _pipe_command(self) -> str:
        return f"cat >> {shlex.quote(str(self.fifo))}"

    def new_commands(self) -> list[dict]:
        try:
            with open(self.command_log, "rb") as log:
                log.seek(self._log_offset)
                data = log.read(_COMMAND_LOG_READ_BYTES)
        except OSError:
            return []
        # a record is complete once the next one starts, or at the end of a write (its newline)
        end = data.rfind(b"\n" + _RECORD_SEPARATOR.encode())
        complete = data if data.endswith(b"\n") else data[:end + 1] if end >= 0 else b""
        self._log_offset += len(complete)
        return parse_command_log(complete.decode(errors="replace"))

    def take_output(self) -> str:
        return self._output.take()

    def say(self, text: str) -> None:
        """A message on every attached client's status line."""
        self.tmux("display-message", "-d", "8000", text, check=False)

    def set_status(self, text: str) -> None:
        self.tmux("set", "-g", "status-right", text.replace("#", "##"), check=False)

    def _read_output(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._fifo_fd], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(self._fifo_fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                return
            self._output.add(chunk.decode(errors="replace"))

