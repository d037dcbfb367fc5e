"""fairness_and_bias_aif360: the baseline reproduces task.yaml, and the hidden test labels stay out of reach."""

import shutil
import textwrap

import pytest

from pytest_fmlbench.spec import load_task

from conftest import REPO, load_record

TASK = "fairness_and_bias_aif360"


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
    assert [c["ok"] for c in record["test_constraints"]] == [True]


# Runs when algorithm.py is imported (the val step, the final val and test runs). It looks for the hidden
# test rows with their labels (PRIVATE/test.csv) and for the population generator with its seeds
# (harness/compas_like.py): by relative path, by the absolute path of the run's harness, and by walking
# the whole project the benchmark runs in. In the test run it predicts whatever labels it found.
ATTACK = textwrap.dedent('''
    import importlib.util, os, sys
    from pathlib import Path
    _found = {}
    def _grab(path):
        try:
            Path(path).read_bytes()
            _found.setdefault(Path(path).name, str(path))
        except OSError:
            pass
    for _p in ("../private/test.csv", "../private/visible.csv", HARNESS + "/compas_like.py"):
        _grab(_p)
    for _root in ("..", HARNESS, PROJECT):
        for _dir, _, _files in os.walk(_root):
            for _name in {"test.csv", "compas_like.py"}.intersection(_files):
                _grab(os.path.join(_dir, _name))
    print("ATTACK FOUND", sorted(_found.values()), flush=True)

    def _stolen_test_labels():
        if "compas_like.py" in _found:
            spec = importlib.util.spec_from_file_location("stolen", _found["compas_like.py"])
            stolen = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(stolen)
            return stolen.visible_and_test()[1]["two_year_recid"].to_numpy()
        if "test.csv" in _found:
            import pandas
            return pandas.read_csv(_found["test.csv"])["two_year_recid"].to_numpy()
        return None
''')

USE_STOLEN = textwrap.dedent('''
    class AdversarialDebiasing(_HonestAdversarialDebiasing):
        def predict(self, dataset):
            predicted = super().predict(dataset)
            labels = _stolen_test_labels() if "test" in sys.argv else None
            if labels is not None and len(labels) == len(predicted.labels):
                predicted.labels = labels.astype(float).reshape(-1, 1)
            return predicted
''')


def test_the_hidden_test_labels_are_out_of_reach(pytester, bench, write_agent, task_copy):
    spec = load_task(task_copy / "task.yaml").spec
    payload = (ATTACK.replace("HARNESS", repr(str(task_copy / "harness")))
               .replace("PROJECT", repr(str(pytester.path))))
    agent = write_agent(f"""
        from pytest_fmlbench import Agent, WholeFile

        class MyAgent(Agent):
            def run(self, session):
                code = session.files["algorithm.py"]
                code = code.replace("import numpy as np", "import numpy as np\\n" + {payload!r}, 1)
                code = code.replace("class AdversarialDebiasing:", "class _HonestAdversarialDebiasing:") + {USE_STOLEN!r}
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
    # the honest method underneath is the baseline: the scores are exactly the baseline's
    assert record["best_val"] == pytest.approx(spec.baseline.val, abs=1e-9)
    assert record["test_metric"] == pytest.approx(spec.baseline.test, abs=1e-9)
