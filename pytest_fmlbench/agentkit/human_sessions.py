"""Finding the human sessions that wait on this machine, for ``fmlbench attach``.

Each ``--agent=human`` run keeps a tmux server (``tmux -D -S .../fmlbench-human.sock``) in its agent's
sandbox, and a beacon (task, steps, start) beside the socket, both in the sandbox's private ``/tmp``.
From the host they are reached through ``/proc/PID/root`` of that server: only by the user the run
belongs to, as the kernel allows a process's root to be entered only by who may inspect it (and only the
processes of the user who attaches are looked at, root's included). Nothing of the sandbox is made
visible for this.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .human_terminal import BEACON_NAME, SESSION, SOCKET_NAME

MAX_BEACON_BYTES = 64 << 10
# a UNIX socket's path must fit sockaddr_un (108 bytes with its terminating NUL)
MAX_SOCKET_PATH = 107


class Beacon(BaseModel):
    task: str
    steps_total: int
    started: float
    wall_clock_s: float
    socket: str


@dataclass(frozen=True)
class HumanSession:
    pid: int            # the session's tmux server, as the host numbers it
    beacon: Beacon
    socket: str         # its socket, as the host reaches it

    @property
    def label(self) -> str:
        return f"{self.beacon.task} (tmux server pid {self.pid})"


def _tmux_socket(cmdline: list[str]) -> str | None:
    """The socket of a human session's tmux server, from its command line; None for any other process."""
    if not cmdline or os.path.basename(cmdline[0]) != "tmux" or "-D" not in cmdline or "-S" not in cmdline:
        return None
    at = cmdline.index("-S") + 1
    if at >= len(cmdline) or os.path.basename(cmdline[at]) != SOCKET_NAME:
        return None
    return cmdline[at]


def find_sessions(proc: Path = Path("/proc")) -> list[HumanSession]:
    sessions = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != os.getuid():
                continue  # another user's: never a session of ours, whatever its command line says
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            inside = _tmux_socket([part.decode(errors="replace") for part in cmdline if part])
            if inside is None:
                continue
            root = entry / "root"
            beacon_path = Path(str(root) + os.path.join(os.path.dirname(inside), BEACON_NAME))
            with open(beacon_path, "rb") as file:
                beacon = Beacon.model_validate_json(file.read(MAX_BEACON_BYTES))
        except (OSError, ValidationError, ValueError):
            continue  # not ours to enter, gone since, or still starting
        sessions.append(HumanSession(int(entry.name), beacon, str(root) + inside))
    return sorted(sessions, key=lambda s: s.beacon.started)


def matching(sessions: list[HumanSession], selector: str | None) -> list[HumanSession]:
    """Sessions whose task is ``selector`` or contains it (all of them without one)."""
    if not selector:
        return sessions
    exact = [s for s in sessions if s.beacon.task == selector]
    return exact or [s for s in sessions if selector in s.beacon.task]


def attach_argv(session: HumanSession, tmux: str = "tmux") -> tuple[list[str], str | None]:
    """The tmux client's command, and the folder to run it from where the socket's path is too long."""
    if len(session.socket.encode()) <= MAX_SOCKET_PATH:
        return [tmux, "-S", session.socket, "attach-session", "-t", SESSION], None
    # from the socket's own folder, its name alone is short enough
    return [tmux, "-S", SOCKET_NAME, "attach-session", "-t", SESSION], os.path.dirname(session.socket)


def describe(sessions: list[HumanSession]) -> str:
    return "\n".join(f"  {n}. {s.label}, {s.beacon.steps_total} steps" for n, s in enumerate(sessions, 1))


def beacon_json(task: str, steps_total: int, started: float, wall_clock_s: float, socket: str) -> str:
    return json.dumps(Beacon(task=task, steps_total=steps_total, started=started, wall_clock_s=wall_clock_s,
                             socket=socket).model_dump())
