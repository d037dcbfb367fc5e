"""``fmlbench verify --rerun RUN``: one run's final test again, from the bundle, on the task here.

The task must be at the fingerprint the run recorded (its harness, data recipe and baseline code as they
were): the recorded best code is restored into a fresh workspace, its validation re-run and its test run
once, as the run's own final test did, and the test value is compared with the recorded one against the
task's declared tolerance (exact, to 1e-9, where it declares none).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..record import RunRecord, RunStore
from . import BundleError
from .tables import TOLERANCE


@dataclass(frozen=True)
class Rerun:
    run: str
    record: RunRecord
    value: float | None
    error: str | None
    tolerance: float

    @property
    def difference(self) -> float | None:
        if self.value is None or self.record.test_metric is None:
            return None
        return self.value - self.record.test_metric

    @property
    def reproduced(self) -> bool:
        return self.difference is not None and abs(self.difference) <= self.tolerance

    def line(self) -> str:
        record = self.record
        head = f"rerun {self.run} ({record.task} seed {record.seed})"
        if self.error:
            return f"{head}: the final test failed: {self.error}"
        if record.test_metric is None:
            return f"{head}: test {record.metric_key} {self.value:.6g}; the run recorded no test value"
        verdict = "reproduced" if self.reproduced else "NOT reproduced"
        return (f"{head}: test {record.metric_key} {self.value!r}, recorded {record.test_metric!r}, difference "
                f"{self.difference:.3g} ({verdict}: the task's tolerance is {self.tolerance:g})")


def find_run(root: Path, runs: dict[str, str], wanted: str) -> str:
    """The bundled run a user names: its run id, its folder's name, or its path under runs/."""
    for name, run_id in runs.items():
        if wanted in (run_id, name, name.removeprefix("runs/"), Path(name).name):
            return name
    known = ", ".join(Path(name).name for name in runs) or "none"
    raise BundleError(f"no run {wanted!r} in the bundle (its runs: {known})")


def rerun(root: Path, name: str, task_roots: list[Path], *, sandboxed: bool = True,
          data_root: Path | None = None) -> Rerun:
    from .. import devices
    from ..datacache import DataCache, default_root
    from ..executor import scrubbed_env
    from ..workspace import HarnessError, IntegrityViolation, Workspace
    from .pack import task_sources

    store = RunStore(root / name)
    record = store.load()
    steps = store.load_steps()
    task = task_sources(task_roots, {record.task}).get(record.task)
    if task is None:
        raise BundleError(f"task {record.task} is not here (looked in {', '.join(map(str, task_roots))}): give its "
                          "folder's parent with --tasks")
    if task.fingerprint != record.task_fingerprint:
        raise BundleError(f"task {record.task} here ({task.root}) has fingerprint {task.fingerprint[:12]}..., the run "
                          f"was measured at {record.task_fingerprint[:12]}...: the task changed since")
    best = next((s for s in steps if s.step == record.best_step), None)
    snapshot = record.baseline_snapshot if record.test_on_baseline or best is None else best.snapshot
    if not snapshot:
        raise BundleError(f"{name}: the record names no code for its final test")
    files: dict[str, Any] = store.read_snapshot(snapshot)
    tolerance = task.spec.baseline.tolerance.test if task.spec.baseline.tolerance else TOLERANCE
    spec = task.spec
    cache = None
    if spec.profile == "full":
        cache = DataCache(data_root or default_root(), record.scale or "full")  # type: ignore[arg-type]
    env = scrubbed_env(devices.experiment_env(spec.resources.gpus))
    with tempfile.TemporaryDirectory(prefix="fmlbench-rerun-") as scratch:
        logs = Path(scratch) / "logs"
        logs.mkdir()
        try:
            workspace = Workspace.create(task, Path(scratch) / "final", env, logs, sandboxed, None, data=cache)
            manifest = workspace.take_manifest()
            restored = workspace.editor.set_files(files)
            if not restored.applied:
                return Rerun(name, record, None, f"could not restore the code: {restored.error}", tolerance)
            workspace.run_split("val", "rerun", manifest=manifest)
            test = workspace.run_split("test", "rerun", manifest=manifest)
        except (HarnessError, IntegrityViolation) as exc:
            return Rerun(name, record, None, str(exc).splitlines()[0][:500], tolerance)
    if not test.success:
        return Rerun(name, record, None, test.error[-500:].strip().replace("\n", " "), tolerance)
    return Rerun(name, record, test.metric, None, tolerance)
