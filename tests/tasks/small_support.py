"""What every small task's tests share: the task copied into a project, the hidden-data attack from agent code,
whose reports are marked lines in the runs' logs, and the baseline's declared values, which the attack's run
reproduces (its probe changes no number). One run of the task serves both of its tests (shared_run.py). Each
task's test file calls these in a few lines and keeps only what is specific to its task.

The attack is full_support's probe (the private folder beside the workspace, the harness by its real path,
a walk of everything the sandbox shows for the task's secret file names); a small task has no data cache,
so that part of the probe finds nothing by construction.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record
from shared_run import built_once, run_child
from full_support import (LITE, RUN_LOGS, assert_each_report_is_empty, attack_agent, attack_payload,  # noqa: F401
                          needs_bwrap)  # (LITE and needs_bwrap for the task files)

SMALL_TASKS = sorted(p.parent.name for p in (REPO / "task_suites").glob("*/task.yaml"))


class SmallTask:
    """A small-profile task as its tests see it: id, folder and declared spec."""

    def __init__(self, task_id: str):
        self.id = task_id
        self.folder = REPO / "task_suites" / task_id
        self.spec = load_task(self.folder / "task.yaml").spec

    @property
    def selection(self) -> str:
        """The ``-m`` expression that selects the task by its markers."""
        return " and ".join(["small", *self.spec.markers])

    def copy(self, project: Path) -> Path:
        """The task's folder in a test's project."""
        target = project / "task_suites" / self.id
        shutil.copytree(self.folder, target, ignore=shutil.ignore_patterns("__pycache__"))
        return target

    def run_dir(self, project: Path) -> Path:
        (run,) = (project / "reports" / "fmlbench" / "runs" / self.id).glob("*")
        return run


def assert_markers(task: SmallTask) -> None:
    """The task's markers are its domain, and lite exactly where the original task is in FML-bench-Lite."""
    (original,) = [name for name in builtin_tasks() if name.lower() == task.id]
    assert task.spec.markers[0] == task.spec.domain
    assert set(task.spec.markers) <= {task.spec.domain, "lite"}
    assert ("lite" in task.spec.markers) == (original in LITE)


def assert_baseline_values(task: SmallTask, val: float, test: float) -> None:
    """A run of the unchanged baseline scored the declared values: to 1e-9, or within the tolerance the task
    declares for CPUs other than the one that measured them (docs/task-format.md)."""
    baseline = task.spec.baseline
    tolerance = baseline.tolerance
    assert val == pytest.approx(baseline.val, rel=0, abs=max(1e-9, tolerance.val if tolerance else 0.0))
    assert test == pytest.approx(baseline.test, rel=0, abs=max(1e-9, tolerance.test if tolerance else 0.0))


def assert_scores_are_the_baseline(task: SmallTask, record: dict) -> None:
    """The record is whole, its validation and test values are the declared baseline's, and its final
    validation run (the same code in a fresh workspace, on the same machine) is the step's to the last digit."""
    assert record["integrity"] == "ok" and record["status"] == "finished", record.get("error")
    assert_baseline_values(task, record["best_val"], record["test_metric"])
    assert record["final_val"] == pytest.approx(record["best_val"], rel=0, abs=1e-9)
    assert all(outcome["ok"] for outcome in record["test_constraints"]), record["test_constraints"]


def marked_lines(log: Path, marker: str) -> list[str]:
    """What follows ``marker`` on each line of the log that starts with it."""
    return re.findall(rf"^{re.escape(marker)}(.*)$", log.read_text(), re.MULTILINE)


# Appended to the probe: the same walk again, counting the files it saw and whether its own workspace's
# editable file was among them (an empty report then means a walk that reached all it could), and the run's
# other folders beside the workspace (the harness's verdicts, the audit's evidence), which it must not reach.
VIEW_CHECK = r'''
_view = {"walked": 0, "saw_own": False, "beside": []}
for _root, _dirs, _files in _os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _view["walked"] += len(_files)
    _view["saw_own"] = _view["saw_own"] or (_root == _os.getcwd() and EDITABLE in _files)
for _name in ("verdicts", "evidence"):
    try:
        if _os.listdir(_Path.cwd().parent / _name):
            _view["beside"].append(_name)
    except OSError:
        pass
print("ATTACK view:", _json.dumps(_view), flush=True)
'''


def run_attack(task: SmallTask, project: Path, *, editable: str, anchor: str, secrets: tuple[str, ...],
               private: tuple[str, ...] = (), harness: tuple[str, ...] = (), extra: str = "",
               env: dict[str, str] | None = None) -> tuple[dict, Path]:
    """Agent code, appended to ``editable`` after its line ``anchor``, looks for the private folder and its
    ``private`` files, the task's harness (told its real path) and its ``harness`` files, and any file named
    in ``secrets`` anywhere it can see; then runs ``extra`` (code of the task's own probes). The agent takes
    one step in ``project``, the task selected by its markers as the baseline's run is. Returns the record and
    the run's folder; ``assert_the_attack_reached_nothing`` reads the probe's reports in its logs."""
    folder = task.copy(project)
    payload = (attack_payload(cache=(), private=private, harness=harness, secrets=secrets)
               + VIEW_CHECK.replace("EDITABLE", repr(editable)) + extra)
    (project / "attack_agent.py").write_text(attack_agent(editable, anchor, payload))
    run_child(project, "--agent=attack_agent.py:MyAgent", "--steps=1", "-m", task.selection, "task_suites",
              env={"FMLBENCH_EXPERIMENT_HARNESS": str(folder / "harness"), **(env or {})}).assert_outcomes(passed=1)
    return load_record(project, task.id), task.run_dir(project)


def assert_the_attack_reached_nothing(run: Path, logs: tuple[str, ...] = RUN_LOGS) -> None:
    """Every run in ``logs`` reported once, each report is empty, and each walk saw its own workspace's
    editable file and nothing beside the workspace."""
    assert_each_report_is_empty(run, logs)
    for log in logs:
        (view,) = map(json.loads, marked_lines(run / "logs" / log, "ATTACK view: "))
        assert view["saw_own"] and view["beside"] == [], (log, view)


class SharedRun:
    """What the module's one run left: its record and its run folder; ``attacked`` when the attack agent took
    the step (bubblewrap present), else the baseline agent took it and only its scores can be read;
    ``planted`` when the attack's step planted a pickle (and was refused)."""

    def __init__(self, record: dict, run: Path, attacked: bool, planted: PlantedPickle | None = None):
        self.record, self.run, self.attacked, self.planted = record, run, attacked, planted


def baseline_run(task: SmallTask, project: Path) -> SharedRun:
    """The baseline agent's one step in ``project``, the task selected by its markers: a shared run's stand-in
    where there is no bubblewrap to attack."""
    task.copy(project)
    run_child(project, "--agent=baseline", "--steps=1", "-m", task.selection, "task_suites").assert_outcomes(passed=1)
    return SharedRun(load_record(project, task.id), task.run_dir(project), attacked=False)


def shared_attack_run(task: SmallTask, **probe):
    """A module-scoped fixture: the task's one-step run that its baseline test and its attack test both read
    (shared_run.py). The attack agent takes the step (``run_attack`` with ``probe``); its code leaves the
    method as it is, so the step's, the final validation's and the test's scores must be the unchanged
    baseline's, which the baseline test asserts. Without bubblewrap the attack means nothing (its test is
    skipped) and the baseline agent takes the step instead."""

    def build(project: Path) -> SharedRun:
        if shutil.which("bwrap") is None:
            return baseline_run(task, project)
        record, run = run_attack(task, project, **probe)
        return SharedRun(record, run, attacked=True)

    @pytest.fixture(scope="module", name="shared_run")
    def fixture(tmp_path_factory) -> SharedRun:
        return built_once(tmp_path_factory, f"{task.id}-attack", build)

    return fixture


def assert_the_shared_attack_reached_nothing(shared: SharedRun) -> Path:
    """The module's run was the attack's, and it reached nothing (``assert_the_attack_reached_nothing``);
    returns the run's folder, for the task's own checks."""
    assert shared.attacked
    assert_the_attack_reached_nothing(shared.run)
    return shared.run


def assert_the_baseline_reproduced(task: SmallTask, shared: SharedRun) -> None:
    """The module's run, selected by the task's markers, scored the values task.yaml declares: in its one valid
    step, in the final validation run and in the test run; after a planted pickle (an invalid step), in the
    final validation run and the test run of the unchanged baseline code the run fell back to."""
    record = shared.record
    assert record["domain"] == task.spec.domain
    if shared.planted is None:
        assert record["valid_steps"] == 1
        assert_scores_are_the_baseline(task, record)
    else:
        assert record["valid_steps"] == 0 and record["test_on_baseline"] is True
        assert record["integrity"] == "ok" and record["status"] == "finished", record.get("error")
        assert_baseline_values(task, record["final_val"], record["test_metric"])


# Appended to the attack: it leaves, in place of the experiment's output file OUTPUT, a pickle whose
# unpickling would create the file FMLBENCH_EXPERIMENT_MARKER names, and ends the experiment before training.
PLANTED_PICKLE = r'''
import pickle as _pickle
class _Planted:
    def __reduce__(self):
        return (open, (_os.environ["FMLBENCH_EXPERIMENT_MARKER"], "w"))
with open(_os.path.join(_sys.argv[_sys.argv.index("--out") + 1], OUTPUT), "wb") as _file:
    _pickle.dump({KEY: _Planted()}, _file)
_os._exit(0)
'''


class PlantedPickle:
    """The pickle the attack plants as the experiment's ``output``: a dict whose ``key`` unpickles into code
    that would create ``marker``; the evaluator must refuse it with ``refusal`` in the step's error."""

    def __init__(self, marker: Path, output: str, key: str, refusal: str):
        self.marker, self.output, self.key, self.refusal = marker, output, key, refusal

    @property
    def code(self) -> str:
        return PLANTED_PICKLE.replace("OUTPUT", repr(self.output)).replace("KEY", repr(self.key))


def shared_planted_pickle_run(task: SmallTask, *, output: str, key: str, refusal: str, **probe):
    """A module-scoped fixture: the task's one-step run that its baseline test and its attack test both read
    (shared_run.py). The attack agent's step plants a pickle in place of the experiment's ``output`` and ends
    before training; the evaluator refuses it, the step is invalid, and the run falls back to the unchanged
    baseline code for the final validation run and the test run, whose scores the baseline test reads.
    Without bubblewrap the baseline agent takes the step instead (the attack test is skipped)."""

    extra = probe.pop("extra", "")

    def build(project: Path) -> SharedRun:
        if shutil.which("bwrap") is None:
            return baseline_run(task, project)
        planted = PlantedPickle(project / "evaluator_ran_agent_code", output, key, refusal)
        record, run = run_attack(task, project, extra=extra + planted.code,
                                 env={"FMLBENCH_EXPERIMENT_MARKER": str(planted.marker)}, **probe)
        return SharedRun(record, run, attacked=True, planted=planted)

    @pytest.fixture(scope="module", name="shared_run")
    def fixture(tmp_path_factory) -> SharedRun:
        return built_once(tmp_path_factory, f"{task.id}-planted-pickle", build)

    return fixture


def assert_the_planted_pickle_never_ran(shared: SharedRun) -> Path:
    """The module's run was the planted pickle's (``shared_planted_pickle_run``): the probe in the step's run
    reached nothing, the evaluator refused the pickle with the expected reason and never ran it. Returns the
    run's folder."""
    assert shared.attacked and shared.planted is not None
    assert_the_attack_reached_nothing(shared.run, logs=("step_0001_val.log",))
    step = json.loads((shared.run / "steps.jsonl").read_text().splitlines()[0])
    assert shared.planted.refusal in step["error"], step["error"]
    assert not shared.planted.marker.exists()  # the evaluator refused the pickle instead of running it
    return shared.run


# Appended to the attack in the tasks whose train.py seals the data files before it imports the method (the
# kit's data_guard): the method's own reads of the visible data and of the test inputs are refused.
DATA_GUARD_PROBE = r'''
_guarded = {}
for _name in ("data/visible_X.npy", "data/visible_y.npy",
              _os.path.join(_sys.argv[_sys.argv.index("--out") + 1], "test_X.npy")):
    try:
        open(_name, "rb").close()
        _guarded[_name] = "read"
    except Exception as _exc:
        _guarded[_name] = type(_exc).__name__
print("GUARD", _json.dumps(_guarded), flush=True)
'''


def assert_the_data_guard_refused(run: Path, logs: tuple[str, ...] = RUN_LOGS) -> None:
    """In every run in ``logs``, DATA_GUARD_PROBE's reads were all refused by the guard."""
    for log in logs:
        (line,) = marked_lines(run / "logs" / log, "GUARD ")
        assert set(json.loads(line).values()) == {"ProtocolError"}, (log, line)
