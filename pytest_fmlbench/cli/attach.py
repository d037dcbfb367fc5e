"""``fmlbench attach [TASK]``: a terminal on the shell of a run of ``--agent=human`` that waits for a person.

Runs tmux's client on the session's server inside the run's sandbox (see ``agentkit.human_sessions``);
detaching (C-b d, or ``fmlbench-detach`` in the shell) leaves the shell as it is, and attaching again
resumes it. Works from any terminal of the machine's user who runs the benchmark, also over SSH and
from inside tmux.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", nargs="?", help="the task's id, or part of it (needed where several sessions wait)")
    parser.add_argument("--list", action="store_true", help="list the sessions that wait, and attach to none")
    parser.add_argument("--pick", type=int, metavar="N", help="the Nth of the matching sessions, as --list numbers them")


def run(args: argparse.Namespace) -> int:
    from ..agentkit.human_sessions import attach_argv, describe, find_sessions, matching

    found = matching(find_sessions(), args.task)
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
    if folder is not None:
        os.chdir(folder)
    os.execve(tmux, argv, env)
    return 1  # not reached


COMMAND = ("attach", "a terminal on the shell of a human baseline run (pytest --agent=human) that waits for a person",
           add_arguments, run)
