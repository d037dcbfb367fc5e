"""What runs inside a Slurm job: the ordinary runner on one (task, seed), rebuilt from plain option values.

submitit pickles the callable and its arguments into the output folder, so they hold only option
values and paths: API keys reach the job through its environment (sbatch exports the submitter's),
never through a file.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import submitit


BUSY_WAIT_S = 180
NOT_RUN = "NotRun"  # the session's budget was spent before the job started its run


@dataclass(frozen=True)
class JobSpec:
    task_root: str
    seed: int
    options: dict[str, Any]  # the fmlbench command-line option values (dest -> value)
    invocation_dir: str

    def with_fresh(self, fresh: bool) -> JobSpec:
        return replace(self, options={**self.options, "fresh": fresh})


class _OptionView:
    """The slice of pytest.Config that BenchConfig.from_pytest reads, from recorded option values."""

    # the controller already contacted the LLM provider once: the job does not again
    workerinput: dict = {}

    def __init__(self, options: dict[str, Any], invocation_dir: str):
        self._options = options
        self.invocation_params = SimpleNamespace(dir=Path(invocation_dir))

    def getoption(self, name: str, default: Any = None) -> Any:
        return self._options.get(name, default)


class ItemJob(submitit.helpers.Checkpointable):
    """One benchmark item. On preemption or time limit submitit requeues it; the runner resumes from records."""

    def __init__(self, spec: JobSpec):
        self.spec = spec

    def __call__(self) -> dict[str, Any]:
        spec = self.spec
        if int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) > 0:
            # a requeued job continues its recorded steps; --fresh meant the first start only
            spec = spec.with_fresh(False)
        return run_item(spec)

    def checkpoint(self) -> submitit.helpers.DelayedSubmission:
        # the runner records each step as it ends: the requeued job replays them, fresh or not at the start
        return submitit.helpers.DelayedSubmission(ItemJob(self.spec.with_fresh(False)))


def run_item(spec: JobSpec) -> dict[str, Any]:
    from .. import session_budget
    from ..options import BenchConfig
    from ..runner import RunBusy, RunError, execute
    from ..spec import TASK_FILE, load_task

    os.chdir(spec.invocation_dir)
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and "OMP_NUM_THREADS" not in os.environ:
        # the node's core count is not this job's
        os.environ["OMP_NUM_THREADS"] = cpus
    bench = BenchConfig.from_pytest(_OptionView(spec.options, spec.invocation_dir))
    settings = replace(bench.settings, log=lambda msg: print(msg, flush=True))
    task = load_task(Path(spec.task_root) / TASK_FILE)
    refused = session_budget.refusal(settings.out_dir, lambda: session_budget.run_is_final(settings, task, spec.seed))
    if refused:
        return {"error": refused, "kind": NOT_RUN}
    # a cancelled or requeued predecessor may still hold the run's lock while Slurm kills it
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        try:
            outcome = execute(task, spec.seed, settings)
            break
        except RunBusy as exc:
            if time.monotonic() > deadline:
                return {"error": f"{exc} (node {socket.gethostname()})", "kind": "RunBusy"}
            time.sleep(2)
        except RunError as exc:
            return {"error": f"{exc} (node {socket.gethostname()})", "kind": "RunError"}
    return {"error": None, "run_dir": str(outcome.store.dir), "status": outcome.record.status,
            "reused": outcome.reused}
