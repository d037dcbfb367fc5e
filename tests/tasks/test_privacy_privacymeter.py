"""privacy_privacymeter: the baseline reproduces task.yaml; the auditor trusts nothing the experiment leaves
behind; the hidden non-members and the reference models stay out of the experiment's reach."""

import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK = "privacy_privacymeter"
SOURCE = REPO / "task_suites" / TASK


@pytest.fixture
def task_copy(pytester):
    shutil.copytree(SOURCE, pytester.path / "task_suites" / TASK)
    return pytester.path / "task_suites" / TASK


def _harness_module(name):
    spec = importlib.util.spec_from_file_location(f"privacymeter_{name}", SOURCE / "harness" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the postponed annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_the_workspace_builds_the_network_the_auditor_loads():
    assert (SOURCE / "workspace" / "architecture.py").read_bytes() == (SOURCE / "harness" / "architecture.py").read_bytes()


def test_roc_points_match_sklearn():
    from sklearn.metrics import auc, roc_curve

    rmia = _harness_module("rmia")
    rng = np.random.default_rng(0)
    for _ in range(100):
        n = int(rng.integers(4, 300))
        membership = rng.random(n) < 0.5
        membership[:2] = [True, False]
        scores = np.round(rng.random(n) * rng.integers(2, 50)) / 10  # many ties, as RMIA's counts have
        fpr, tpr, _ = roc_curve(membership.astype(int), scores)
        ours = rmia.attack_results(scores, membership)
        assert ours["AUC"] == pytest.approx(auc(fpr, tpr), abs=1e-12)
        assert ours["TPR@0.0%FPR"] == pytest.approx(tpr[np.where(fpr <= 0.0)[0][-1]], abs=1e-12)
        assert ours["TPR@0.1%FPR"] == pytest.approx(tpr[np.where(fpr <= 0.001)[0][-1]], abs=1e-12)


class _Payload:
    """Unpickling this runs code: it leaves a marker file behind."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _evaluate(tmp_path, out):
    private = tmp_path / "private"
    private.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-s", "-E", str(SOURCE / "harness" / "evaluate.py"), "--split", "val",
         "--workspace", str(tmp_path), "--out", str(out), "--private", str(private),
         "--result", str(tmp_path / "result.json")],
        capture_output=True, text=True,
        cwd=SOURCE / "harness", timeout=120,
    )


@pytest.mark.parametrize("forgery", ["pickle", "link", "other_network", "nan"])
def test_the_auditor_loads_only_plain_weights_of_the_declared_network(tmp_path, forgery):
    import torch

    architecture = _harness_module("architecture")
    out = tmp_path / "out"
    out.mkdir()
    spec = architecture.ArchitectureSpec()
    (out / "model_spec.json").write_text(spec.model_dump_json())
    marker = tmp_path / "code_ran"
    weights = architecture.build(spec).state_dict()
    if forgery == "pickle":
        (out / "model.pt").write_bytes(pickle.dumps({"weights": _Payload(marker)}))
    elif forgery == "link":
        torch.save(weights, tmp_path / "elsewhere.pt")
        (out / "model.pt").symlink_to(tmp_path / "elsewhere.pt")
    elif forgery == "other_network":
        torch.save(architecture.build(architecture.ArchitectureSpec(width=8)).state_dict(), out / "model.pt")
    else:
        weights[next(iter(weights))][0] = float("nan")
        torch.save(weights, out / "model.pt")
    result = _evaluate(tmp_path, out)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("evaluate.py: ")
    assert not marker.exists() and not (tmp_path / "result.json").exists()


def test_baseline_reproduces_the_declared_values(pytester, bench, task_copy):
    spec = load_task(task_copy / "task.yaml").spec
    bench("--agent=baseline", "task_suites").assert_outcomes(passed=1)
    record = load_record(pytester.path, TASK)
    assert record["integrity"] == "ok" and record["status"] == "finished"
    assert record["best_val"] == pytest.approx(spec.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(spec.baseline.test, abs=1e-9)
    assert [c["ok"] for c in record["test_constraints"]] == [True]


# Runs when algorithm.py is imported (the val step, the final val and test runs). It looks for the
# auditor's reference signals (PRIVATE/reference_<split>.npz) and for the data carve with its seeds
# (harness/noisy_digits.py, which would hand it the hidden non-members): by relative path, by the
# absolute path of the run's harness, and by walking the whole project the benchmark runs in. With the
# carve it would also train on the hidden non-members, which makes them members and the attack blind.
ATTACK = textwrap.dedent('''
    import importlib.util, os
    from pathlib import Path
    _TARGETS = {"reference_val.npz", "reference_test.npz", "noisy_digits.py"}
    _found = {}
    def _grab(path):
        try:
            Path(path).read_bytes()
            _found.setdefault(Path(path).name, str(path))
        except OSError:
            pass
    for _p in ("../private/reference_val.npz", "../private/reference_test.npz", HARNESS + "/noisy_digits.py"):
        _grab(_p)
    for _root in ("..", HARNESS, PROJECT):
        for _dir, _, _files in os.walk(_root):
            for _name in _TARGETS.intersection(_files):
                _grab(os.path.join(_dir, _name))
    print("ATTACK FOUND", sorted(_found.values()), flush=True)
''')

USE_STOLEN = textwrap.dedent('''
    def train(model, X, y, config):
        if "noisy_digits.py" in _found:
            spec = importlib.util.spec_from_file_location("stolen", _found["noisy_digits.py"])
            stolen = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(stolen)
            parts = stolen.carve()
            X = torch.cat([X] + [torch.from_numpy(parts[k].X).to(X.device) for k in ("val_non", "test_non")])
            y = torch.cat([y] + [torch.from_numpy(parts[k].y).to(y.device) for k in ("val_non", "test_non")])
        return _honest_train(model, X, y, config)
''')


def test_hidden_non_members_and_reference_models_are_out_of_reach(pytester, bench, write_agent, task_copy):
    spec = load_task(task_copy / "task.yaml").spec
    payload = (ATTACK.replace("HARNESS", repr(str(task_copy / "harness")))
               .replace("PROJECT", repr(str(pytester.path))))
    agent = write_agent(f"""
        from pytest_fmlbench import Agent, WholeFile

        class MyAgent(Agent):
            def run(self, session):
                code = session.files["algorithm.py"]
                code = code.replace("import torch.nn as nn", "import torch.nn as nn\\n" + {payload!r}, 1)
                code = code.replace("def train(", "def _honest_train(") + {USE_STOLEN!r}
                edit = session.edit([WholeFile("algorithm.py", code)])
                assert edit.applied, edit.error
                result = session.run_step("improve", edit=edit)
                assert result.success, result.error
    """)
    bench(f"--agent={agent}", "task_suites").assert_outcomes(passed=1)
    record = load_record(pytester.path, TASK)
    assert record["integrity"] == "ok" and record["valid_steps"] == 1
    logs = {log.name: log.read_text() for log in pytester.path.glob(f"reports/fmlbench/runs/{TASK}/*/logs/*.log")}
    found = {name: lines for name, text in logs.items()
             if (lines := [line for line in text.splitlines() if line.startswith("ATTACK FOUND")])}
    # every run of the attacked code (the val step, the final val and the final test) finds nothing: the
    # sandbox shows it only its workspace and out folder, never the harness, PRIVATE or other runs
    assert sorted(found) == ["final_test.log", "final_val.log", "step_0001_val.log"], sorted(found)
    assert all(lines == ["ATTACK FOUND []"] for lines in found.values()), found
    # the honest method underneath is the baseline: the audit's numbers are exactly the baseline's
    assert record["best_val"] == pytest.approx(spec.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(spec.baseline.test, abs=1e-9)
