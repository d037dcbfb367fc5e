"""The warm parents of one run (``WarmPool``): started on first use, turned off with one line when
unsafe, launching each command warm (or saying why it starts cold) and building the next one ahead."""

from __future__ import annotations

import json
import os
import shlex
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .. import package_data
from ..limits import StepGroup
from .built_ahead import AheadKey, BuildTimes, BuiltAhead, bound_paths_unchanged, unpin_bound_paths
from .command import SandboxHolder, StatusLines, WarmProcess, child_env, script_command
from .imports import declared_imports, learn_imports, local_module_names
from .parent_link import START_TIMEOUT_S, ParentKey, StartsCold, WarmParent
from .sandbox_view import SandboxTrees, sandbox_trees


# where a run's logs say why commands started cold
WARM_LOG = "warm_start.log"


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
    ahead: dict[str, BuiltAhead] = field(default_factory=dict)
    ahead_used: int = 0
    ahead_discarded: int = 0
    closed: bool = False
    _ahead_lock: threading.Lock = field(default_factory=threading.Lock)
    _times: BuildTimes = field(default_factory=BuildTimes)

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
        raise StartsCold(why)

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
            except StartsCold as exc:
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
            raise StartsCold(f"not of the form {{python}} script.py ARGS ({shlex.join(argv)[:200]})")
        script, script_argv = command
        parent = self.parent(kind, flags, env, bwrap is not None)
        holder_env, env = env, child_env(env, cwd, bwrap is not None)
        why = parent.refusal()
        if why is not None:
            self._turn_off(kind, why)
        shadowed = sorted(local_module_names(Path(os.path.realpath(script)).parent) & parent.top_level)
        if shadowed:
            raise StartsCold(f"{Path(script).parent} holds module(s) {', '.join(shadowed)} that the warm parent "
                           "has imported from elsewhere")
        request = {"mode": "sandbox" if bwrap is not None else "plain", "script": script, "argv": script_argv,
                   "orig_argv": argv, "cwd": str(cwd), "env": env, "ns_pid": None,
                   # what the sandbox's init shows in a cold start: bubblewrap, as the cold command runs it
                   "init_argv": cold_bwrap, "init_env": holder_env}
        then = None
        if group is None or group.made is not None:
            key = AheadKey(kind, json.dumps(request, sort_keys=True), tuple(bwrap or ()),
                            group.made if group is not None else None)
            built = self._take_ahead(key)
            if built is not None:
                return built
            then = self._ahead_builder(key, parent, request, bwrap, cwd, holder_env)
        holder = SandboxHolder(bwrap, cwd, holder_env) if bwrap is not None else None
        # in sandbox mode the child is spawned while bubblewrap builds the sandbox: it joins the step's
        # control group meanwhile, then reads the holder's pid on this pipe once the sandbox is ready
        go_r, go_w = os.pipe() if holder else (None, None)
        request = {**request, **(group.warm_entry() if group is not None else {})}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            pid = parent.spawn(request, [out_w, err_w, status_w, *([go_r] if holder else [])])
        except (StartsCold, OSError) as exc:
            for fd in (out_r, err_r, status_r, *([go_w] if holder else [])):
                os.close(fd)
            if holder:
                holder.reap()
            self._turn_off(kind, str(exc))
        finally:
            for fd in (out_w, err_w, status_w, *([go_r] if holder else [])):
                os.close(fd)
        status = StatusLines(status_r)
        if holder:
            try:
                holder.ready()
            except StartsCold:
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

    def _take_ahead(self, key: AheadKey) -> WarmProcess | None:
        """The step built ahead for ``key``, started; None (and what was built for another request
        discarded) if there is none."""
        with self._ahead_lock:
            ahead = self.ahead.pop(key.kind, None)
        if ahead is None:
            return None
        self._times.release(ahead)
        ahead.thread.join()
        if ahead.failure is None and ahead.key == key and bound_paths_unchanged(ahead.key.bwrap, ahead.pinned):
            unpin_bound_paths(ahead.pinned)
            ahead.pinned = []
            started = self._start_ahead(ahead)
            if started is not None:
                return started
        ahead.discard()
        self.ahead_discarded += 1
        return None

    def _start_ahead(self, ahead: BuiltAhead) -> WarmProcess | None:
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

    def _ahead_builder(self, key: AheadKey, parent: WarmParent, request: dict, bwrap: list[str], cwd: Path,
                       holder_env: dict[str, str]) -> Callable[[], None]:
        """What builds the next step like this one, once this one has ended."""

        def build() -> None:
            with self._ahead_lock:
                if self.closed or key.kind in self.off:
                    return
                ahead = BuiltAhead(key, (parent, request, bwrap, cwd, holder_env), self._times)
                stale, self.ahead[key.kind] = self.ahead.get(key.kind), ahead
                ahead.thread.start()
            if stale is not None:
                self._times.release(stale, cancel=True)
                stale.thread.join()
                stale.discard()

        return build

    @staticmethod
    def _abandon(status: StatusLines, out_r: int, err_r: int, holder: SandboxHolder | None) -> None:
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
    def _await_start(status: StatusLines, holder: SandboxHolder | None) -> str | None:
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
