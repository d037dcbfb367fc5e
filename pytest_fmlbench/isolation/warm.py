"""Warm interpreters: a step costs its compute, not Python's start-up.

Importing numpy, pandas, scikit-learn and fairlearn takes seconds; forking a process that holds them
takes milliseconds. Each run keeps two *warm parents* (``warm_parent.py``): one for its experiments and
one for its harness commands (prepare, evaluate). Each is an interpreter started with exactly the
environment and flags its commands get, that imported the task's heavy libraries and nothing else (no
task or agent code, not even this package), and that forks one child per command (while idle, ahead of
the request, so that a request costs no fork). A child is never reused: every command starts from the
same clean image.

What an experiment sees stays what it sees without warm starts
--------------------------------------------------------------
The harness builds every step's bubblewrap sandbox exactly as before, with the same arguments (binds,
masks, tmpfs for ``/tmp``, ``$HOME``, ``/dev/shm``, no network, the same user namespace), except that
its command is a holder (``sh`` waiting on a pipe). A child of the warm parent then

1. joins the step's control group (its memory and process limits) or applies the rlimits;
2. joins the sandbox's user, mount, IPC, UTS and network namespaces (``setns``), the holder is let go;
3. unshares a private copy of the mounts, a new PID namespace and a cgroup namespace rooted at the
   step's group, and forks the namespace's init (pid 1): it mounts a fresh ``/proc`` with bubblewrap's
   read-only covers, drops every capability (bounding and ambient sets too), sets no_new_privs, makes
   itself undumpable and handles no signal (so nothing inside can signal it), then forks the command;
4. the command (pid 2, parent 1, in the init's session, as bubblewrap runs it) closes every inherited
   descriptor, takes the step's stdin/stdout/stderr, working directory, environment, ``sys.argv``,
   ``sys.orig_argv`` and ``sys.path[0]``, shows its own ``/proc/self/cmdline`` and ``environ`` (and the
   init shows bubblewrap's), reseeds numpy's global generator (Python's own reseeds itself at fork),
   and runs the script as ``__main__`` at the top level of the interpreter, so its traceback, exit
   code, atexit handlers and thread joins are a script's. The task's editable modules are imported
   fresh: the parent never imported them. The command then ends as a script does: after its atexit
   handlers, where nothing the interpreter's teardown would still do could be seen (no finalizer left
   to run, no weak reference to call back, no new library loaded, ...: ``warm_parent._Ending`` lists
   what is checked and why), it calls the C library's ``exit`` at once, since freeing the objects it
   shares with the parent would copy nearly every page of them; otherwise the interpreter finalizes.
   The C library's exit handlers of the parent's libraries are skipped too where a fork of the parent
   saw them release memory and nothing else (``warm_parent._c_exit_handlers_seen``). Such a short
   ending also hands the command's memory to a keeper (``warm_parent._memory_kept_past_the_exit``): a
   process made with that memory (CLONE_VM) and nothing else, no descriptor, every signal blocked,
   waiting in ``pause``. Its exit then releases no memory and is seen at once; the namespace's init
   (or, in plain mode, the parent, by the command's process group) kills the keeper once it has
   reaped the command, and the init reports the step's end once every other process of the namespace
   is reaped or is ending with no descriptor open (a keeper releasing memory runs nothing of its own).
   The release, 15-20 ms of a small task's step, then overlaps what comes next instead of delaying it.
   The keeper is one task more in the step's control group at its very end: none is made where that
   would pass the group's task limit.

Each parent then imports what the libraries it holds (those it was asked for and theirs) import on
their first use (``FIRST_USE_IMPORTS``: torch._dynamo, which torch imports when an optimizer is made,
half a second in every command otherwise; numpy.random). One that fails is left to the command.

What a warm step sees differently, on purpose: the parent's modules are already in ``sys.modules``
(with the warnings filters they installed), the collector's frozen generation holds them (at exit they
are cleared as modules, never collected as cyclic garbage: a weak reference the command hangs on one
may call back where a cold start's collector would drop it unnoticed), OpenBLAS's
thread pool starts at the first BLAS call rather than at import, the memory layout is the parent's
(the same in every step), and the sandbox's init cannot be traced or read (bubblewrap's can).
``tests/test_warm.py`` compares everything else a script can observe, cold against warm.

Nothing a step does reaches a later one: every step gets a fresh sandbox (files in ``/tmp``,
``/dev/shm``, ``$HOME``), a fresh fork (modules, monkeypatches, environment, threads), a PID namespace
whose init takes everything the command left with it (child processes), and a copy-on-write copy of
the parent's memory that it cannot write back. The parent is out of reach: it is in no namespace of
the step (no pid to signal or trace, no ``/proc`` entry), it is undumpable, and it listens only on a
socket pair whose other end the harness alone holds. It never receives anything a step produced: the
child that stays outside the step's PID namespace reports the exit to the harness itself.

Harness commands run from their own warm parent, started with ``-s -E -B`` like them and importing
only what the harness's own code imports (pristine code; never the experiments' parent).

The next command, built ahead of its request
--------------------------------------------
A search repeats the same requests: the same validation command in the same workspace, then the same
evaluator. Once a command has ended, the pool builds the next one like it in a thread, when nothing
else runs or beside the other kind's command (``_BuildTimes``): for an experiment, a fresh bubblewrap
sandbox built with the same arguments, a fresh control group with the same limits, the child that
joins them, the namespace's init and the process that becomes the command, which sets up everything
of the request that is not the script's own (descriptors, working directory, environment,
``sys.argv``, what ``/proc`` shows, numpy's generator seeded afresh), compiles the script (used at go
if the script reads the same then and its compilation warned of nothing, every warning an error
meanwhile) and reports ``ready``. Built while nothing runs, it then copies, while it waits for
``go``, the pages it shares with the parent (present in its private writable mappings; at most a
quarter of the step's memory limit and 1 GiB), so that the command's writes to them cost no copy in
its own time: without this, every first write to a shared page (a reference count, an allocator's
free list) is a copy-on-write fault in the middle of the command. Built beside a running command
(steps that follow one another at once), it copies nothing: that copy, of every page rather than
those the command will write, took a processor from the running command, and was seldom done by go.
Either way, before it reports ``ready``, it copies the pages that an ending writes to (a hundred or
more, each a fault of 10-20 us in the command's ending otherwise): the parent learns them once, from
a fork of itself that ends as an empty script does under a filter that allows nothing but memory and
its report (``warm_parent._pages_an_ending_writes``), never from a command.
When the request comes and matches it exactly (the same request, the
same bubblewrap arguments and limits, and every path bubblewrap binds still the same file or folder,
held open since the build so that a new one cannot take its inode number: one replaced since would
show its old self inside, one removed nothing), the harness says go and the script starts;
otherwise what was built is discarded, unrun, and the request served as above. A run's end discards
what is left. ``out`` is emptied in place between steps (``artifacts.emptied``), not replaced, so
that the sandbox built ahead binds the folder the step uses.

What such a step sees that one built on request does not: its processes, its sandbox and its
``/tmp`` were made earlier (their start and creation times), and its memory is its own copy already.
Nothing of the previous step reaches it: it is built after that step's namespace has ended, from the
same clean parent, and nothing of the command runs before go (the workspace's modules are imported
by the script).

The parent imports on the host, not in a sandbox (a sandboxed parent could not enter the steps'
sandboxes, which are no descendants of its user namespace; bubblewrap inside bubblewrap cannot mount
/proc). So that its imports could not have gone otherwise inside, an audit hook refuses, while they
run, reading an existing file outside the trees the sandbox shows or a hidden data file, listing such
a folder, writing, starting a program from elsewhere than those trees and using the network; module
and mapped files must lie inside the visible trees. In the sandbox's private scratch folders (``/tmp``,
``/var/tmp``, ``/dev/shm``, ``$HOME``) a file may be made if it is gone again when the imports end
(tempfile's check that /tmp is writable), and a folder may be made where its parent exists (torch's
cache folder in /tmp): every child makes it again in its own fresh /tmp, as a cold import would have.
This sees what Python code does, not what a C extension or a program it runs (ctypes.util runs gcc)
does on its own at import, which the harness's evaluators, importing the same libraries outside any
sandbox, do today as well.

When warm starts are not safe, commands start cold, with one line in the log
------------------------------------------------------------------------------
The ready report says what forking could break or leak: a thread that keeps running across a fork
(a library's own pool that stops in its fork handler, as OpenBLAS's does, is fine), a GPU device
mapped (CUDA initialised), a writable shared mapping (children would share it), a descriptor left
open by a library, an import that failed or did something the guard refused. Any of these turns warm
starts off for that parent. A command whose form is not ``{python} script.py ARGS`` starts cold, as
does one whose script's folder holds a module of a name the parent has imported (a cold start would
import the local file instead). A failure of the mechanism itself (before the script's first line)
is retried cold. ``--cold-start`` turns all of it off.
"""

from __future__ import annotations

import ast
import importlib.machinery
import json
import os
import select
import shlex
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from . import mounts, package_data
from .limits import StepGroup, create as create_group

PARENT_SCRIPT = Path(__file__).with_name("warm_parent_main.py")
# where a run's logs say why commands started cold
WARM_LOG = "warm_start.log"
# the command the step's sandbox holds while the child joins it: prints when the sandbox is ready,
# then waits for the harness to close its input (the child has joined by then)
HOLDER = ["/bin/sh", "-c", "echo; read _"]
# a parent's imports may take a while on a loaded machine; beyond this, commands start cold
READY_TIMEOUT_S = 300.0
# from the request to the script's first line: forks, namespaces, mounts
START_TIMEOUT_S = 60.0
# how long a discarded command built ahead may take to end, per line its processes still write
EXIT_GRACE_S = 1.0
# a command built ahead while nothing runs copies at most this much of the parent's memory as its own
# before its request (and at most a quarter of its memory limit)
OWN_PAGES_MAX = 1 << 30
# When a step built ahead is built (see _BuildTimes): once no warm command has run for this long, or
# while another command runs where its kind's last request came after less idleness than this
AHEAD_IDLE_S = 0.025
AHEAD_GAP_S = 0.25
# from a closed parent's exit to the end of its output
LOG_DRAIN_S = 5.0
_MODULE_SUFFIXES = tuple(sorted(set(importlib.machinery.all_suffixes()), key=len, reverse=True))


class _Refused(Exception):
    """This command starts cold; the message says why (one line)."""


# -- what to import ----------------------------------------------------------------------------------


def learn_imports(folder: Path, kit: dict[str, Path] | None = None) -> list[tuple[str, list[str]]]:
    """The installed modules the Python files under ``folder`` import, as ``(module, from-names)``.

    Imports of the folder's own modules, relative imports and the standard library are left out (the
    latter costs little, and the parent must stay close to a fresh interpreter). ``kit`` maps the paths
    a fresh workspace receives from the task kit to their sources: they are the folder's own too. Sorted,
    so that the same files always give the same parent.
    """
    kit = kit or {}
    local = local_module_names(folder) | kit_module_names(kit)
    found: dict[str, set[str]] = {}
    for path in [*sorted(folder.rglob("*.py")), *(kit[rel] for rel in sorted(kit) if rel.endswith(".py"))]:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.name, set())
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.setdefault(node.module, set()).update(a.name for a in node.names if a.name != "*")
    return [(module, sorted(names)) for module, names in sorted(found.items())
            if _wanted(module.partition(".")[0], local)]


def _wanted(top: str, local: set[str]) -> bool:
    return top not in local and top not in sys.stdlib_module_names and top != "__future__"


def local_module_names(folder: Path) -> set[str]:
    """Top-level names a script in ``folder`` imports from ``folder`` itself (its ``sys.path[0]``):
    modules, bytecode, extensions and folders (packages or namespace portions)."""
    names: set[str] = set()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return names
    for entry in entries:
        name = entry.name
        if entry.is_dir():
            if name.isidentifier():
                names.add(name)
            continue
        for suffix in _MODULE_SUFFIXES:
            if name.endswith(suffix) and name[: -len(suffix)].isidentifier():
                names.add(name[: -len(suffix)])
                break
    return names


def kit_module_names(paths) -> set[str]:
    """Top-level names that the workspace paths a task receives from the kit (``task.yaml``'s ``kit``) give
    a script in the workspace: ``encoder.py`` gives ``encoder``, ``pkg/mod.py`` gives ``pkg``."""
    names = set()
    for path in paths:
        first = Path(path).parts[0]
        name = first.removesuffix(".py") if len(Path(path).parts) == 1 else first
        if name.isidentifier():
            names.add(name)
    return names


def declared_imports(modules: list[str]) -> list[tuple[str, list[str]]]:
    return [(module, []) for module in modules]


# what a library imports on its first use rather than at its own import, at a cost every command would
# pay again: torch imports torch._dynamo (some 600 modules, half a second) when an optimizer is made,
# numpy its random module (and the Cython runtime) when it is first named
FIRST_USE_IMPORTS = {"numpy": ("numpy.random",), "torch": ("torch._dynamo",)}


# -- the guard's view: what the sandbox shows ---------------------------------------------------------


@dataclass(frozen=True)
class SandboxTrees:
    """The paths an experiment's sandbox shows read-only (and the data hidden in them), for the guard."""

    read: tuple[str, ...]
    masked: tuple[str, ...]

    def guard(self) -> dict:
        ancestors = {str(parent) for tree in self.read for parent in Path(tree).parents}
        return {"read": list(self.read), "masked": list(self.masked), "ancestors": sorted(ancestors),
                "scratch": ["/tmp", "/var/tmp", "/dev/shm", mounts.SANDBOX_HOME]}


def sandbox_trees(hidden: list[Path], hide_data: tuple[str, ...], gpus: bool) -> SandboxTrees:
    """The system trees, the allowed files of /etc, the interpreter's trees (those the sandbox binds) and
    /proc; the masks of package data. The workspace and ``{out}`` are left out: importing never needs them."""
    hidden_real = [os.path.realpath(h) for h in hidden]

    def shown(real: str) -> bool:
        return not any(h == real or h.startswith(real.rstrip("/") + "/") for h in hidden_real)

    read = {t for t in mounts.SYSTEM_TREES if os.path.exists(t)}
    read |= {os.path.realpath(t) for t in read}
    read |= {f"/etc/{name}" for name in mounts.ETC_ALLOW if os.path.lexists(f"/etc/{name}")}
    read |= {p for p in mounts.python_paths() if shown(p)}
    read |= {spelt for spelt, real in mounts.python_aliases() if shown(real)}
    read |= {"/proc", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
    # this package's install metadata beside a checkout (an editable install writes it there): the
    # sandbox binds the package folder alone, so it misses there; importing libraries that list the
    # installed distributions (pydantic looks for plugins) reads it. Names and entry points, no data.
    package = Path(__file__).resolve().parents[1]
    read |= {str(p) for p in package.parent.glob(f"{package.name}*.*-info") if p.suffix in (".egg-info", ".dist-info")}
    if gpus:
        read |= {"/sys"}
    masks = package_data.masks(hide_data)
    return SandboxTrees(tuple(sorted(read)), tuple(sorted((*masks.folders, *masks.files))))


# -- one warm parent ----------------------------------------------------------------------------------


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
        from ..executor import CappedLog, die_with_harness

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
            raise _Refused("the warm parent did not answer")
        answer = json.loads(reply)
        if "pid" not in answer:
            raise _Refused(f"the warm parent refused: {answer.get('error')}")
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


# -- one command, started warm ------------------------------------------------------------------------


class _StatusLines:
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

    def __init__(self, pid: int, stdout, stderr, status: _StatusLines, holder: _Holder | None,
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


class _Holder:
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
            raise _Refused(f"bubblewrap could not start: {exc}") from None
        finally:
            os.close(info_w)
        self._info = info_r
        self.pid: int | None = None

    def ready(self) -> None:
        """Wait until the sandbox holds its namespaces (its command has started): ``pid`` is then the
        process whose namespaces a child joins. Raises _Refused, the holder reaped, if it did not start."""
        with os.fdopen(self._info, "rb") as info:
            ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
            line = self.proc.stdout.readline() if ready else b""
            if not line:
                self.release()
                if self.proc.poll() is None:
                    self.proc.kill()
                reason = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
                self.reap()
                raise _Refused(f"the step's sandbox did not start ({reason[-1] if reason else 'no message'})")
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


# -- a command built ahead of its request -------------------------------------------------------------


@dataclass(frozen=True)
class _AheadKey:
    """Everything a sandboxed command's request is made of, but its control group's own paths."""

    kind: str
    request: str                     # the request, as JSON with sorted keys
    bwrap: tuple[str, ...]           # the holder's bubblewrap arguments
    limits: tuple | None             # the control group's (LimitSpec, gpus), if it has one


_BINDS = ("--bind", "--ro-bind", "--ro-bind-try", "--dev-bind", "--dev-bind-try", "--bind-try")


def _bound(bwrap: tuple[str, ...]) -> list[str]:
    return [bwrap[i + 1] for i, arg in enumerate(bwrap[:-1]) if arg in _BINDS]


def _pin(bwrap: tuple[str, ...]) -> list[int | None]:
    """A descriptor (O_PATH) on every path bubblewrap binds, None where there is none. A sandbox built
    ahead shows what was there when it was built; a path removed since loses its mount there (the
    kernel detaches mounts of a removed file or folder in every namespace). Held open, the old file
    keeps its inode number, which a new one under the same path then cannot reuse."""
    pinned = []
    for path in _bound(bwrap):
        try:
            pinned.append(os.open(path, os.O_PATH | os.O_CLOEXEC))
        except OSError:
            pinned.append(None)
    return pinned


def _unchanged(bwrap: tuple[str, ...], pinned: list[int | None]) -> bool:
    """Whether every path bubblewrap binds is still what ``pinned`` holds (or still missing)."""
    for path, fd in zip(_bound(bwrap), pinned, strict=True):
        try:
            now = os.stat(path)
        except OSError:
            now = None
        if fd is None or now is None:
            if fd is not None or now is not None:
                return False
            continue
        then = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino) or then.st_nlink == 0:
            return False
    return True


def _unpin(pinned: list[int | None]) -> None:
    for fd in pinned:
        if fd is not None:
            os.close(fd)


class _BuildTimes:
    """When the next step is built ahead. Built as soon as a command had ended, it took the processors
    and the harness's interpreter lock while the harness finished that command, checked the workspace
    and started the next one, and its copying took a processor from the next command's own threads. It
    waits, and is built:

    * at once when its request comes (one experiment right after another);
    * once no warm command has run for ``AHEAD_IDLE_S`` (between the steps of a search, while the
      agent thinks: the next experiment and the next evaluator are both built then);
    * when a command of another kind starts, if the last request of its own kind came with less than
      ``AHEAD_GAP_S`` of idleness before it (steps that follow one another at once: the next
      experiment is built while the evaluator runs, the next evaluator while the experiment runs)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._running = 0
        self._idle_since = time.monotonic()
        self._lead: dict[str, float] = {}  # kind -> how long nothing ran before its last request

    def requested(self, kind: str) -> None:
        with self._cond:
            self._lead[kind] = time.monotonic() - self._idle_since if self._running == 0 else 0.0

    def started(self, waiting: list[_Ahead], running: bool) -> None:
        """A command was started (warm: ``running`` until ``ended``); ``waiting`` is what waits to be built."""
        with self._cond:
            self._running += running
            for ahead in waiting:
                if self._lead.get(ahead.key.kind, 0.0) < AHEAD_GAP_S:
                    ahead.released = True
            self._cond.notify_all()

    def ended(self) -> None:
        with self._cond:
            self._running -= 1
            if self._running == 0:
                self._idle_since = time.monotonic()
            self._cond.notify_all()

    def release(self, ahead: _Ahead, cancel: bool = False) -> None:
        """Let ``ahead`` be built now (or, with ``cancel``, end without building anything)."""
        with self._cond:
            ahead.released = True
            ahead.cancelled = ahead.cancelled or cancel
            self._cond.notify_all()

    def wait(self, ahead: _Ahead) -> bool:
        """Until ``ahead`` may be built; whether it is built while no command runs (rather than beside
        one, or at its own request)."""
        with self._cond:
            while not ahead.released:
                if self._running:
                    self._cond.wait()
                    continue
                left = self._idle_since + AHEAD_IDLE_S - time.monotonic()
                if left <= 0:
                    return True
                self._cond.wait(left)
            return False


class _Ahead:
    """The next command, built in a thread once a command has ended, on the guess that the next request
    repeats it (the next validation step of a search, its evaluator). Its process has done all that
    comes before the script (for an experiment: the sandbox, the control group, the namespace's init),
    then waits for ``go``. A request it does not match discards it."""

    def __init__(self, key: _AheadKey, rebuild: tuple, times: _BuildTimes):
        self.key = key
        self.rebuild = rebuild  # (parent, request, bwrap, cwd, holder_env)
        self.pinned: list[int | None] = []
        self.group: StepGroup | None = None
        self.holder: _Holder | None = None
        self.pid: int | None = None
        self.status: _StatusLines | None = None
        self.out_r = self.err_r = self.start_w = -1
        self.failure: str | None = None
        self.times = times
        self.released = self.cancelled = False
        self.own_up_to = 0  # how much of the parent's memory its process copies while it waits for go
        self.thread = threading.Thread(target=self._build, name="fmlbench-warm-ahead", daemon=True)

    def _build(self) -> None:
        idle = self.times.wait(self)
        if self.cancelled:
            self.failure = "cancelled"
            return
        parent, request, bwrap, cwd, holder_env = self.rebuild
        child_ends: list[int] = []
        go_w = -1
        try:
            # before the sandbox binds them: a path replaced in between reads as another file
            self.pinned = _pin(self.key.bwrap)
            own_up_to = OWN_PAGES_MAX if idle else 0
            if self.key.limits is not None:
                self.group = create_group(*self.key.limits)
                own_up_to = min(own_up_to, self.key.limits[0].memory_bytes // 4)
                request = {**request, **self.group.warm_entry()}
            self.own_up_to = own_up_to
            start_r, self.start_w = os.pipe()
            self.out_r, out_w = os.pipe()
            self.err_r, err_w = os.pipe()
            status_r, status_w = os.pipe()
            self.status = _StatusLines(status_r)
            child_ends = [out_w, err_w, status_w]
            if bwrap is not None:
                self.holder = _Holder(bwrap, cwd, holder_env)
                go_r, go_w = os.pipe()
                child_ends.append(go_r)
            child_ends.append(start_r)
            self.pid = parent.spawn({**request, "ahead": True, "own_up_to": own_up_to}, child_ends)
            for fd in child_ends:
                os.close(fd)
            child_ends = []
            if self.holder is not None:
                self.holder.ready()
                os.write(go_w, f"{self.holder.pid}\n".encode())
                os.close(go_w)
                go_w = -1
            while (line := self.status.next(START_TIMEOUT_S)) != "ready":
                if line == "joined" and self.holder is not None:
                    self.holder.release()
                else:
                    raise _Refused(f"the command built ahead did not get ready ({line or 'ended'})")
            if self.holder is not None:
                self.holder.reap()
                self.holder = None
        except Exception as exc:  # noqa: BLE001 - whatever failed, the request is served as before
            self.failure = f"{type(exc).__name__}: {exc}"
            for fd in (*child_ends, go_w):
                if fd >= 0:
                    os.close(fd)

    def discard(self) -> None:
        """End what was built (nothing of a command ran in it) and release it all. After the thread."""
        if self.start_w >= 0:
            os.close(self.start_w)  # its command's process ends without running anything
            self.start_w = -1
        for fd in (self.out_r, self.err_r):
            if fd >= 0:
                os.close(fd)
        self.out_r = self.err_r = -1
        if self.group is not None:
            self.group.close()
            self.group = None
        if self.status is not None:
            while self.status.next(EXIT_GRACE_S) not in ("", None):
                pass
            self.status.close()
        if self.holder is not None:
            self.holder.reap()
            self.holder = None
        _unpin(self.pinned)
        self.pinned = []


# -- the pool of one run ------------------------------------------------------------------------------


@dataclass
class WarmPool:
    """The warm parents of one run (its search and final workspaces share them), started early."""

    experiment_imports: list[tuple[str, list[str]]]
    harness_imports: list[tuple[str, list[str]]]
    experiment_optional: bool
    logs: Path
    log: Callable[[str], None]
    trees: SandboxTrees | None = None
    parents: dict[ParentKey, WarmParent] = field(default_factory=dict)
    off: dict[str, str] = field(default_factory=dict)   # kind -> why its commands start cold
    told: set[str] = field(default_factory=set)
    # kind -> its next step, built ahead of the request on the guess that it repeats the last one
    ahead: dict[str, _Ahead] = field(default_factory=dict)
    ahead_used: int = 0
    ahead_discarded: int = 0
    closed: bool = False
    _ahead_lock: threading.Lock = field(default_factory=threading.Lock)
    _times: _BuildTimes = field(default_factory=_BuildTimes)

    def close(self) -> None:
        with self._ahead_lock:
            self.closed = True
            built, self.ahead = list(self.ahead.values()), {}
        # first the parents: their end ends every process of a step built ahead, waiting or not
        for parent in self.parents.values():
            parent.close()
        self.parents.clear()
        for ahead in built:
            self._times.release(ahead, cancel=True)
            ahead.thread.join()
            ahead.discard()

    def _say(self, line: str) -> None:
        """Once per line: to the session's log, and to the run's ``logs/warm_start.log``."""
        if line not in self.told:
            self.told.add(line)
            self.log(line)
            self.logs.mkdir(parents=True, exist_ok=True)
            with open(self.logs / WARM_LOG, "a") as fh:
                fh.write(line + "\n")

    def _turn_off(self, kind: str, why: str):
        """From now on these commands start cold; said once."""
        self.off[kind] = why
        self._say(f"warm start off for {kind} commands, they start cold: {why}")
        raise _Refused(why)

    def parent(self, kind: str, flags: tuple[str, ...], env: dict[str, str], sandboxed: bool) -> WarmParent | None:
        """The parent for these commands, started on first use; None while they start cold."""
        if kind in self.off:
            return None
        key = ParentKey(kind, flags, tuple(sorted(env.items())), sandboxed)
        if key not in self.parents:
            imports = self.experiment_imports if kind == "experiment" else self.harness_imports
            guard = self.trees.guard() if sandboxed and self.trees is not None else None
            optional = self.experiment_optional if kind == "experiment" else True
            self.parents[key] = WarmParent(key, imports, optional, guard,
                                           self.logs / f"warm_parent_{kind}_{len(self.parents)}.log")
        return self.parents[key]

    def launcher(self, kind: str, argv: list[str], flags: tuple[str, ...], cwd: Path, env: dict[str, str],
                 bwrap: list[str] | None = None, cold_bwrap: list[str] | None = None,
                 ) -> Callable[[StepGroup | None], WarmProcess | None]:
        """What run_command calls to start ``argv`` warm; it returns None for a cold start."""

        def launch(group: StepGroup | None) -> WarmProcess | None:
            if kind in self.off:
                return None
            self._times.requested(kind)
            proc = None
            try:
                proc = self._launch(kind, argv, flags, cwd, env, bwrap, cold_bwrap, group)
                return proc
            except _Refused as exc:
                if kind not in self.off:
                    self._say(f"{kind} command starts cold: {exc}")
                return None
            finally:
                with self._ahead_lock:
                    waiting = list(self.ahead.values())
                self._times.started(waiting, running=proc is not None)

        return launch

    def _launch(self, kind, argv, flags, cwd, env, bwrap, cold_bwrap, group) -> WarmProcess:
        command = script_command(argv, flags, cwd)
        if command is None:
            raise _Refused(f"not of the form {{python}} script.py ARGS ({shlex.join(argv)[:200]})")
        script, script_argv = command
        parent = self.parent(kind, flags, env, bwrap is not None)
        holder_env, env = env, child_env(env, cwd, bwrap is not None)
        why = parent.refusal()
        if why is not None:
            self._turn_off(kind, why)
        shadowed = sorted(local_module_names(Path(os.path.realpath(script)).parent) & parent.top_level)
        if shadowed:
            raise _Refused(f"{Path(script).parent} holds module(s) {', '.join(shadowed)} that the warm parent "
                           "has imported from elsewhere")
        request = {"mode": "sandbox" if bwrap is not None else "plain", "script": script, "argv": script_argv,
                   "orig_argv": argv, "cwd": str(cwd), "env": env, "ns_pid": None,
                   # what the sandbox's init shows in a cold start: bubblewrap, as the cold command runs it
                   "init_argv": cold_bwrap, "init_env": holder_env}
        then = None
        if group is None or group.made is not None:
            key = _AheadKey(kind, json.dumps(request, sort_keys=True), tuple(bwrap or ()),
                            group.made if group is not None else None)
            built = self._take_ahead(key)
            if built is not None:
                return built
            then = self._ahead_builder(key, parent, request, bwrap, cwd, holder_env)
        holder = _Holder(bwrap, cwd, holder_env) if bwrap is not None else None
        # in sandbox mode the child is spawned while bubblewrap builds the sandbox: it joins the step's
        # control group meanwhile, then reads the holder's pid on this pipe once the sandbox is ready
        go_r, go_w = os.pipe() if holder else (None, None)
        request = {**request, **(group.warm_entry() if group is not None else {})}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            pid = parent.spawn(request, [out_w, err_w, status_w, *([go_r] if holder else [])])
        except (_Refused, OSError) as exc:
            for fd in (out_r, err_r, status_r, *([go_w] if holder else [])):
                os.close(fd)
            if holder:
                holder.reap()
            self._turn_off(kind, str(exc))
        finally:
            for fd in (out_w, err_w, status_w, *([go_r] if holder else [])):
                os.close(fd)
        status = _StatusLines(status_r)
        if holder:
            try:
                holder.ready()
            except _Refused:
                # the child reads no pid and ends without entering anything; this command starts cold
                os.close(go_w)
                self._abandon(status, out_r, err_r, None)
                raise
            os.write(go_w, f"{holder.pid}\n".encode())
            os.close(go_w)
        failure = self._await_start(status, holder)
        if failure is not None:
            self._abandon(status, out_r, err_r, holder)
            self._turn_off(kind, failure)
        return WarmProcess(pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"), status, holder, group,
                           self._ended(then))

    # -- the next step, built ahead of its request ---------------------------------------------------

    def _take_ahead(self, key: _AheadKey) -> WarmProcess | None:
        """The step built ahead for ``key``, started; None (and what was built for another request
        discarded) if there is none."""
        with self._ahead_lock:
            ahead = self.ahead.pop(key.kind, None)
        if ahead is None:
            return None
        self._times.release(ahead)
        ahead.thread.join()
        if ahead.failure is None and ahead.key == key and _unchanged(ahead.key.bwrap, ahead.pinned):
            _unpin(ahead.pinned)
            ahead.pinned = []
            started = self._start_ahead(ahead)
            if started is not None:
                return started
        ahead.discard()
        self.ahead_discarded += 1
        return None

    def _start_ahead(self, ahead: _Ahead) -> WarmProcess | None:
        """Say go to what was built ahead: its command, started; None if it is gone (a signal for the
        whole job, say, killed it while it waited) or did not start."""
        try:
            os.write(ahead.start_w, b"go\n")
        except OSError:
            return None
        finally:
            os.close(ahead.start_w)
            ahead.start_w = -1
        if self._await_start(ahead.status, None) is not None:
            return None
        self.ahead_used += 1
        out_r, err_r, ahead.out_r, ahead.err_r = ahead.out_r, ahead.err_r, -1, -1
        started = WarmProcess(ahead.pid, os.fdopen(out_r, "rb"), os.fdopen(err_r, "rb"), ahead.status, None,
                              ahead.group, self._ended(self._ahead_builder(ahead.key, *ahead.rebuild)))
        started.built_ahead = True
        started.ended_whole = bool(ahead.key.bwrap)
        return started

    def _ended(self, then: Callable[[], None] | None) -> Callable[[], None]:
        """What a warm command calls once it has ended: the pool is idle again unless another runs, and
        ``then`` (what builds the next step like it)."""

        def ended() -> None:
            self._times.ended()
            if then is not None:
                then()

        return ended

    def _ahead_builder(self, key: _AheadKey, parent: WarmParent, request: dict, bwrap: list[str], cwd: Path,
                       holder_env: dict[str, str]) -> Callable[[], None]:
        """What builds the next step like this one, once this one has ended."""

        def build() -> None:
            with self._ahead_lock:
                if self.closed or key.kind in self.off:
                    return
                ahead = _Ahead(key, (parent, request, bwrap, cwd, holder_env), self._times)
                stale, self.ahead[key.kind] = self.ahead.get(key.kind), ahead
                ahead.thread.start()
            if stale is not None:
                self._times.release(stale, cancel=True)
                stale.thread.join()
                stale.discard()

        return build

    @staticmethod
    def _abandon(status: _StatusLines, out_r: int, err_r: int, holder: _Holder | None) -> None:
        """A child that never started its command: nothing of the command ran, and whatever the mechanism
        wrote is not the command's output. Waits for the child's end."""
        for fd in (out_r, err_r):
            os.close(fd)
        while status.next(START_TIMEOUT_S) not in ("", None):
            pass
        status.close()
        if holder:
            holder.reap()

    @staticmethod
    def _await_start(status: _StatusLines, holder: _Holder | None) -> str | None:
        while True:
            line = status.next(START_TIMEOUT_S)
            if line == "joined" and holder is not None:
                holder.release()
            elif line == "started":
                return None
            elif line is None:
                return f"the child did not start within {START_TIMEOUT_S:g} s"
            elif line.startswith("failed "):
                return f"entering the step failed: {line[7:]}"
            elif line == "" or line.startswith("exit "):
                return f"the child ended before the command started ({line or 'killed'})"


@lru_cache(maxsize=64)
def _learned(folder: str, fingerprint: str,
             kit: tuple[tuple[str, Path], ...] = ()) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((module, tuple(names)) for module, names in learn_imports(Path(folder), dict(kit)))


def pool_for(task, logs: Path, log: Callable[[str], None], sandboxed: bool, hidden: list[Path],
             gpus: bool) -> WarmPool:
    """The warm parents of one run of ``task``: declared imports (``warm:``) or learned ones."""
    declared = task.spec.warm
    if declared is not None:
        experiment = declared_imports(declared)
    else:
        kit = tuple(sorted(task.kit_files.items()))
        experiment = [(m, list(n)) for m, n in _learned(str(task.workspace_dir), task.fingerprint, kit)]
    harness = [(m, list(n)) for m, n in _learned(str(task.harness_dir), task.fingerprint)]
    pool = WarmPool(experiment, harness, experiment_optional=declared is None, logs=logs, log=log)
    if declared == []:
        pool.off["experiment"] = "the task declares warm: []"
    if sandboxed:
        try:
            pool.trees = sandbox_trees(hidden, tuple(task.spec.sandbox.hide), gpus)
        except package_data.ResourceError as exc:
            # the step's own sandbox refuses to start for the same reason, in one line
            pool.off["experiment"] = str(exc)
    return pool
