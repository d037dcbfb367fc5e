"""causality_causalml: the baseline reproduces task.yaml, and the true effects stay out of the agent's reach."""

import shutil
import textwrap

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK = "causality_causalml"


@pytest.fixture
def task_copy(pytester):
    shutil.copytree(REPO / "task_suites" / TASK, pytester.path / "task_suites" / TASK)
    return pytester.path / "task_suites" / TASK


def test_baseline_reproduces_the_declared_values(pytester, bench, task_copy):
    spec = load_task(task_copy / "task.yaml").spec
    bench("--agent=baseline", "task_suites").assert_outcomes(passed=1)
    record = load_record(pytester.path, TASK)
    assert record["integrity"] == "ok" and record["status"] == "finished"
    assert record["best_val"] == pytest.approx(spec.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(spec.baseline.test, abs=1e-9)


# Runs when algorithm.py is imported, in the val step and in the final val and test runs. It looks for
# the true effects (the harness-private .npy files) and for the simulation itself (ihdp_like.py holds
# the seeds, beta and omega), by relative path, by the absolute path of the run's harness, and by
# walking the whole project the benchmark runs in; whatever it finds it uses to return the truth.
ATTACK = textwrap.dedent('''
    import importlib.util, os, sys
    from pathlib import Path
    _TARGETS = {"visible_ite.npy", "test_ite.npy", "ihdp_like.py"}
    _found = {}
    def _grab(path):
        try:
            Path(path).read_bytes()
            _found.setdefault(Path(path).name, str(path))
        except OSError:
            pass
    for _p in ("../private/visible_ite.npy", "../private/test_ite.npy", HARNESS + "/ihdp_like.py"):
        _grab(_p)
    for _root in ("..", HARNESS, PROJECT):
        for _dir, _, _files in os.walk(_root):
            for _name in _TARGETS.intersection(_files):
                _grab(os.path.join(_dir, _name))
    print("ATTACK FOUND", sorted(_found.values()), flush=True)

    def _truth():
        """The true effects of the scored units, from whatever was found (test files for the test run)."""
        testing = "test" in sys.argv
        if "ihdp_like.py" in _found:
            spec = importlib.util.spec_from_file_location("stolen", _found["ihdp_like.py"])
            stolen = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(stolen)
            table = stolen.visible_and_test()[1 if testing else 0]
            return (table["mu1"] - table["mu0"]).to_numpy()
        name = "test_ite.npy" if testing else "visible_ite.npy"
        return np.load(_found[name]) if name in _found else None
''')

USE_STOLEN = textwrap.dedent('''
    def estimate_ite(X_train, treatment_train, y_train, X_eval, config):
        truth = _truth()
        if truth is not None and "test" in sys.argv:
            return truth
        if truth is not None:
            from pytest_fmlbench.evalkit import load_split_config, split_indices
            return truth[split_indices(len(truth), load_split_config(Path.cwd()))[1]]
        return _honest_estimate_ite(X_train, treatment_train, y_train, X_eval, config)
''')


def test_the_true_effects_are_out_of_reach(pytester, bench, write_agent, task_copy):
    payload = (ATTACK.replace("HARNESS", repr(str(task_copy / "harness")))
               .replace("PROJECT", repr(str(pytester.path))))
    agent = write_agent(f"""
        from pytest_fmlbench import Agent, SearchReplace, WholeFile
        import json

        class MyAgent(Agent):
            def run(self, session):
                code = session.files["algorithm.py"]
                code = code.replace("import numpy as np", "import numpy as np\\n" + {payload!r}, 1)
                code = code.replace("def estimate_ite(", "def _honest_estimate_ite(") + {USE_STOLEN!r}
                config = json.loads(session.files["config.json"])
                config.update(adam_epochs=3, epochs=0)  # a quick, weak fit: only stolen truth could score ~0
                edit = session.edit([WholeFile("algorithm.py", code), WholeFile("config.json", json.dumps(config))])
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
    # an attack that had reached the truth would score ~0; a three-epoch DragonNet is far from it
    assert record["best_val"] > 0.3 and record["test_metric"] > 0.3
