"""The next command, built ahead of its request: when it is built (``BuildTimes``), what it is built
from (``AheadKey``, the bound paths held open since), and the build itself (``BuiltAhead``)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from ..limits import StepGroup, create as create_group
from .command import SandboxHolder, StatusLines
from .parent_link import START_TIMEOUT_S, StartsCold


# how long a discarded command built ahead may take to end, per line its processes still write
EXIT_GRACE_S = 1.0
# a command built ahead while nothing runs copies at most this much of the parent's memory as its own
# before its request (and at most a quarter of its memory limit)
OWN_PAGES_MAX = 1 << 30
# When a step built ahead is built (see BuildTimes): once no warm command has run for this long, or
# while another command runs where its kind's last request came after less idleness than this
AHEAD_IDLE_S = 0.025
AHEAD_GAP_S = 0.25


@dataclass(frozen=True)
class AheadKey:
    """Everything a sandboxed command's request is made of, but its control group's own paths."""

    kind: str
    request: str                     # the request, as JSON with sorted keys
    bwrap: tuple[str, ...]           # the holder's bubblewrap arguments
    limits: tuple | None             # the control group's (LimitSpec, gpus), if it has one


_BINDS = ("--bind", "--ro-bind", "--ro-bind-try", "--dev-bind", "--dev-bind-try", "--bind-try")


def _bound_paths(bwrap: tuple[str, ...]) -> list[str]:
    return [bwrap[i + 1] for i, arg in enumerate(bwrap[:-1]) if arg in _BINDS]


def pin_bound_paths(bwrap: tuple[str, ...]) -> list[int | None]:
    """A descriptor (O_PATH) on every path bubblewrap binds, None where there is none. A sandbox built
    ahead shows what was there when it was built; a path removed since loses its mount there (the
    kernel detaches mounts of a removed file or folder in every namespace). Held open, the old file
    keeps its inode number, which a new one under the same path then cannot reuse."""
    pinned = []
    for path in _bound_paths(bwrap):
        try:
            pinned.append(os.open(path, os.O_PATH | os.O_CLOEXEC))
        except OSError:
            pinned.append(None)
    return pinned


def bound_paths_unchanged(bwrap: tuple[str, ...], pinned: list[int | None]) -> bool:
    """Whether every path bubblewrap binds is still what ``pinned`` holds (or still missing)."""
    for path, fd in zip(_bound_paths(bwrap), pinned, strict=True):
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


def unpin_bound_paths(pinned: list[int | None]) -> None:
    for fd in pinned:
        if fd is not None:
            os.close(fd)


class BuildTimes:
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

    def started(self, waiting: list[BuiltAhead], running: bool) -> None:
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

    def release(self, ahead: BuiltAhead, cancel: bool = False) -> None:
        """Let ``ahead`` be built now (or, with ``cancel``, end without building anything)."""
        with self._cond:
            ahead.released = True
            ahead.cancelled = ahead.cancelled or cancel
            self._cond.notify_all()

    def wait(self, ahead: BuiltAhead) -> bool:
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


class BuiltAhead:
    """The next command, built in a thread once a command has ended, on the guess that the next request
    repeats it (the next validation step of a search, its evaluator). Its process has done all that
    comes before the script (for an experiment: the sandbox, the control group, the namespace's init),
    then waits for ``go``. A request it does not match discards it."""

    def __init__(self, key: AheadKey, rebuild: tuple, times: BuildTimes):
        self.key = key
        self.rebuild = rebuild  # (parent, request, bwrap, cwd, holder_env)
        self.pinned: list[int | None] = []
        self.group: StepGroup | None = None
        self.holder: SandboxHolder | None = None
        self.pid: int | None = None
        self.status: StatusLines | None = None
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
            self.pinned = pin_bound_paths(self.key.bwrap)
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
            self.status = StatusLines(status_r)
            child_ends = [out_w, err_w, status_w]
            if bwrap is not None:
                self.holder = SandboxHolder(bwrap, cwd, holder_env)
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
                    raise StartsCold(f"the command built ahead did not get ready ({line or 'ended'})")
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
        unpin_bound_paths(self.pinned)
        self.pinned = []
