"""Serving: one fork per command. The parent's loop (``_main``, ``_serve``) reads a request on the
control socket, hands it to a spare child forked while idle (or forks one), and reports a plain
command's exit; ``_child`` is the forked child up to the command's process.

A part of the warm parent's program (see ``__init__``): compiled into one namespace with the others, never
imported.
"""

import os
import sys
import json
import select
import signal
import socket

_CONTROL = int(sys.argv[1])


class _Job:
    """What a child runs once it is the command's process: returned to the top level of the script,
    so that the command's exceptions and exit reach the interpreter as a script's would. It holds no
    reference to the script's namespace: at exit the interpreter must find the command's objects only
    in ``sys.modules["__main__"]``, which it clears (flushing a file left open, running __del__)."""

    def __init__(self, source, filename, code=None):
        self.source = source
        self.filename = filename
        self.code = code  # the source compiled ahead, or None


def _serve(control, dispositions, made):
    poller = select.poll()
    poller.register(control.fileno(), select.POLLIN)
    # pidfd -> (pid, status fd the parent reports the exit on or None, whether it waits for its request's
    # "go": a step built ahead, which runs nothing until then)
    children = {}
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    parent = os.getpid()
    # the next command's process, forked while this parent is idle so that a request costs no fork:
    # (pid, the socket its request goes to). It is a fork of this same image, made before the request
    # as any fork is, and it has done nothing but wait for it. It is forked once no command of this
    # parent runs: the harness sends one command at a time, so the next request comes after that, and
    # a fork (some 10 ms of CPU copying this image's page tables) made while a command starts or ends
    # competes with it for the CPU
    spare = None
    # pid -> os.wait4's answer, for children of ours reaped along with the memory keepers
    reaped = {}
    while True:
        running = any(not ahead for _, _, ahead in children.values())
        events = poller.poll(None if spare is not None or running else 0)
        if not events:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            pid = os.fork()
            if pid == 0:
                ours.close()
                poller = None
                children = None
                return _spare(theirs, control, dispositions, made, last_cap, parent)
            theirs.close()
            spare = (pid, ours)
            continue
        for fd, _ in events:
            if fd != control.fileno():
                pid, status, _ = children.pop(fd)
                poller.unregister(fd)
                os.close(fd)
                _, wait_status, usage = reaped.pop(pid, None) or os.wait4(pid, 0)
                # a plain command's memory keeper is this parent's child: those killed before are
                # reaped by the time the next command's exit is reported
                ours = {known for known, _, _ in children.values()} | ({spare[0]} if spare is not None else set())
                while True:
                    try:
                        ended = os.wait4(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if not ended[0]:
                        break
                    if ended[0] in ours:
                        reaped[ended[0]] = ended
                if status is not None:
                    # a plain command (one the parent reports on): its memory keeper and whatever else
                    # it left in its process group, which the harness kills next anyway
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except OSError:
                        pass
                    _report(status, _exit_line(wait_status, usage))
                    os.close(status)
                continue
            try:
                message, fds, _, _ = socket.recv_fds(control, 1 << 20, 8)
            except ConnectionResetError:
                message, fds = b"", []
            if not message:
                os._exit(0)  # the harness is gone
            request = json.loads(message)
            stdout, stderr, status, *more = fds
            pid = None
            if spare is not None:
                pid, channel = spare
                spare = None
                try:
                    socket.send_fds(channel, [message], fds)
                except OSError:
                    reaped.pop(pid, None) or os.waitpid(pid, 0)  # it was killed while waiting: fork afresh
                    pid = None
                channel.close()
            if pid is None:
                pid = os.fork()
                if pid == 0:
                    poller = None
                    pidfds = list(children)
                    children = None
                    return _child(request, stdout, stderr, status, control, pidfds, dispositions, made, last_cap,
                                  parent, *_go_and_start(request, more))
            pidfd = os.pidfd_open(pid)
            control.send(json.dumps({"pid": pid}).encode())
            for fd in (stdout, stderr, *more):
                os.close(fd)
            if request["mode"] == "sandbox":
                # the child reports its own exit: nothing the command chose ever comes back to this process
                os.close(status)
                status = None
            children[pidfd] = (pid, status, bool(request.get("ahead")))
            poller.register(pidfd, select.POLLIN)


def _spare(channel, control, dispositions, made, last_cap, parent):
    """In a forked child: wait for the request it will serve."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the line above
        control.close()
        # what the parent held when it forked: the other commands' pidfds and status pipes (while a
        # copy of a status pipe is open, its reader sees no end)
        _close_all_but((channel.fileno(),))
        message, fds, _, _ = socket.recv_fds(channel, 1 << 20, 8)
    except BaseException:  # noqa: BLE001 - no request came: nothing to do
        os._exit(1)
    channel.close()
    if not message:
        os._exit(0)
    stdout, stderr, status, *more = fds
    request = json.loads(message)
    return _child(request, stdout, stderr, status, None, [], dispositions, made, last_cap, parent,
                  *_go_and_start(request, more))


def _go_and_start(request, more):
    """The go pipe (sandbox mode) and the start pipe (a command built ahead: the last one), or None."""
    start = more[-1] if request.get("ahead") else None
    go = more[0] if request["mode"] == "sandbox" else None
    return go, start


def _exit_line(wait_status, usage):
    return (f"exit {os.waitstatus_to_exitcode(wait_status)} {usage.ru_utime:.6f} {usage.ru_stime:.6f} "
            f"{usage.ru_minflt}")


def _report(fd, line):
    try:
        os.write(fd, (line + "\n").encode())
    except OSError:
        pass  # the harness stopped listening: it has killed the step


def _child(request, stdout, stderr, status, control, pidfds, dispositions, made, last_cap, parent, go=None,
           start=None):
    """In the forked child: become the command (plain mode), or enter the step's sandbox first.

    Whatever goes wrong before the command's script starts is reported as ``failed`` and ends the
    child: the harness then runs the command cold, so a fault of this mechanism never becomes the
    command's failure.
    """
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)  # the parent died before the line above
        if control is not None:
            control.close()
        for fd in pidfds:
            os.close(fd)
        os.setsid()
        _join_limits(request)
        _Ending.grouped, _Ending.tasks_max = bool(request.get("cgroup_procs")), request.get("tasks_max")
        if request["mode"] == "sandbox":
            _enter_sandbox(request, stdout, stderr, status, last_cap, go, start)  # returns in the command's process only
            _Ending.sandboxed = True
            for path, mode in made:
                try:
                    os.mkdir(path, mode)
                except FileExistsError:
                    pass
        return _become(request, stdout, stderr, status, dispositions, start)
    except BaseException as exc:  # noqa: BLE001 - anything before the script starts is the mechanism's
        _report(status, f"failed {type(exc).__name__}: {exc}"[:500].replace("\n", " "))
        os._exit(0)


def _main():
    # the children's memory is a copy of this process: no one else may read or trace it
    _prctl(PR_SET_DUMPABLE, 0)
    control = socket.socket(fileno=_CONTROL)
    dispositions, made = _start(control)
    return _serve(control, dispositions, made)
