"""What every full-profile task's tests share: its spec against the original's, a smoke-scale project, the
smoke run, the hidden-data attack from agent code, the one-line preflight and the data fetch failing closed.
Each task's test file calls these in a few lines and keeps only what is specific to its task."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pytest_fmlbench.scoring.original import builtin_tasks
from pytest_fmlbench.datacache.artifact import Artifact as DataArtifact
from pytest_fmlbench.datacache.cache import DataCache
from pytest_fmlbench.integrity import sha256_file
from pytest_fmlbench.spec import TaskSpec, load_task

from conftest import REPO
from shared_run import built_once, run_child

# the original's FML-bench-Lite subset (its README), by original task name
LITE = {"Continual_Learning_pycil", "Data_Efficiency_usb", "Generalization_domainbed",
        "Generalization_domainbed_officehome", "Robustness_openood", "Privacy_opacus", "Privacy_privacymeter",
        "Robustness_and_Reliability_art"}

# editable files that are always the task's own, never a checkout's: the harness contract's train/val cut
TASK_OWN = {"split_config.json"}

# the logs of the runs that import editable code: the search step's val run, the final val and test runs
RUN_LOGS = ("step_0001_val.log", "final_val.log", "final_test.log")

# the sandbox that keeps agent code from the data is bubblewrap; the attacks mean nothing without it
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")


class FullTask:
    """A full-profile task as its tests see it: ids, folder and declared spec."""

    def __init__(self, small_id: str):
        self.small_id, self.id = small_id, f"{small_id}_full"
        self.folder = REPO / "task_suites" / small_id / "full"
        self.spec = load_task(self.folder / "task.yaml").spec
        self.artifacts = {artifact.name: artifact for artifact in self.spec.data}

    def harness_module(self, name: str):
        """One of the harness's modules, imported as the harness does; its generic names (prepare, evaluate...)
        are taken out of sys.modules again, for other tasks' tests that import their own."""
        harness = self.folder / "harness"
        sys.path.insert(0, str(harness))
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(str(harness))
            for loaded in [key for key, module in sys.modules.items() if getattr(module, "__file__", None)
                           and Path(module.__file__).parent == harness]:
                del sys.modules[loaded]

    def run_dir(self, project: Path) -> Path:
        (run,) = (project / "reports" / "fmlbench" / "runs" / self.id).glob("*")
        return run


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    """The data cache the child pytest and the CLI read, empty until a test fills it."""
    root = tmp_path / "fmlbench-data"
    monkeypatch.setenv("FMLBENCH_DATA", str(root))
    return root


def assert_matches_original(spec: TaskSpec, *, cpu_only: bool = False) -> None:
    """Metric, direction, bounds, Lite membership and (as a reference) baseline values of the original task;
    ``cpu_only`` where the original runs on CPUs (then the task asks for no GPU)."""
    assert spec.profile == "full" and spec.original is not None
    facts = builtin_tasks()[spec.original.task]
    assert spec.metric.key == facts.metric
    assert spec.metric.direction == facts.direction and spec.metric.transform == facts.transform
    assert spec.original.dataset == facts.dataset
    assert (spec.normalization.best, spec.normalization.worst) == (facts.best, facts.worst)
    assert ("lite" in spec.markers) == (spec.original.task in LITE)
    assert spec.id == spec.original.task.lower() + "_full"
    if spec.baseline.source == "paper":
        assert (spec.baseline.val, spec.baseline.test) == (facts.baseline_val, facts.baseline_test)
        assert "not yet reproduced" in spec.baseline.note
    elif spec.baseline.source == "measured":
        assert spec.baseline.hardware
    else:  # unmeasured: no values to score against
        assert spec.baseline.val is None and spec.baseline.test is None
    if cpu_only:
        assert spec.resources.gpus == 0 and spec.resources.gpu_memory_gb is None and spec.expected_duration_s
    else:
        assert spec.resources.gpus >= 1 and spec.resources.gpu_memory_gb and spec.expected_duration_s
    for artifact in spec.data:
        assert artifact.fixture, f"{artifact.name} has no smoke-scale fixture"


def assert_edits_the_originals_checkout(spec: TaskSpec) -> DataArtifact:
    """The editable files are the original's target files, copied from the git artefact pinned at the
    original's commit (but split_config.json, the task's own); returns that artefact."""
    assert tuple(spec.editable) == builtin_tasks()[spec.original.task].target_files
    (checkout,) = [a for a in spec.data if a.kind == "git"]
    assert checkout.commit == spec.original.pinned_commit
    (copy,) = spec.upstream
    assert copy.artifact == checkout.name and all(copy.covers(path) for path in spec.editable if path not in TASK_OWN)
    return checkout


def fmlbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("fmlbench")
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=600, env=env)


def copy_task(pytester, small_id: str) -> None:
    copy_task_into(pytester.path, small_id)


def copy_task_into(project: Path, small_id: str) -> None:
    shutil.copytree(REPO / "task_suites" / small_id, project / "task_suites" / small_id,
                    ignore=shutil.ignore_patterns("__pycache__"))


def fill_smoke_project(project: Path, small_id: str, data_root: Path) -> Path:
    """``project`` given ``small_id``'s folder (its full task inside), and smoke fixtures in ``data_root``;
    returns the full task's folder."""
    copy_task_into(project, small_id)
    done = fmlbench("data", "fixtures", "-k", f"{small_id}_full", "--suite", str(project / "task_suites"),
                    "--root", str(data_root))
    assert done.returncode == 0, done.stdout + done.stderr
    return project / "task_suites" / small_id / "full"


def load_full_record(project: Path, task_id: str) -> dict:
    records = sorted((project / "reports" / "fmlbench" / "runs" / task_id).glob("*/record.json"))
    assert len(records) == 1, records
    return json.loads(records[0].read_text())


def assert_smoke_is_said(task: FullTask, output: pytest.LineMatcher) -> None:
    """Smoke is never a result: the session's live lines and its tables say so."""
    output.fnmatch_lines([f"*{task.id}[[]seed0] (smoke) step 1/1 *", "*/ smoke*"])


def assert_smoke_record(task: FullTask, record: dict, data_root: Path, metric_range: tuple[float, float]) -> None:
    assert record["scale"] == "smoke" and record["integrity"] == "ok" and record["status"] == "finished"
    assert record["valid_steps"] == 1 and metric_range[0] <= record["test_metric"] <= metric_range[1]
    # the record names the bytes it was measured on: each artefact's SHA-256 and size, or its commit
    cache = DataCache(data_root, "smoke")
    assert record["data"] == {artifact.name: cache.identity(artifact) for artifact in task.spec.data}
    assert all(("sha256" in found and "size" in found) or "commit" in found for found in record["data"].values())


def assert_other_data_are_not_resumed(task: FullTask, shared: SharedSmokeRun, artifact_name: str, copy: Path) -> None:
    """After the module's smoke run (in ``copy``, a copy of its project and data cache, which the other tests
    still read): once an artefact's bytes change (a cache pinned anew), the recorded run is neither reused nor
    resumed on them; one line says so, and the record keeps the data it was measured on."""
    project, data_root = copy / "project", copy / "fmlbench-data"
    shutil.copytree(shared.project, project, symlinks=True)
    shutil.copytree(shared.data_root, data_root, symlinks=True)
    cache = DataCache(data_root, "smoke")
    artifact = next(a for a in task.spec.data if a.name == artifact_name)
    before = load_full_record(project, task.id)
    path = cache.path(artifact)
    path.write_bytes(path.read_bytes() + b"\0")
    cache.write_stamp(artifact, sha256=sha256_file(path), size=path.stat().st_size)
    agent = "baseline" if shared.attack is None else "attack_agent.py:MyAgent"
    result = run_child(project, f"--agent={agent}", "--steps=1", "-m", "full", "--scale=smoke", "task_suites",
                       env={"FMLBENCH_DATA": str(data_root)})
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{task.id} seed 0: the data differ from those its recorded steps were measured on "
                                 f"({artifact_name}): rerun with --fresh*"])
    # the session's end audits every record it finds again: all else is as the run left it
    after = load_full_record(project, task.id)
    assert {**after, "audit": None} == {**before, "audit": None}


def assert_workspace_holds_the_checkout(attack: Attack | None, run: Path, checkout: Path, paths) -> None:
    """The run's workspace holds these files of the checkout (the smoke stand-in's) byte for byte; the file
    ``attack`` edited (None: the baseline's run), as the checkout's with that edit."""
    for rel in paths:
        expected = (checkout / rel).read_bytes()
        if attack is not None and rel == attack.editable:
            expected = attack.applied_to(expected)
        assert (run / "search" / "workspace" / rel).read_bytes() == expected, rel


# The attack, appended to an editable file after one of its imports, runs in every run that imports that file.
# It knows where the harness keeps the data cache and the task's harness (the test tells it, through variables
# the sandbox lets through); it tries to read them, the files the task names in either and the private folder
# beside the workspace, walks the file system for the task's secret file names, and prints all it reached on
# one line. Its names are private so that it shadows nothing of the file it lands in.
ATTACK_PROBE = r'''
import atexit as _atexit, json as _json, os as _os, sys as _sys
from pathlib import Path as _Path
_found = []
_cache = _Path(_os.environ.get("FMLBENCH_EXPERIMENT_CACHE", "/nonexistent-cache"))
_harness = _Path(_os.environ.get("FMLBENCH_EXPERIMENT_HARNESS", "/nonexistent-harness"))
_private = _Path.cwd().parent / "private"
if _os.environ.get("FMLBENCH_DATA"):
    _found.append("env:FMLBENCH_DATA")
_probes = [_cache, *(_cache / _p for _p in CACHE_PATHS), _harness, *(_harness / _p for _p in HARNESS_PATHS),
           _private, *(_private / _p for _p in PRIVATE_PATHS)]
for _path in _probes:
    try:
        _content = _os.listdir(_path) if _path.is_dir() else _path.read_bytes()
    except OSError:
        continue
    if _content:
        _found.append(str(_path))
_skip = ("/proc", "/sys", "/dev", "/usr", _sys.prefix, _sys.base_prefix)
for _root, _dirs, _files in _os.walk("/", onerror=lambda e: None):
    if _root.startswith(_skip):
        _dirs[:] = []
        continue
    _found += [_os.path.join(_root, _f) for _f in _files if _f in SECRET_NAMES]
print("ATTACK found:", _json.dumps(_found), flush=True)
'''

# At test time, once a secret file was reached, it writes the outputs from it: a leak turns into a perfect score
CHEAT = r'''
_leak = next((_f for _f in _found if _f.endswith(LEAKED)), None)
if _leak and "test" in _sys.argv:
    import numpy
    _out = _Path(_sys.argv[_sys.argv.index("--out") + 1])
    _atexit.register(lambda: WRITE)
'''


def attack_payload(*, cache: tuple[str, ...], private: tuple[str, ...], secrets: tuple[str, ...],
                   harness: tuple[str, ...] = (), leaked: str | None = None, write: str = "") -> str:
    """Agent code that reports every path it reached of: the data cache and the ``cache`` paths below it, the
    harness folder and its ``harness`` paths, the private folder and its ``private`` paths, and any file named
    in ``secrets`` anywhere. With ``leaked``, the test run that reached that file runs ``write`` (an expression
    using numpy, ``_leak`` and ``_out``, the output folder) at exit, turning the leak into outputs."""
    code = (ATTACK_PROBE.replace("CACHE_PATHS", repr(cache)).replace("HARNESS_PATHS", repr(harness))
            .replace("PRIVATE_PATHS", repr(private)).replace("SECRET_NAMES", repr(secrets)))
    if leaked:
        code += CHEAT.replace("LEAKED", repr(leaked)).replace("WRITE", write)
    return code


def attack_agent(editable: str, anchor: str, payload: str) -> str:
    """An agent whose one step appends ``payload`` to ``editable`` after its line ``anchor`` and runs."""
    return f"""
from pytest_fmlbench import Agent, SearchReplace

class MyAgent(Agent):
    def run(self, session):
        edit = session.edit([SearchReplace({editable!r}, {anchor + chr(10)!r}, {anchor + chr(10)!r} + {payload!r})])
        assert edit.applied, edit.error
        session.run_step("improve", edit=edit)
"""


class Attack:
    """The attack agent's one edit: ``payload`` appended to ``editable`` after its line ``anchor``."""

    def __init__(self, editable: str, anchor: str, payload: str):
        self.editable, self.anchor, self.payload = editable, anchor, payload

    @property
    def agent_source(self) -> str:
        return attack_agent(self.editable, self.anchor, self.payload)

    def applied_to(self, original: bytes) -> bytes:
        """The editable file's bytes once the edit is applied (the editor replaces the one match)."""
        line = self.anchor + "\n"
        return original.decode().replace(line, line + self.payload, 1).encode()


class SharedSmokeRun:
    """What the module's one smoke run left: its project and data cache, the record, the run folder and the
    session's output; ``attack`` is the edit its agent made, None when the baseline agent took the step (no
    bubblewrap)."""

    def __init__(self, project: Path, data_root: Path, record: dict, run: Path, attack: Attack | None,
                 output: list[str]):
        self.project, self.data_root, self.record, self.run, self.attack = project, data_root, record, run, attack
        self.output = output

    @property
    def fixtures(self) -> Path:
        """The smoke fixtures the run read (its data cache's smoke folder): read them, never change them."""
        return self.data_root / "smoke"


def shared_smoke_attack_run(task: FullTask, attack: Attack):
    """A module-scoped fixture: the task's one-step smoke run on fixtures, offline, that its smoke test and its
    attack test both read (shared_run.py). The attack agent takes the step with ``attack``; its code leaves the
    method as it is (its cheat writes outputs only from a leaked file), so the run is the baseline's smoke run
    with a probe in it. Without bubblewrap the attack means nothing (its test is skipped) and the baseline agent
    takes the step instead."""

    def build(folder: Path) -> SharedSmokeRun:
        project, data_root = folder / "project", folder / "fmlbench-data"
        project.mkdir()
        full = fill_smoke_project(project, task.small_id, data_root)
        env = {"FMLBENCH_DATA": str(data_root)}
        if shutil.which("bwrap") is None:
            attack_or_none, agent = None, "baseline"
        else:
            (project / "attack_agent.py").write_text(attack.agent_source)
            attack_or_none, agent = attack, "attack_agent.py:MyAgent"
            env.update(FMLBENCH_EXPERIMENT_CACHE=str(data_root), FMLBENCH_EXPERIMENT_HARNESS=str(full / "harness"))
        result = run_child(project, f"--agent={agent}", "--steps=1", "-m", "full", "--scale=smoke", "task_suites",
                           env=env)
        result.assert_outcomes(passed=1)
        return SharedSmokeRun(project, data_root, load_full_record(project, task.id), task.run_dir(project),
                              attack_or_none, result.outlines)

    @pytest.fixture(scope="module", name="shared_run")
    def fixture(tmp_path_factory) -> SharedSmokeRun:
        return built_once(tmp_path_factory, f"{task.id}-smoke-attack", build)

    return fixture


def assert_the_smoke_run_passed(task: FullTask, shared: SharedSmokeRun,
                                metric_range: tuple[float, float] = (0.0, 1.0)) -> tuple[dict, Path]:
    """The module's smoke run (``shared_smoke_attack_run``) passed: its record is whole and its test metric
    lies in ``metric_range``. Returns the record and the run's folder, for the task's own checks."""
    assert_smoke_record(task, shared.record, shared.data_root, metric_range)
    assert_smoke_is_said(task, pytest.LineMatcher(shared.output))
    # a library that writes a file as it loads (ART's config, matplotlib's cache) makes the warm parent refuse
    # it, and then every step starts cold and imports everything again; such a task declares `warm:` without it
    warm_log = shared.run / "logs" / "warm_start.log"
    said = warm_log.read_text() if warm_log.exists() else ""
    assert "warm start off for experiment commands" not in said, said
    return shared.record, shared.run


def assert_the_shared_attack_reached_nothing(shared: SharedSmokeRun, logs: tuple[str, ...] = RUN_LOGS,
                                             perfect: float = 1.0) -> tuple[dict, Path]:
    """The module's smoke run was the attack's: every run whose log is in ``logs`` printed its report, each
    report is empty, and the test metric is not the ``perfect`` value a leak would give. Returns the record
    and the run's folder."""
    assert shared.attack is not None
    assert_reports_are_empty(shared.record, shared.run, logs, perfect)
    return shared.record, shared.run


def assert_each_report_is_empty(run: Path, logs: tuple[str, ...]) -> None:
    """The probe reported once in each run whose log is in ``logs``, and each report names nothing."""
    reports = {log: re.findall(r"^ATTACK found: (.*)$", (run / "logs" / log).read_text(), re.MULTILINE)
               for log in logs}
    assert all(len(found) == 1 for found in reports.values()), reports  # the attack ran in each of those runs
    reached = {log: json.loads(found[0]) for log, found in reports.items()}
    assert all(paths == [] for paths in reached.values()), reached


def assert_reports_are_empty(record: dict, run: Path, logs: tuple[str, ...], perfect: float) -> None:
    assert_each_report_is_empty(run, logs)
    assert record["integrity"] == "ok" and record["status"] == "finished" and record["test_metric"] != perfect


def assert_missing_data_is_one_line(task: FullTask, pytester, bench, data_root: Path, artifact: str) -> None:
    """With an empty cache the task errors before any step, on one line naming the first missing artefact
    (``artifact``: its name and description, as an fnmatch pattern) and the command that fetches it."""
    copy_task(pytester, task.small_id)
    result = bench("--agent=baseline", "--steps=1", "-m", "full", "task_suites")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{task.id}: {artifact} is not in the data cache {data_root}: "
                                 f"run `fmlbench data fetch -k {task.id}`*"])
    assert not (pytester.path / "reports" / "fmlbench" / "runs" / task.id).exists()  # no step, no record


def _fixture_file(fixtures: Path, artifact: DataArtifact) -> Path:
    return fixtures / artifact.name / ("src" if artifact.kind == "git" else artifact.file_name)


def _refusal(artifact: DataArtifact) -> str:
    """The pattern of the one line saying why the fixture's bytes or repository were refused."""
    if artifact.kind == "git":
        return rf"{artifact.name}: failed: .*{artifact.commit}"
    expected = artifact.sha256 or artifact.md5 or f"one starting {artifact.sha256_prefix}"
    return rf"{artifact.name}: failed: {artifact.name}: not fetched, nothing kept: .*expected {expected}"


def _declare_own_checksum(entry: dict, fixture: Path, stamp: dict) -> None:
    """Declare in the task.yaml entry the checksum the fixture's bytes (or commit) have, in the kind the entry
    declares: MD5, a SHA-256 prefix (which the file's name carries) or the full SHA-256 and size."""
    if entry.get("md5"):
        entry["md5"] = hashlib.md5(fixture.read_bytes()).hexdigest()
    elif entry.get("sha256_prefix"):
        prefix = stamp["sha256"][:8]
        stem, suffix = fixture.name.rsplit("-", 1)[0], fixture.suffix
        entry.update(sha256_prefix=prefix, filename=f"{stem}-{prefix}{suffix}")
    else:
        entry.update({key: stamp[key] for key in ("sha256", "size", "commit") if key in stamp})


def assert_fetch_fails_closed(task: FullTask, pytester, fixtures: Path, data_root: Path, *,
                              only: tuple[str, ...] = (), then_fetch: bool = True, select: str | None = None):
    """Every artefact (or those named in ``only``) served from a file:// source holding other bytes (the smoke
    fixtures, archives declared at their size so the checksum is what refuses them) or from a fixture
    repository without the pinned commit is refused on one line, and nothing is kept. With ``then_fetch``,
    declaring those sources' own checksums and commits fetches each (the editable files in the checkout), and a
    second fetch finds the first cached. ``select`` is the -k expression (the task's id by default). Returns the
    fetch's arguments.

    The sources are in ``fixtures``: the smoke fixtures ``fmlbench data fixtures`` wrote for the module's smoke
    run (``SharedSmokeRun.fixtures``), which a fetch only reads; writing a second set alike took seconds of
    processor time per task."""
    copy_task_into(pytester.path, task.small_id)
    full = pytester.path / "task_suites" / task.small_id / "full"
    spec = yaml.safe_load((full / "task.yaml").read_text())
    if only:
        spec["data"] = [entry for entry in spec["data"] if entry["name"] in only]
    sources = {entry["name"]: _fixture_file(fixtures, task.artifacts[entry["name"]]) for entry in spec["data"]}
    for entry in spec["data"]:
        entry["urls"] = [sources[entry["name"]].as_uri()]
        if "size" in entry:
            entry["size"] = sources[entry["name"]].stat().st_size  # the recorded checksum refuses it, not its size
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    args = ("data", "fetch", "-k", select or task.id, "--suite", str(pytester.path / "task_suites"))
    done = fmlbench(*args)
    assert done.returncode == 1, done.stdout + done.stderr
    for name in sources:
        assert re.search(_refusal(task.artifacts[name]), done.stdout), done.stdout
        kept = {p.name for p in (data_root / name).iterdir()} if (data_root / name).exists() else set()
        assert kept <= {".lock"}, kept  # no file, part, stamp or checkout
    if not then_fetch:
        return args
    for entry in spec["data"]:
        stamp = json.loads((fixtures / entry["name"] / "stamp.json").read_text())
        _declare_own_checksum(entry, sources[entry["name"]], stamp)
    (full / "task.yaml").write_text(yaml.safe_dump(spec))
    done = fmlbench(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    for entry in spec["data"]:
        name, source = entry["name"], sources[entry["name"]]
        assert f"{name}: fetched" in done.stdout, done.stdout
        if task.artifacts[name].kind == "git":
            assert all((data_root / name / "src" / rel).is_file() for rel in task.spec.editable if rel not in TASK_OWN)
        else:
            assert (data_root / name / (entry.get("filename") or source.name)).read_bytes() == source.read_bytes()
    assert f"{spec['data'][0]['name']}: cached" in fmlbench(*args).stdout
    return args
