"""Detection, the second line of defence: with the sandbox off (--no-sandbox), agents that alter protected
files, fake results or read labels are caught, named and recorded. In the default mode the same attempts
are refused (tests/test_isolation.py)."""

import json
import textwrap

import pytest

from conftest import junit_props, load_record

ATTACK_AGENT = """
    from pytest_fmlbench import Agent, SearchReplace

    class MyAgent(Agent):
        def run(self, session):
            payload = {payload!r}
            edit = session.edit([SearchReplace("algorithm.py", "import numpy as np", "import numpy as np\\n" + payload)])
            assert edit.applied, edit.error
            session.run_step("improve", edit=edit)
"""


def attack(write_agent, payload: str) -> str:
    return write_agent(ATTACK_AGENT.replace("{payload!r}", repr(textwrap.dedent(payload).strip())))


@pytest.mark.parametrize(
    "payload, message",
    [
        ("open('train.py', 'a').write('# patched')", "protected file workspace/train.py was modified (sha256 differs)"),
        ("import os; os.remove('data/dev.npz')", "protected file workspace/data/dev.npz was deleted"),
        (
            "import os, shutil; shutil.copy('train.py', '../train_copy.py'); os.remove('train.py'); "
            "os.symlink('../train_copy.py', 'train.py')",
            "protected file workspace/train.py was replaced by a link to ../train_copy.py",
        ),
        (
            "import os; os.makedirs('pytest_fmlbench', exist_ok=True); open('pytest_fmlbench/__init__.py', 'w').close()",
            "new file pytest_fmlbench/__init__.py shadows installed module 'pytest_fmlbench'",
        ),
        (
            "import numpy; numpy.save('../private/dev_labels.npy', numpy.zeros(400, dtype=int))",
            "harness-private file dev_labels.npy was modified or removed",
        ),
        ("HARNESS_EDIT", "protected file harness/evaluate.py was modified (sha256 differs)"),
    ],
    ids=["modify", "delete", "link", "shadow", "private-labels", "harness"],
)
def test_tampering_fails_the_item_and_names_the_path(pytester, toy, bench, write_agent, payload, message):
    if payload == "HARNESS_EDIT":
        payload = f"open({str(toy / 'harness' / 'evaluate.py')!r}, 'a').write('# patched')"
    spec = attack(write_agent, payload)
    result = bench(f"--agent={spec}", "--no-sandbox", "--junitxml=out.xml", "toy_task")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "Traceback" not in result.stdout.str()
    record = load_record(pytester.path)
    assert record["integrity"] == "violated" and record["status"] == "integrity_violated"
    assert any(message in p for p in record["integrity_violations"])
    assert record["test_metric"] is None  # a violated run is never scored
    props = junit_props(pytester.path / "out.xml", "toy_task[seed0]")
    assert props["integrity"] == "violated" and props["task"] == "toy_task"


def test_patched_metric_code_and_a_fake_results_file_do_not_change_the_score(pytester, toy, bench, write_agent):
    # the experiment patches numpy in its own process and writes a forged verdict where it can reach
    spec = attack(write_agent, """
        import json, sys
        np.mean = lambda *a, **k: 1.0
        out = sys.argv[sys.argv.index('--out') + 1]
        forged = {"datasets": {"blobs": {"means": {"accuracy": 1.0}, "stderrs": {}}}, "constraints": [], "info": {}}
        json.dump(forged, open(out + '/result.json', 'w'))
        json.dump(forged, open(out + '/../result.json', 'w'))
    """)
    result = bench(f"--agent={spec}", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["integrity"] == "ok"
    assert record["best_val"] == pytest.approx(0.76) and record["test_metric"] < 0.9


def test_a_step_that_hangs_is_killed_at_the_task_timeout(pytester, toy, bench, write_agent):
    task_yaml = toy / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace("timeout_s: 60", "timeout_s: 4"))
    spec = write_agent("""
        from pytest_fmlbench import Agent, SearchReplace

        class MyAgent(Agent):
            def run(self, session):
                edit = session.edit([SearchReplace("algorithm.py", "import numpy as np", "import numpy as np\\nimport time; time.sleep(120)")])
                result = session.run_step("improve", edit=edit)
                assert not result.success and "timed out after 4 s" in result.error, result.error
    """)
    result = bench(f"--agent={spec}", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert record["valid_steps"] == 0 and record["test_on_baseline"] is True
    result.stdout.fnmatch_lines(["*no valid step: tested the baseline code*"])


CONSTRAINED_EVALUATE = """
import json
from pathlib import Path

import numpy as np

from pytest_fmlbench.evalkit import ConstraintOutcome, harness_args, load_split_config, split_indices, write_result

args = harness_args()
floor = json.loads((Path(__file__).parent / "floor.json").read_text())[args.split]
if args.split == "val":
    labels = np.load(args.private / "dev_labels.npy")
    labels = labels[split_indices(len(labels), load_split_config(args.workspace))[1]]
else:
    labels = np.load(args.private / "test_labels.npy")
acc = float((np.load(args.out / "predictions.npy") == labels).mean())
write_result(args.result, {"blobs": {"accuracy": acc}},
             constraints=[ConstraintOutcome(name="min_accuracy", ok=acc >= floor, value=acc, limit=floor)])
"""


@pytest.mark.parametrize("floors, outcome", [({"val": 0.0, "test": 0.99}, "failed"), ({"val": 0.99, "test": 0.0}, "passed")])
def test_constraints_on_val_fail_the_step_and_on_test_fail_the_item(pytester, toy, bench, floors, outcome):
    (toy / "harness" / "evaluate.py").write_text(CONSTRAINED_EVALUATE)
    (toy / "harness" / "floor.json").write_text(json.dumps(floors))
    task_yaml = toy / "task.yaml"
    task_yaml.write_text(task_yaml.read_text().replace(
        "constraints: []", "constraints: [{name: min_accuracy, description: accuracy floor}]"))
    result = bench("--agent=baseline", "toy_task")
    result.assert_outcomes(**{outcome: 1})
    record = load_record(pytester.path)
    if outcome == "failed":
        result.stdout.fnmatch_lines(["*toy_task: constraint broken on test: min_accuracy*"])
        assert record["constraint_violated"] is True
        result.stdout.fnmatch_lines(["*constraint violated on test (NI = 0)*"])
    else:
        assert record["valid_steps"] == 0
        step = json.loads(next(pytester.path.glob("reports/fmlbench/runs/toy_task/*/steps.jsonl")).read_text())
        assert step["error"].startswith("constraint violated: min_accuracy")
