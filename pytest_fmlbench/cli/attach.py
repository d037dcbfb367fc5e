"""``fmlbench attach [TASK]``: a terminal on the shell of a run of ``--agent=human`` that waits for a person.

Runs tmux's client, on a terminal of its own relayed to the person's, against the session's server inside
the run's sandbox (see ``agentkit.human_sessions``);
detaching (C-b d, or ``fmlbench-detach`` in the shell) leaves the shell as it is, and attaching again
resumes it. Works from any terminal of the machine's user who runs the benchmark, also over SSH and
from inside tmux.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shutil
import signal
import sys
import termios
import tty


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", nargs="?", help="the task's id, or part of it (needed where several sessions wait)")
    parser.add_argument("--list", action="store_true", help="list the sessions that wait, and attach to none")
    parser.add_argument("--pick", type=int, metavar="N", help="the Nth of the matching sessions, as --list numbers them")
    parser.add_argument("--pid", type=int, metavar="PID", help="the session whose tmux server has this process id "
                        "(as --list shows it)")


def run(args: argparse.Namespace) -> int:
    from ..agentkit.human_sessions import attach_argv, describe, find_sessions, matching

    found = [s for s in matching(find_sessions(), args.task) if args.pid is None or s.pid == args.pid]
    if args.list:
        print(describe(found) if found else "no human session waits on this machine")
        return 0
    if not found:
        wanted = f" for {args.task!r}" if args.task else ""
        print(f"fmlbench attach: no human session{wanted} waits on this machine (a run of pytest --agent=human "
              "starts one; sessions of another user cannot be entered)", file=sys.stderr)
        return 1
    if args.pick is not None:
        if not 1 <= args.pick <= len(found):
            print(f"fmlbench attach: --pick {args.pick}: there are {len(found)} sessions:\n{describe(found)}",
                  file=sys.stderr)
            return 2
        found = [found[args.pick - 1]]
    if len(found) > 1:
        print(f"fmlbench attach: {len(found)} sessions match; pick one with --pick N:\n{describe(found)}",
              file=sys.stderr)
        return 2
    tmux = shutil.which("tmux")
    if tmux is None:
        print("fmlbench attach: tmux is not installed here (Debian/Ubuntu: apt-get install tmux)", file=sys.stderr)
        return 1
    argv, folder = attach_argv(found[0], tmux)
    # the client may run inside the person's own tmux: theirs is another server
    env = {name: value for name, value in os.environ.items() if name != "TMUX"}
    return relay(argv, env, folder)


def relay(argv: list[str], env: dict[str, str], cwd: str | None) -> int:
    """Runs ``argv`` on a terminal of its own, relayed to this one; returns its exit status.

    tmux's client hands its terminal to the server, which lives in the sandbox: this way what it hands over
    is a terminal that dies with this command, never the person's own, which a process left in the sandbox
    could otherwise go on reading (the keys typed after detaching) and writing.
    """
    pid, master = pty.fork()
    if pid == 0:  # the child: the client, on the new terminal
        try:
            if cwd is not None:
                os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    stdin = sys.stdin.fileno()
    interactive = os.isatty(stdin)

    def same_size(*_: object) -> None:
        if interactive:
            fcntl.ioctl(master, termios.TIOCSWINSZ, fcntl.ioctl(stdin, termios.TIOCGWINSZ, b"\0" * 8))

    same_size()
    saved = termios.tcgetattr(stdin) if interactive else None
    previous = signal.signal(signal.SIGWINCH, same_size)
    try:
        if interactive:
            tty.setraw(stdin)
        _copy(stdin, master)
    finally:
        signal.signal(signal.SIGWINCH, previous)
        if saved is not None:
            termios.tcsetattr(stdin, termios.TCSAFLUSH, saved)
        os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _copy(stdin: int, master: int) -> None:
    """Keys to the client's terminal, its output to this one, until the client is gone."""
    stdout = sys.stdout.fileno()
    reading = [stdin, master]
    while True:
        try:
            ready, _, _ = select.select(reading, [], [])
        except InterruptedError:  # a resize
            continue
        if master in ready:
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # the client exited: its terminal hangs up
                return
            if not data:
                return
            while data:
                data = data[os.write(stdout, data):]
        if stdin in ready:
            data = os.read(stdin, 1 << 16)
            if not data:  # no more input (not a terminal): the client goes on until it ends
                reading.remove(stdin)
                continue
            while data:
                data = data[os.write(master, data):]


COMMAND = ("attach", "a terminal on the shell of a human baseline run (pytest --agent=human) that waits for a person",
           add_arguments, run)
