"""Per-step resource limits: a memory limit and a process (thread) limit for one experiment.

The limits hold the whole step, not one process: every process the experiment starts lands in one
control group. Exceeding them ends that step (the kernel's OOM killer inside the group, or forks
refused), and the harness, which stays outside the group, notices and records why.

Backends, best first: a writable cgroup v2 subtree (``memory.max``, ``pids.max``), writable cgroup v1
``memory`` and ``pids`` hierarchies, or, for a non-root user without either, rlimits
(``RLIMIT_NPROC`` per user, ``RLIMIT_AS`` per process). Root gets no rlimit fallback: the kernel
exempts uid 0 from ``RLIMIT_NPROC``, so a fork storm would go unbounded.
"""

from __future__ import annotations

import atexit
import os
import resource
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
OUT_OF_MEMORY = "out of memory"
TOO_MANY_PROCESSES = "too many processes"


class LimitsUnavailable(RuntimeError):
    """No way to bound an experiment's memory and process count on this machine."""


@dataclass(frozen=True)
class LimitSpec:
    memory_bytes: int
    max_processes: int


def default_memory_bytes() -> int:
    """80% of physical memory shared among this machine's xdist workers, at least 1 GiB."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    return max(1 << 30, int(total * 0.8 / workers))


def _own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path, from /proc/self/cgroup ('' names the v2 hierarchy)."""
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


class StepGroup:
    """One step's control group(s): created before the experiment starts, removed after it ends."""

    backend = "none"
    # what ``create`` made it from, for ``fresh``
    made: tuple[LimitSpec, bool] | None = None

    def fresh(self) -> StepGroup:
        """A new, empty group with this one's limits (for the next step)."""
        if self.made is None:
            raise LimitsUnavailable("this group was not made by limits.create")
        return create(*self.made)

    def now(self) -> StepGroup:
        """The group itself, made if it was not yet (see ``Deferred``): before a child enters it."""
        return self

    def enter(self) -> None:
        """Runs in the child between fork and exec: move it into the group or apply rlimits."""

    def warm_entry(self) -> dict:
        """What a child forked from a warm parent does instead of ``enter`` (it runs no code of this
        package): the ``cgroup.procs`` files to write its pid into, or the rlimits to set."""
        return {}

    def tripped(self) -> str | None:
        """The limit the step hit so far, if any."""
        return None

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        """Signal every process still in the group (it may have escaped the process group)."""

    def cpu_seconds(self) -> float | None:
        """The CPU time (user + system) every process that ran in the group used, as the kernel counted it;
        None where the group does not count it (rlimits, cgroup v1). Read it before ``close``."""
        return None

    def close(self, wait: bool = True) -> None:
        """Kill what is left and remove the group; with ``wait`` off, a thread removes it once what is
        left has ended (for a step whose own processes are known to be gone: only the harness's own
        ones, which reported the step's end, may still be ending)."""


class Deferred(StepGroup):
    """A step's limits, their group made when a command first needs it. A warm command built ahead
    brings a group of its own, made with the same limits before it was asked for: the one the harness
    asks for is then never made (its folders, limits and removal took 0.5-0.7 ms of every step).

    A machine where no group can be made says so here, as ``create`` would; whatever uses the group
    (a child about to enter it, its limits, its removal) makes it first, in the harness's process."""

    def __init__(self, spec: LimitSpec, gpus: bool = False):
        backend()
        self.made = (spec, gpus)
        self._group: StepGroup | None = None

    def now(self) -> StepGroup:
        if self._group is None:
            self._group = create(*self.made)
        return self._group

    @property
    def backend(self) -> str:  # type: ignore[override]
        return self.now().backend

    def enter(self) -> None:
        if self._group is None:
            # in a forked child this would make a group nobody removes: ``now()`` comes first
            raise RuntimeError("a deferred step group must be made (now()) before a child enters it")
        self._group.enter()

    def warm_entry(self) -> dict:
        return self.now().warm_entry()

    def tripped(self) -> str | None:
        return self._group.tripped() if self._group is not None else None

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        if self._group is not None:
            self._group.kill_all(sig)

    def cpu_seconds(self) -> float | None:
        return self._group.cpu_seconds() if self._group is not None else None

    def close(self, wait: bool = True) -> None:
        if self._group is not None:
            self._group.close(wait)


@dataclass
class _CgroupStep(StepGroup):
    # (directory, file to write the pid into) for every group the child joins
    dirs: list[Path]
    memory_events: tuple[Path, str]
    pids_events: Path
    procs: Path
    kill_file: Path | None = None
    backend: str = "cgroup"
    # what counts the group's CPU time: v2's cpu.stat, v1's cpuacct.usage (where a cpuacct group was made)
    cpu_usage: Path | None = None
    _pids: list[int] = field(default_factory=list)

    def enter(self) -> None:
        pid = str(os.getpid()).encode()
        for directory in self.dirs:
            fd = os.open(directory / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def warm_entry(self) -> dict:
        entry: dict = {"cgroup_procs": [str(directory / "cgroup.procs") for directory in self.dirs]}
        try:
            # a warm command adds a task at its end only where that stays within the limit
            entry["tasks_max"] = int((self.pids_events.parent / "pids.max").read_text())
        except (OSError, ValueError):  # "max": none
            pass
        return entry

    def tripped(self) -> str | None:
        path, key = self.memory_events
        if _counter(path, key) > 0:
            return OUT_OF_MEMORY
        if _counter(self.pids_events, "max") > 0:
            return TOO_MANY_PROCESSES
        return None

    def kill_all(self, sig: int = signal.SIGKILL) -> None:
        if self.kill_file is not None and sig == signal.SIGKILL:
            try:
                self.kill_file.write_text("1")
                return
            except OSError:
                pass
        for pid in _read_pids(self.procs):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def cpu_seconds(self) -> float | None:
        # bubblewrap's PID namespace passes on none of its processes' times to the harness's waits: the group
        # counts them (v2's cpu.stat, with or without the cpu controller; v1's cpuacct hierarchy)
        if self.cpu_usage is None:
            return None
        try:
            text = self.cpu_usage.read_text()
        except OSError:
            return None
        if self.cpu_usage.name == "cpuacct.usage":
            return int(text) / 1e9 if text.strip().isdigit() else None
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec" and value.strip().isdigit():
                return int(value) / 1e6
        return None

    def close(self, wait: bool = True) -> None:
        if not wait:
            self.kill_all(signal.SIGKILL)
            _close_later(self)
            return
        pauses = _pauses(5.0)
        while _read_pids(self.procs) and next(pauses, None) is not None:
            self.kill_all(signal.SIGKILL)
        for directory in self.dirs:
            pauses = _pauses(1.0)
            while True:
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if next(pauses, None) is None:
                        break


# A group closed unwaited is removed by one thread, kept for the process's life: made for every step,
# it took the interpreter's lock while the harness went on with the step. It first looks at a group this
# long after it was handed over: what is left in it is ending (a memory keeper's release takes 10-20 ms),
# and nothing waits for its removal.
_LATER_FIRST_LOOK_S = 0.02
_later: list[tuple[float, StepGroup]] = []
_later_cond = threading.Condition()
_later_open = 0  # handed over and not yet removed
_closer: threading.Thread | None = None


def _close_later(group: StepGroup) -> None:
    global _closer, _later_open
    with _later_cond:
        _later.append((time.monotonic() + _LATER_FIRST_LOOK_S, group))
        _later_open += 1
        if _closer is None or not _closer.is_alive():
            _closer = threading.Thread(target=_close_pending, name="fmlbench-group-closer", daemon=True)
            _closer.start()
        _later_cond.notify_all()


def _close_pending() -> None:
    global _later_open
    while True:
        with _later_cond:
            while not _later:
                _later_cond.wait()
            look_at, group = _later.pop(0)
        time.sleep(max(0.0, look_at - time.monotonic()))
        try:
            group.close()
        finally:
            with _later_cond:
                _later_open -= 1
                _later_cond.notify_all()


@atexit.register
def finish_closing(timeout_s: float = 10.0) -> None:
    """Remove the groups still waiting to be removed (at the latest as this process ends)."""
    with _later_cond:
        _later_cond.wait_for(lambda: _later_open == 0, timeout_s)


def _pauses(within_s: float):
    """Sleeps of 1, 2, 4 ... up to 20 ms until ``within_s`` has passed, each yielded after it. What a group
    waits for is mostly a process that is ending (its memory being released): a few milliseconds,
    which a fixed 20 ms sleep would round up."""
    deadline = time.monotonic() + within_s
    pause = 0.001
    while time.monotonic() < deadline:
        time.sleep(pause)
        yield pause
        pause = min(pause * 2, 0.02)


def _counter(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(p) for p in path.read_text().split()]
    except (OSError, ValueError):
        return []


class _V2:
    def __init__(self, parent: Path):
        self.parent = parent

    def create(self, spec: LimitSpec) -> _CgroupStep:
        group = self.parent / f"fmlbench-{uuid.uuid4().hex[:12]}"
        group.mkdir()
        (group / "memory.max").write_text(str(spec.memory_bytes))
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")
        (group / "pids.max").write_text(str(spec.max_processes))
        kill = group / "cgroup.kill"
        return _CgroupStep([group], (group / "memory.events", "oom_kill"), group / "pids.events",
                           group / "cgroup.procs", kill if kill.exists() else None, backend="cgroup2",
                           cpu_usage=group / "cpu.stat")


class _V1:
    def __init__(self, memory_parent: Path, pids_parent: Path):
        self.memory_parent = memory_parent
        self.pids_parent = pids_parent

    def create(self, spec: LimitSpec) -> _CgroupStep:
        name = f"fmlbench-{uuid.uuid4().hex[:12]}"
        memory, pids = self.memory_parent / name, self.pids_parent / name
        memory.mkdir()
        pids.mkdir()
        (memory / "memory.limit_in_bytes").write_text(str(spec.memory_bytes))
        swap = memory / "memory.memsw.limit_in_bytes"
        if swap.exists():
            try:
                swap.write_text(str(spec.memory_bytes))
            except OSError:
                pass
        (pids / "pids.max").write_text(str(spec.max_processes))
        dirs = [memory, pids]
        cpuacct = _v1_cpuacct_parent()
        if cpuacct is not None:
            try:
                (cpuacct / name).mkdir()
                dirs.append(cpuacct / name)
            except OSError:  # CPU time is reported where it can be counted, never a reason to fail a step
                cpuacct = None
        return _CgroupStep(dirs, (memory / "memory.oom_control", "oom_kill"), pids / "pids.events",
                           pids / "cgroup.procs", backend="cgroup1",
                           cpu_usage=cpuacct / name / "cpuacct.usage" if cpuacct is not None else None)


@dataclass
class _RlimitStep(StepGroup):
    spec: LimitSpec
    gpus: bool
    backend: str = "rlimit"

    def enter(self) -> None:
        for which, soft, hard in self._rlimits():
            resource.setrlimit(which, (soft, hard))

    def warm_entry(self) -> dict:
        return {"rlimits": self._rlimits()}

    def _rlimits(self) -> list[list[int]]:
        limits = [[resource.RLIMIT_NPROC, self.spec.max_processes, self.spec.max_processes]]
        if not self.gpus:
            # CUDA reserves far more address space than it uses: an address-space limit would break it
            limits.append([resource.RLIMIT_AS, self.spec.memory_bytes, self.spec.memory_bytes])
        return limits


def _v2_parent() -> Path | None:
    own = _own_cgroups()
    if "" not in own:
        return None
    for mount in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = mount / "cgroup.controllers"
        if not controllers.is_file():
            continue
        parent = mount / own[""].lstrip("/")
        enabled = (parent / "cgroup.subtree_control")
        try:
            if {"memory", "pids"} <= set(enabled.read_text().split()) and _writable_dir(parent):
                return parent
        except OSError:
            continue
    return None


@lru_cache(maxsize=1)
def _v1_cpuacct_parent() -> Path | None:
    """This process's cgroup v1 cpuacct folder where it may make groups in it; None otherwise."""
    own = _own_cgroups()
    if "cpuacct" not in own:
        return None
    folder = CGROUP_ROOT / "cpuacct" / own["cpuacct"].lstrip("/")
    return folder if _writable_dir(folder) and (folder / "cpuacct.usage").exists() else None


def _v1_parents() -> tuple[Path, Path] | None:
    own = _own_cgroups()
    if "memory" not in own or "pids" not in own:
        return None
    memory = CGROUP_ROOT / "memory" / own["memory"].lstrip("/")
    pids = CGROUP_ROOT / "pids" / own["pids"].lstrip("/")
    if _writable_dir(memory) and _writable_dir(pids) and (memory / "memory.limit_in_bytes").exists():
        return memory, pids
    return None


@lru_cache(maxsize=1)
def backend() -> str:
    """Which mechanism bounds a step here: 'cgroup2', 'cgroup1' or 'rlimit'; raises if none does."""
    if _v2_parent() is not None:
        return "cgroup2"
    if _v1_parents() is not None:
        return "cgroup1"
    if os.geteuid() != 0:
        return "rlimit"
    raise LimitsUnavailable(
        "cannot bound an experiment's memory and processes: no writable cgroup (v2 with the memory and "
        "pids controllers delegated, or v1 memory and pids hierarchies) and, as root, rlimits do not bound "
        "processes; run as a non-root user, or give this process a writable cgroup"
    )


def create(spec: LimitSpec, gpus: bool = False) -> StepGroup:
    """A fresh group for one step, with ``spec`` applied."""
    kind = backend()
    if kind == "cgroup2":
        group = _V2(_v2_parent()).create(spec)
    elif kind == "cgroup1":
        group = _V1(*_v1_parents()).create(spec)
    else:
        group = _RlimitStep(spec, gpus)
    group.made = (spec, gpus)
    return group
