"""The CI recipe of docs/ci.md: its GitHub Actions workflow is valid, has the steps the page describes, and its
benchmark commands, run as the workflow runs them (the first job without a reference, the next one gating on
the session the first saved), work on the toy task."""

import re
import shlex
import shutil
from pathlib import Path

import yaml

from conftest import REPO

WORKFLOW = REPO / "docs" / "ci" / "github-actions.yml"
# the workflow's path of the reference sessions, restored before the benchmark and saved after it
SESSIONS = "reports/fmlbench/sessions"


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def steps_using(steps: list[dict], action: str) -> list[dict]:
    return [step for step in steps if step.get("uses", "").split("@")[0] == action]


def benchmark_commands(step: dict) -> list[list[str]]:
    """The pytest and fmlbench commands of a ``run:`` step, as argument lists."""
    commands = []
    for line in step.get("run", "").replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in ("pytest", "fmlbench"):
            commands.append(words)
    return commands


def runs_now(step: dict, project: Path) -> bool:
    """The step's ``if:`` as GitHub evaluates it here: ``hashFiles(GLOB)`` is '' where no file matches."""
    condition = step.get("if")
    if condition is None:
        return True
    match = re.fullmatch(r"hashFiles\('([^']+)'\) (==|!=) ''", condition.strip())
    assert match, f"a benchmark step's condition this test cannot evaluate: {condition!r}"
    found = any(project.glob(match.group(1)))
    return found if match.group(2) == "!=" else not found


def test_the_workflow_restores_a_reference_gates_on_it_uploads_the_reports_and_saves_main_s_session():
    flow = workflow()
    # YAML 1.1 reads the key "on" as True
    triggers = flow.get("on", flow.get(True))
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    (job,) = flow["jobs"].values()
    steps = job["steps"]
    assert steps_using(steps, "actions/checkout") and steps_using(steps, "actions/setup-python")
    install = "\n".join(step.get("run", "") for step in steps)
    assert "apt-get install -y -qq bubblewrap" in install and "pip install" in install

    (restore,) = steps_using(steps, "actions/cache/restore")
    (save,) = steps_using(steps, "actions/cache/save")
    assert restore["with"]["path"] == save["with"]["path"] == SESSIONS
    assert restore["with"]["restore-keys"] and save["with"]["key"].startswith(restore["with"]["restore-keys"])
    # a PR reads main's reference and never replaces it; main saves only a session that passed the gate
    assert "refs/heads/main" in save["if"] and "success()" in save["if"]

    benchmarks = [step for step in steps if benchmark_commands(step)]
    assert len(benchmarks) == 2
    first, gated = (benchmark_commands(step)[0] for step in benchmarks)
    assert "--fmlbench-compare=last" not in first
    assert "--fmlbench-compare=last" in gated and "--fmlbench-fail-on-regression=0.05" in gated
    order = [steps.index(step) for step in (restore, *benchmarks, save)]
    assert order == sorted(order)

    (upload,) = steps_using(steps, "actions/upload-artifact")
    assert upload["if"] == "always()"
    uploaded = upload["with"]["path"].split()
    for command in (first, gated):
        html = next(arg.split("=", 1)[1] for arg in command if arg.startswith("--fmlbench-html="))
        junit = next(arg.split("=", 1)[1] for arg in command if arg.startswith("--junitxml="))
        assert html in uploaded and junit in uploaded


def test_the_workflow_s_commands_make_a_reference_then_compare_and_gate_on_it(pytester, toy, bench, monkeypatch):
    """Two jobs of the workflow on the toy task: the first finds no reference and saves one; the next finds
    only the cached sessions folder (no run folders: nothing is reused) and compares with it."""
    monkeypatch.setenv("FMLBENCH_ENCODER", "none")  # exploration metrics play no part here
    # the workflow selects the Lite tasks: the toy task is one here
    spec = toy / "task.yaml"
    spec.write_text(spec.read_text().replace("markers: [toy]", "markers: [toy, lite]"))
    steps = workflow()["jobs"]["benchmark"]["steps"]
    benchmarks = [step for step in steps if benchmark_commands(step)]
    outputs = []
    for job in range(2):
        if job:
            # a new job: a fresh checkout, with the cache's path restored
            cached = pytester.path / "cached-sessions"
            (pytester.path / SESSIONS).rename(cached)
            shutil.rmtree(pytester.path / "reports")
            (pytester.path / SESSIONS).parent.mkdir(parents=True)
            cached.rename(pytester.path / SESSIONS)
        chosen = [step for step in benchmarks if runs_now(step, pytester.path)]
        assert len(chosen) == 1, [step["name"] for step in chosen]
        for program, *args in benchmark_commands(chosen[0]):
            assert program == "pytest"
            # one task here: the workflow's workers (-n) would only cost their start
            at = args.index("-n")
            result = bench(*args[:at], *args[at + 2:], "toy_task")
            assert result.ret == 0, result.stdout.str()[-3000:]
            result.assert_outcomes(passed=1)
            outputs.append(result.stdout.str())
        assert (pytester.path / "reports" / "fmlbench-report.html").is_file()
        assert (pytester.path / "reports" / "fmlbench-junit.xml").is_file()
    assert "FML-bench comparison" not in outputs[0]
    assert "FML-bench comparison" in outputs[1] and "no task lost more than 0.05" in outputs[1]
    assert len(list((pytester.path / SESSIONS).glob("0*.json"))) == 2
