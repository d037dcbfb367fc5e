"""The final test's protocol on the toy task: what runs, what is recorded, and how it is scored."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_fmlbench import Agent, AgentOptions, WholeFile
from pytest_fmlbench.reports.runs import load_runs
from pytest_fmlbench.runner import RunSettings, execute
from pytest_fmlbench.scoring import Scores, run_note
from pytest_fmlbench.scoring.exploration import full_code
from pytest_fmlbench.spec import load_task

TOY = Path(__file__).parents[1] / "data" / "toy_task"
# breaks validation only in the fresh workspace of the final test (the search workspace is under search/)
FINAL_ONLY_BUG = (
    "import os, sys\n"
    "if os.sep + 'final' + os.sep in os.getcwd() and 'val' in sys.argv:\n"
    "    raise SystemExit('validation broken in the final workspace')\n"
)


class BreaksFinalValidation(Agent):
    name = "breaks-final-val"

    def run(self, session):
        code = session.files["algorithm.py"]
        session.edit([WholeFile("algorithm.py", FINAL_ONLY_BUG + code)])
        session.run_step("improve")


class AlwaysBroken(Agent):
    name = "always-broken"

    def run(self, session):
        for epochs in (1, 2):
            session.edit([WholeFile("algorithm.py", f"raise SystemExit('broken {epochs}')\n")])
            session.run_step("draft")


class TwoConfigs(Agent):
    name = "two-configs"

    def run(self, session):
        for epochs in (50, 150):
            session.edit([WholeFile("config.json", json.dumps({"lr": 0.5, "epochs": epochs}))])
            session.run_step("improve")


def run(tmp_path, agent_cls, steps=2):
    # a copy outside the checkout: the sandbox hides the task folder, and so any folder holding it
    task_dir = tmp_path / "toy_task"
    shutil.copytree(TOY, task_dir)
    # the protocol does not depend on isolation; unsandboxed, the test also runs from any checkout
    settings = RunSettings(agent_cls=agent_cls, agent_name=agent_cls.name, agent_options=AgentOptions(),
                           out_dir=tmp_path / "out", steps=steps, sandboxed=False)
    return execute(load_task(task_dir / "task.yaml"), 0, settings)


def test_a_failing_validation_rerun_does_not_stop_the_test(tmp_path):
    outcome = run(tmp_path, BreaksFinalValidation, steps=1)
    record = outcome.record
    assert record.best_val is not None and record.final_val is None
    assert "validation re-run of the best code failed" in record.final_val_error
    assert record.test_metric is not None and record.test_error is None  # the test ran all the same
    assert run_note(record) == "ok; unsandboxed; final val re-run failed, test still run"


def test_no_valid_step_tests_the_baseline_code_and_scores_the_declared_baseline(tmp_path):
    outcome = run(tmp_path, AlwaysBroken)
    record = outcome.record
    assert record.valid_steps == 0 and record.test_on_baseline and record.test_metric is not None
    row = Scores.from_runs(load_runs([outcome.store.dir]), encoder=None).runs.iloc[0]
    assert row["raw_test"] == 0.72 and row["ni"] == 0.0 and row["val_test_gap"] == 0.0
    assert row["note"] == "all val failed -> baseline (no valid step: tested the baseline code); unsandboxed"


def test_the_baseline_files_are_kept_and_every_step_is_embedded(tmp_path):
    outcome = run(tmp_path, TwoConfigs)
    record, store = outcome.record, outcome.store
    baseline = store.read_snapshot(record.baseline_snapshot)
    assert baseline == {name: (TOY / "workspace" / name).read_text() for name in load_task(TOY / "task.yaml").spec.editable}

    class Recording:
        name = "recording"

        def __init__(self):
            self.texts = []

        def embed(self, texts):
            self.texts.extend(texts)
            return np.array([[t.count('"epochs": 50}'), t.count('"epochs": 150}')] for t in texts], dtype=np.float32)

    encoder = Recording()
    row = Scores.from_runs(load_runs([store.dir]), encoder=encoder).runs.iloc[0]
    steps = [store.read_snapshot(s.snapshot) for s in store.load_steps()]
    assert encoder.texts == [full_code(files, baseline) for files in steps] + [full_code(baseline, baseline)]
    assert "epochs" in encoder.texts[0] and "val_ratio" not in encoder.texts[0]  # split_config.json left out
    assert row["encoder"] == "recording" and row["uniqueness"] == 1.0  # two distinct directions
    assert row["effective_dim"] == pytest.approx(1.0)  # two points span one dimension
    assert row["reach"] == pytest.approx(1.0) and row["spread"] == pytest.approx(np.sqrt(0.5), rel=1e-6)
