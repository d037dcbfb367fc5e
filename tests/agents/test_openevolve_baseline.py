"""OpenEvolve's baseline seed, as FML-bench's port makes it (agents/openevolve/agent.py 883-930, 1399-1407).

The port runs the baseline code once before its loop (``self.executor.run_val(run_id=0)``, no
``step_count`` increment: outside the step budget), seeds every island with the value it measured (a
failed run makes the seeds buggy, with no error text), and tests the population's best program at the
end: the seed, until a child beats its value strictly (``_is_better``: ``>``). Expectations below are
derived from that code by hand.

Toy-task validation accuracies (the task declares 0.76 for its baseline): the baseline's config
lr=0.01/epochs=5 0.76, lr=0.001/epochs=1 0.76 (other code, same value), lr=0.5/epochs=10 0.79,
lr=-0.5/epochs=10 0.27 (runs, far worse).
"""

from __future__ import annotations

import json
import shutil

import pytest

from llm.fake_llm import Say, Seen
from llm.fixtures import TOY, api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401  (fixtures)
from llm.toy_coder import BROKEN_ALGO, GOOD_ALGO, file_block
from pytest_fmlbench.reports.html import render_html
from pytest_fmlbench.runner import RunError
from pytest_fmlbench.scoring.runs import labels

WORSE = {"lr": -0.5, "epochs": 10}      # 0.27
TIED = {"lr": 0.001, "epochs": 1}       # 0.76, other code than the baseline's
BETTER = {"lr": 0.5, "epochs": 10}      # 0.79


def prompt_of(seen: Seen) -> str:
    return seen.body["messages"][-1]["content"]


def is_analysis(seen: Seen) -> bool:
    return "You analyse ML experiments" in seen.body["messages"][0]["content"]


class Scripted:
    """Evolve calls answer with the configs given, in turn; a debug call fixes algorithm.py."""

    def __init__(self, *configs: dict):
        self.configs = list(configs)
        self.coding: list[str] = []

    def __call__(self, seen: Seen) -> Say:
        if is_analysis(seen):
            return Say("An analysis.")
        self.coding.append(prompt_of(seen))
        if "caused an error" in prompt_of(seen).split("## Instruction\n", 1)[-1]:
            return Say(file_block("algorithm.py", GOOD_ALGO))
        config = self.configs[(len(self.coding) - 1) % len(self.configs)]
        return Say(file_block("config.json", json.dumps(config)))


@pytest.fixture
def evolve(run_agent):  # noqa: F811
    def run(steps: int, task=TOY, **options):
        return run_agent("openevolve", steps=steps, task=task, options={"num_islands": 1, **options})

    return run


def test_the_baseline_runs_once_outside_the_budget_and_seeds_the_islands(evolve, fake_llm):
    model = Scripted(WORSE, TIED)
    fake_llm.responder = model
    run = evolve(steps=2, num_islands=3)
    record, steps = run.record, run.steps
    # two steps spent, two recorded; the baseline run is step 0 of the record, never in steps.jsonl
    assert record.steps_used == 2 and [s.step for s in steps] == [1, 2] and record.valid_steps == 2
    baseline = record.baseline_run
    assert (baseline.step, baseline.action, baseline.success, baseline.metric) == (0, "baseline", True, 0.76)
    assert run.store.read_snapshot(baseline.snapshot) == run.store.read_snapshot(record.baseline_snapshot)
    seeds = steps[0].extra["seeds"]
    assert seeds["programs"] == ["seed0", "seed1", "seed2"] and seeds["metric"] == 0.76
    assert seeds["source"].startswith("measured") and seeds["buggy"] is False
    # the first prompt shows the seed at its measured value
    assert "Current solution: accuracy = 0.76 (higher is better)" in model.coding[0]
    # the steps: 0.27 and 0.76 (tied with the seed, other code); neither beats the seed strictly
    assert [s.metric for s in steps] == [0.27, 0.76]
    assert record.best_step == 2 and record.best_val == 0.76  # the best step, as the port's summary has it
    # so the port's final test takes the seed's code, the baseline's: its measured test value is credited
    assert record.test_on_baseline and record.test_metric is not None
    # the tables' note and the HTML report say so
    assert "tested the baseline code (no step beat its measured validation value)" in labels(record)
    page = render_html([(record, steps, run.dir)], encoder="none")
    assert "baseline run, outside the step budget:\n0.76; the final test ran the baseline code" in page


def test_a_step_that_beats_the_measured_baseline_takes_the_final_test(evolve, fake_llm):
    fake_llm.responder = Scripted(WORSE, BETTER)
    run = evolve(steps=2)
    assert [s.metric for s in run.steps] == [0.27, 0.79]
    assert run.record.best_step == 2 and not run.record.test_on_baseline


def test_declared_seeds_cost_no_run_and_the_best_step_is_tested(evolve, fake_llm):
    fake_llm.responder = Scripted(WORSE, TIED)
    run = evolve(steps=2, baseline_seed="declared")
    assert run.record.baseline_run is None
    assert run.steps[0].extra["seeds"]["source"].startswith("declared")
    # no measured seed competes: the tied step is the best code, and it is tested
    assert run.record.best_step == 2 and not run.record.test_on_baseline


def test_a_failing_baseline_seeds_buggy_programs_with_no_error_text(evolve, fake_llm, tmp_path):
    task = tmp_path / "broken" / "toy_task"
    shutil.copytree(TOY, task)
    (task / "workspace" / "algorithm.py").write_text(BROKEN_ALGO)
    model = Scripted(BETTER)
    fake_llm.responder = model
    run = evolve(steps=1, task=task, debug_prob=1.0)
    record, (step,) = run.record, run.steps
    assert not record.baseline_run.success and "injected bug in fit" in record.baseline_run.stderr
    assert step.extra["seeds"]["buggy"] is True and step.extra["seeds"]["metric"] is None
    # a buggy seed of debug depth 0 < 2, with debug_prob 1: the first step debugs it; the port's seed keeps
    # no error output (error_context ""), so the editor is told none was captured, not the baseline's stderr
    assert step.action == "debug" and step.extra["parent_program"] == "seed0"
    assert "(no error output was captured)" in model.coding[0] and "Traceback" not in model.coding[0]
    assert step.success and not record.test_on_baseline


def test_a_resumed_run_replays_the_baseline_run(evolve, fake_llm, monkeypatch, tmp_path):
    model = Scripted(WORSE, TIED, BETTER)
    outage = {"on": True}
    # killed at the second coding call: the baseline run and step 1 are recorded
    kill_at_call(monkeypatch, lambda seen: outage["on"] and len(model.coding) >= 1 and not is_analysis(seen))
    fake_llm.responder = model
    with pytest.raises(RunError):
        evolve(steps=3)
    (record_file,) = tmp_path.glob("out/runs/toy_task/*/record.json")
    first = json.loads(record_file.read_text())["baseline_run"]
    assert first["step"] == 0 and first["metric"] == 0.76
    outage["on"] = False
    run = evolve(steps=3)
    assert run.record.resumed_from_step == 1 and run.record.steps_used == 3
    # the recorded baseline run, not a second one
    assert run.record.baseline_run.model_dump(mode="json") == first
    assert [s.metric for s in run.steps] == [0.27, 0.76, 0.79] and run.record.best_step == 3
