"""The tamper suite: hostile experiment code, in the default mode, can neither move a score nor reach out.

Every attack runs as a user agent (the bring-your-own-agent interface) that appends a payload to
algorithm.py, on the toy task and, all together, on a real task. Each must be refused (and the score
stay what the unmodified code earns) or be flagged.
"""

import json
import os
import shutil
import socket
import sys
import sysconfig
import time
import uuid
from pathlib import Path

import pytest

from leftover_processes import none_left_with
import yaml

import pytest_fmlbench.evalkit as evalkit
from pytest_fmlbench import isolation
from conftest import REPO, junit_props, load_record
from isolation_attacks import COMBINED, agent_source, payload

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

SECRET_KEY = "sk-SECRET-do-not-leak-0123456789"


@pytest.fixture
def listener():
    """A TCP listener on loopback that records whether anything connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    yield server
    server.close()


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except (TimeoutError, socket.timeout, OSError):
        return False
    conn.close()
    return True


@pytest.fixture
def secrets(monkeypatch, tmp_path):
    """Credentials the harness holds: in its environment (under an obvious and an unguessable name) and in $HOME."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text("machine example.org login me password SECRET-netrc\n")
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("WAREHOUSE_URL", "postgres://me:SECRET-db@db/warehouse")
    monkeypatch.setenv("HOME", str(home))
    return home


def _run_attack(pytester, bench, names, task_dir, extra_args=(), **values):
    (pytester.path / "attack_agent.py").write_text(agent_source(payload(names, **values)))
    return bench("--agent=attack_agent.py:MyAgent", "--junitxml=out.xml", *extra_args, task_dir.name)


def _logs(project: Path, task: str) -> str:
    run = next((project / "reports" / "fmlbench" / "runs" / task).glob("*"))
    return "\n".join(p.read_text(errors="replace") for p in sorted((run / "logs").glob("*.log")))


def _site_packages() -> set[str]:
    import site

    return {sysconfig.get_paths()["purelib"], *site.getsitepackages()}


def _assert_contained(project: Path, task: str, harness_file: Path, harness_before: bytes, marker: str,
                      listener: socket.socket) -> dict:
    """What every attack run must show: nothing outside the step was touched or reached."""
    logs = _logs(project, task)
    assert "ATTACK" in logs, "the payload did not run"
    for line in logs.splitlines():
        # a run folder under the host's /tmp has stand-ins inside the sandbox's private /tmp: writing
        # there "succeeds" and vanishes with the step; the real records are checked below
        if line.startswith("ATTACK") and not line.startswith("ATTACK records: WROTE /tmp/"):
            assert "WROTE" not in line and "FOUND" not in line and "CONNECTED" not in line, line
            assert "crashed" not in line, line
    for folder in _site_packages():
        assert not list(Path(folder).glob("zz_fmlbench_attack*")), folder
    assert harness_file.read_bytes() == harness_before
    assert "# patched" not in Path(evalkit.__file__).read_text()
    assert not _accepted(listener), "the experiment reached a loopback listener"
    assert none_left_with(marker), "a process the experiment started outlived its step"
    record = load_record(project, task)
    run_dir = next((project / "reports" / "fmlbench" / "runs" / task).glob("*"))
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    assert len(steps) == record["steps_used"] == 1 and steps[0]["step"] == 1
    assert record["sandbox"] == "bwrap"
    for path in (p for p in run_dir.rglob("*") if p.is_file() and not p.is_symlink()):
        text = path.read_text(errors="replace")
        assert SECRET_KEY not in text and "SECRET-netrc" not in text and "SECRET-db" not in text, path
    return record


def _values(task_dir: Path, listener: socket.socket, home: Path, marker: str, patch: str) -> dict:
    return {"PORT": listener.getsockname()[1], "MARKER": marker, "HOME_DIR": home,
            "HARNESS_FILE": task_dir / "harness" / "evaluate.py", "PATCH": repr(patch)}


def test_every_attack_at_once_on_a_real_task(pytester, bench, listener, secrets):
    """fairness_fairlearn, one step of all the non-destructive attacks: the score is the baseline's."""
    task_dir = pytester.path / "fairness_fairlearn"
    shutil.copytree(REPO / "task_suites" / "fairness_fairlearn", task_dir)
    harness_file = task_dir / "harness" / "evaluate.py"
    before = harness_file.read_bytes()
    marker = f"fmlbench-attack-{uuid.uuid4().hex}"
    patch = "import fairlearn.metrics as m\nm.demographic_parity_difference = lambda *a, **k: 0.0\n"
    result = _run_attack(pytester, bench, COMBINED, task_dir,
                         **_values(task_dir, listener, secrets, marker, patch))
    result.assert_outcomes(passed=1)
    record = _assert_contained(pytester.path, "fairness_fairlearn", harness_file, before, marker, listener)
    spec = yaml.safe_load((task_dir / "task.yaml").read_text())
    assert record["integrity"] == "ok" and record["valid_steps"] == 1
    # the attack code runs the unchanged method: it earns exactly what the baseline earns
    assert record["test_metric"] == pytest.approx(spec["baseline"]["test"], abs=1e-3)
    assert record["test_metric"] > 0.05
    props = junit_props(pytester.path / "out.xml", "fairness_fairlearn[seed0]")
    assert props["sandbox"] == "bwrap" and props["integrity"] == "ok"
    blocked = json.loads(next(pytester.path.glob("reports/fmlbench/runs/*/*/steps.jsonl")).read_text())["blocked"]
    assert any("Read-only file system" in line for line in blocked), blocked


@pytest.mark.parametrize("names", [COMBINED, ["out-link"]], ids=["combined", "out-link"])
def test_attacks_on_the_toy_task(pytester, toy, bench, listener, secrets, names):
    harness_file = toy / "harness" / "evaluate.py"
    before = harness_file.read_bytes()
    marker = f"fmlbench-attack-{uuid.uuid4().hex}"
    patch = "import numpy\nnumpy.mean = lambda *a, **k: 1.0\n"
    result = _run_attack(pytester, bench, names, toy, **_values(toy, listener, secrets, marker, patch))
    record = _assert_contained(pytester.path, "toy_task", harness_file, before, marker, listener)
    result.assert_outcomes(passed=1)
    assert record["integrity"] == "ok"
    assert record["test_metric"] == pytest.approx(0.72)  # the toy baseline's score on the hidden split


def test_planted_bytecode_is_refused_or_flagged(pytester, toy, bench, listener, secrets):
    harness_file = toy / "harness" / "evaluate.py"
    before = harness_file.read_bytes()
    marker = f"fmlbench-attack-{uuid.uuid4().hex}"
    result = _run_attack(pytester, bench, ["pyc"], toy, **_values(toy, listener, secrets, marker, ""))
    result.assert_outcomes(passed=1)
    record = _assert_contained(pytester.path, "toy_task", harness_file, before, marker, listener)
    assert record["integrity"] == "ok"
    logs = _logs(pytester.path, "toy_task")
    # refused in the step and in the final val and test runs, both targets each time
    assert logs.count("ATTACK pyc: refused") == 6 and "Read-only file system" in logs


def _limited_toy(toy: Path, **resources) -> None:
    spec = yaml.safe_load((toy / "task.yaml").read_text())
    spec["resources"] = resources
    spec["timeout_s"] = 120
    (toy / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


@pytest.mark.parametrize("name, memory_mb, max_processes, reason", [
    ("fork-storm", None, 48, "too many processes"),
    ("memory-hog", 300, 1024, "out of memory"),
])
def test_resource_limits_end_the_step_not_the_harness(pytester, toy, bench, name, memory_mb, max_processes, reason):
    _limited_toy(toy, memory_mb=memory_mb, max_processes=max_processes)
    (pytester.path / "attack_agent.py").write_text(agent_source(payload([name])))
    started = time.monotonic()
    result = bench("--agent=attack_agent.py:MyAgent", "toy_task")
    # the step failed for the limit; the final test then ran the baseline code
    result.assert_outcomes(passed=1)
    assert time.monotonic() - started < 100, "the limit did not end the step before its timeout"
    record = load_record(pytester.path)
    steps = [json.loads(line) for line in next(pytester.path.glob("reports/fmlbench/runs/*/*/steps.jsonl")).read_text().splitlines()]
    assert steps[0]["success"] is False and reason in steps[0]["error"], steps[0]["error"]
    assert record["test_on_baseline"] and record["test_metric"] == pytest.approx(0.72)


def test_missing_bubblewrap_is_one_line_before_any_step(pytester, toy, bench, monkeypatch):
    python_dir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", str(python_dir))
    result = bench("--agent=baseline", "toy_task")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*toy_task: experiments run in a bubblewrap sandbox, but bwrap is not on PATH: *--no-sandbox*"])
    assert "Traceback" not in result.stdout.str()
    assert not (pytester.path / "reports" / "fmlbench" / "runs").exists()


def test_no_sandbox_is_marked_everywhere(pytester, toy, bench):
    result = bench("--agent=baseline", "--no-sandbox", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["sandbox"] == "unsandboxed"
    assert junit_props(pytester.path / "out.xml", "toy_task[seed0]")["sandbox"] == "unsandboxed"
    # a sandboxed run of the same command is a different run, never a reuse of the unsandboxed one
    bench("--agent=baseline", "toy_task").assert_outcomes(passed=1)
    records = sorted((pytester.path / "reports" / "fmlbench" / "runs" / "toy_task").glob("*/record.json"))
    assert sorted(json.loads(p.read_text())["sandbox"] for p in records) == ["bwrap", "unsandboxed"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_an_interpreter_tree_under_tmp_stays_visible(tmp_path, monkeypatch):
    """A checkout or venv under /tmp (CI, pytest's tmp dirs) is bound after the sandbox's private /tmp,
    not covered by it."""
    from pytest_fmlbench import isolation
    from pytest_fmlbench.isolation import mounts

    tree = tmp_path / "venv-like"
    tree.mkdir()
    (tree / "marker.txt").write_text("visible")
    assert str(tree).startswith(("/tmp/", "/var/tmp/")), "the test needs pytest's basetemp under /tmp"
    paths = mounts.python_paths()
    monkeypatch.setattr(mounts, "python_paths", lambda: (*paths, str(tree)))
    workspace, out = tmp_path / "ws", tmp_path / "out"
    workspace.mkdir()
    out.mkdir()
    view = isolation.ExperimentView(workspace, out, [], [])
    argv = isolation.bwrap_argv(view, ["/bin/cat", str(tree / "marker.txt")])
    import subprocess

    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "visible"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_a_symlinked_venv_and_output_folder_simply_work(pytester, toy):
    """A project whose .venv and output folder are symlinks to folders elsewhere (a small disk's layout)."""
    import subprocess

    (pytester.path / ".venv").symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    elsewhere = pytester.mkdir("elsewhere")
    (pytester.path / "results").symlink_to(elsewhere, target_is_directory=True)
    python = pytester.path / ".venv" / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "toy_task", "--agent=baseline",
                           "--steps=1", "--fmlbench-out=results"], cwd=pytester.path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    [record] = (elsewhere / "runs" / "toy_task").glob("*/record.json")
    record = json.loads(record.read_text())
    assert record["status"] == "finished" and record["sandbox"] == "bwrap"
    assert record["test_metric"] == yaml.safe_load((toy / "task.yaml").read_text())["baseline"]["test"]


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_an_interpreter_the_sandbox_cannot_see_is_one_line_before_any_step(pytester, toy, bench):
    # the sandbox as it was before symlinked spellings were bound: the interpreter's path leads nowhere inside
    pytester.makeconftest("""
        from pytest_fmlbench.isolation import mounts
        mounts.python_aliases = lambda: ()
    """)
    (pytester.path / ".venv").symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = pytester.path / ".venv" / "bin" / "python"
    result = pytester.run(str(python), "-m", "pytest", "-p", "no:cacheprovider", "toy_task", "--agent=baseline",
                          "--steps=3", timeout=600)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*toy_task: the sandbox cannot start the experiment's interpreter {python} "
                                 f"(its environment {pytester.path / '.venv'} is {Path(sys.prefix).resolve()}): "
                                 f"bwrap: execvp {python}: No such file or directory; *or pass --no-sandbox*"])
    record = load_record(pytester.path)
    assert record["status"] == "error" and "cannot start the experiment's interpreter" in record["error"]
    [run_dir] = (pytester.path / "reports/fmlbench/runs/toy_task").iterdir()
    assert not (run_dir / "steps.jsonl").exists() or not (run_dir / "steps.jsonl").read_text().strip()


def test_variables_pinning_the_numeric_kernels_reach_experiments_and_keys_do_not():
    """A user who pins MKL, oneDNN, ATen or numpy to one instruction set (to compare numbers across machines)
    gets that pin in the experiments; the allowlist lets nothing else through on their account."""
    pins = {"MKL_CBWR": "COMPATIBLE", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "avx2",
            "ONEDNN_MAX_CPU_ISA": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2", "NPY_DISABLE_CPU_FEATURES": "AVX512F",
            "OPENBLAS_CORETYPE": "Haswell"}
    env = isolation.sandbox_env({**pins, "OPENAI_API_KEY": SECRET_KEY, "MKL_LICENSE_TOKEN": SECRET_KEY})
    assert {name: env.get(name) for name in pins} == pins
    assert SECRET_KEY not in env.values()


def test_the_sandbox_probe_names_a_package_it_cannot_find_and_a_folder_it_cannot_see(tmp_path):
    """The probe each run starts before its first step, run here without a sandbox: it passes where the package,
    workspace and out folder are there, and says which one is missing otherwise."""
    import subprocess

    from pytest_fmlbench.isolation import selfcheck

    workspace, out = tmp_path / "workspace", tmp_path / "out"
    workspace.mkdir()
    out.mkdir()

    def probe(*flags: str, folder: Path = workspace) -> str | None:
        python, *rest = selfcheck.probe_argv(folder, out)
        done = subprocess.run([python, *flags, *rest], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        return selfcheck.problem(done.returncode, done.stdout + done.stderr, folder, out)

    assert probe() is None
    # -I -S: no site-packages, so no installed package, as in a sandbox that does not show the environment
    assert "the experiment cannot import pytest_fmlbench from" in probe("-I", "-S")
    assert "install the package into the interpreter's environment" in probe("-I", "-S")
    assert "the sandbox shows the experiment's workspace folder" in probe(folder=tmp_path / "gone")
    assert "as not visible" in probe(folder=tmp_path / "gone")
    assert "cannot start the experiment's interpreter" in selfcheck.problem(127, "bwrap: execvp: nope", workspace, out)
