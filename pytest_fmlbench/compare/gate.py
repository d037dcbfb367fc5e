"""In pytest, on the controller: save the session, compare it with an earlier one, fail on regressions.

``--fmlbench-compare=REF`` names the earlier side (a folder of runs, a session file, or a saved
session: ``last``, a number, a name); it is resolved when the session starts, before this session is
saved, so ``last`` means the session before this one, and a bad reference stops pytest before any task
runs. ``--fmlbench-fail-on-regression=X`` turns the comparison into a gate: the session's exit status
is non-zero when a task's NI or signed improvement (NI without its clamp at 0) dropped by more than X
and by more than the noise (or the noise is unknown), even if every item passed. A task where a drop of X
could have gone unseen (too few seeds for its noise, or a drop within it) is named "cannot tell", without
failing the session. The session is saved with this machine's hardware; against a session from another
machine, a task's declared kernel spread counts as noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..reports.disclosure import hardware
from ..spec import TASK_FILE, TaskSpecError, load_task
from .power import Noise, declared_noise

if TYPE_CHECKING:
    from .diff import Comparison
    from .sides import Side

# .sessions, .diff, .sides and .table load pandas: they are imported where a session saves or compares, not with
# the plugin, which every pytest and every xdist worker imports


class SessionGate:
    def __init__(self, config: pytest.Config, out_dir: Path, runs: Callable[[], dict[str, tuple[Path, bool]]]):
        self.config = config
        self.out_dir = out_dir
        # node id -> (run directory, reused), gathered by the results collector from reports
        self.runs = runs
        self.threshold = config.getoption("fmlbench_fail_on_regression")
        ref = config.getoption("fmlbench_compare")
        if self.threshold is not None and (math.isnan(self.threshold) or self.threshold < 0):
            raise pytest.UsageError("--fmlbench-fail-on-regression must be 0 or more (a drop of NI or signed "
                                    f"improvement), got {self.threshold}")
        if self.threshold is not None and not ref:
            raise pytest.UsageError("--fmlbench-fail-on-regression needs --fmlbench-compare=OLD (a folder of runs, "
                                    "or a saved session: last, a number, a name)")
        self.old: Side | None = None
        if ref:
            from . import sessions
            from .sides import CompareInputError

            try:
                self.old = sessions.side_for(ref, self.sessions_dir(), base=Path(config.invocation_params.dir))
            except CompareInputError as exc:
                raise pytest.UsageError(f"--fmlbench-compare: {exc}") from None
        self.comparison: Comparison | None = None
        self.saved: Path | None = None
        self.error: str | None = None

    def sessions_dir(self) -> Path:
        from .sessions import SESSIONS_DIR

        return self.out_dir / SESSIONS_DIR

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        runs = self.runs()
        if not runs:
            return
        from ..reports.runs import load_runs
        from . import sessions
        from .diff import compare
        from .sides import Side, scored_rows

        by_dir = {Path(run_dir): nodeid for nodeid, (run_dir, _) in runs.items()}
        # a run left out was named by the session's summary already
        loaded = load_runs(sorted(by_dir), left_out=lambda *_: None)
        # a run the scorer leaves out has no row, and never shifts the others' node ids
        scored = [(by_dir[run_dir], run_dir, row) for (_, _, run_dir), row in zip(loaded, scored_rows(loaded))
                  if row is not None]
        rows = [row for _, _, row in scored]
        machine = hardware()
        try:
            self.saved = sessions.save(
                self.sessions_dir(), scored,
                commit=sessions.git_commit(Path(self.config.invocation_params.dir)),
                args=list(self.config.invocation_params.args), exitstatus=int(exitstatus), out_dir=self.out_dir,
                hardware=machine)
        except OSError as exc:
            # the runs are recorded already; only the session's summary is lost, and the user is told
            self.error = f"could not save the session under {self.sessions_dir()}: {exc}"
        if self.old is None:
            return
        new = Side.from_rows(f"this session ({self.saved.stem})" if self.saved else "this session", rows,
                             hardware=machine)
        self.comparison = compare(self.old, new, noise=self.declared_noise(runs))
        if self.threshold is not None and self.comparison.regressions(self.threshold):
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def declared_noise(self, runs: dict[str, tuple[Path, bool]]) -> dict[str, Noise]:
        """Each task's declared noise (task.yaml's ``noise``, in NI), from the task folders this session ran."""
        found: dict[str, Noise] = {}
        folders = {(Path(self.config.rootpath) / nodeid.split("::")[0]) for nodeid in runs}
        for folder in sorted(folders):
            try:
                spec = load_task((folder if folder.is_dir() else folder.parent) / TASK_FILE).spec
            except (TaskSpecError, OSError):
                continue
            noise = declared_noise(spec)
            if noise is not None:
                found[spec.id] = noise
        return found

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.error is not None:
            terminalreporter.write_line(f"fmlbench: {self.error}", red=True)
        if self.saved is not None:
            terminalreporter.write_line(f"session saved as {self.saved.stem} ({self.saved}); "
                                        f"compare with it later: --fmlbench-compare=last")
        if self.comparison is None:
            return
        from .table import cannot_tell_line, gate_line, regression_line, render

        terminalreporter.write_sep("=", "FML-bench comparison")
        terminalreporter.write(render(self.comparison, width=max(160, terminalreporter._tw.fullwidth),
                                      threshold=self.threshold))
        if self.threshold is None:
            return
        regressed = self.comparison.regressions(self.threshold)
        for task in regressed:
            terminalreporter.write_line(regression_line(task, self.threshold), red=True, bold=True)
        for task in self.comparison.cannot_tell(self.threshold):
            terminalreporter.write_line(cannot_tell_line(task, self.threshold), yellow=True)
        terminalreporter.write_line(gate_line(self.comparison, self.threshold), red=bool(regressed),
                                    green=not regressed)

