"""Every LLM agent, killed midway, resumes with the decisions an uninterrupted run takes.

A run is killed just before an LLM call (as a killed process leaves it: the steps so far in steps.jsonl,
the calls so far in llm_calls.jsonl; a provider error no longer ends a run, the agents go on with what
their ports make of a failed call). The resumed run rebuilds the
agent's state from the recorded steps and the replayed LLM ledger; its steps (actions, parents, ideas,
plans, metrics, search state in ``extra``, the code each step ran) must equal those of a run of the same
seed that was never interrupted, and no recorded call may be paid for again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llm.fixtures import TOY, api_keys, fake_llm, kill_at_call, llm_settings  # noqa: F401 (fixtures)
from llm.toy_coder import ToyCoder
from scripted_coder import ScriptedCoder
from test_ai_scientist_v1 import ToyScientist
from test_ai_scientist_v2 import ToyResearcher
from test_openevolve import ToyEvolver

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.llm import make_llm_factory
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.spec import load_task

STEPS = 6
SEED = 3

# (agent, a fresh scripted model, options): each script has a crash to recover from, so the cut can fall
# inside a debug chain, a retry or a stage hand-over
AGENTS = [
    ("aide", lambda: ToyCoder(drafts=("bug", "ok")), {"num_drafts": 2}),
    ("aira-mcts", lambda: ScriptedCoder(edits=["lr=0.5,epochs=10", "bug", "fix,epochs=40"]), {}),
    ("ai-scientist-v1", lambda: ToyScientist(plans={1: ["ok", "bug", "ok"]}),
     {"num_ideas": 3, "num_reflections": 2, "max_runs": 3}),
    ("ai-scientist-v2", lambda: ToyResearcher(drafts=("ok", "bug")), {}),
    ("autoresearch", lambda: ScriptedCoder(ideas=["epochs=20", "bug"]), {}),
    ("openevolve", lambda: ToyEvolver(evolves=("ok", "bug")), {"num_islands": 2, "migration_interval": 2}),
    ("adaptive-search", lambda: ScriptedCoder(ideas=["epochs=20", "bug"]),
     {"p1_window": 1, "branch_skip_max": 0, "branch_cutoff_1": 10, "encoder": "none"}),
]


def run(fake_llm, out: Path, agent: str, options: dict):
    cls = load_agent_class(agent)
    settings = llm_settings(fake_llm)
    return execute(load_task(TOY / "task.yaml"), SEED, RunSettings(
        agent_cls=cls, agent_name=agent, agent_options=cls.Options(**options), out_dir=out, steps=STEPS,
        model=settings.model, provider=settings.provider, llm_factory=make_llm_factory(settings),
        sandboxed=False))


def decisions(outcome) -> list[tuple]:
    store = outcome.store
    return [(s.step, s.action, s.parent, s.idea, s.plan, s.edit_applied, s.success, s.metric, s.analysis, s.extra,
             store.read_snapshot(s.snapshot)) for s in store.load_steps()]


@pytest.mark.parametrize("agent, model, options", AGENTS, ids=[a[0] for a in AGENTS])
def test_a_run_killed_midway_resumes_with_the_same_decisions(fake_llm, api_keys, tmp_path, monkeypatch,  # noqa: F811
                                                             agent, model, options):
    fake_llm.responder = model()
    whole = run(fake_llm, tmp_path / "whole", agent, options)
    reference = decisions(whole)
    calls = whole.record.usage.calls
    assert whole.record.status == "finished" and len(reference) == STEPS

    scripted, cut_at = model(), {}
    sent_before = len(fake_llm.completions)

    def recorded_steps() -> int:
        return sum(len(f.read_text().splitlines()) for f in (tmp_path / "cut").glob("runs/toy_task/*/steps.jsonl"))

    def cut(seen) -> bool:
        # the run dies just before its first call once half the steps are recorded
        if not cut_at and recorded_steps() >= STEPS // 2:
            cut_at["n"] = len(fake_llm.completions) - sent_before + 1  # the call that was never made
            return True
        return False

    kill_at_call(monkeypatch, cut)
    fake_llm.responder = scripted
    with pytest.raises(RunError):
        run(fake_llm, tmp_path / "cut", agent, options)
    (steps_file,) = (tmp_path / "cut").glob("runs/toy_task/*/steps.jsonl")
    done = len(steps_file.read_text().splitlines())
    assert 0 < done < STEPS  # killed midway

    before = len(fake_llm.completions)
    resumed = run(fake_llm, tmp_path / "cut", agent, options)
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == done
    assert decisions(resumed) == reference
    # nothing recorded was asked again: the call never made and the calls after it are the only new ones
    assert len(fake_llm.completions) - before == calls - (cut_at["n"] - 1)
    assert resumed.record.usage.calls == calls



def test_a_run_stopped_before_its_first_call_is_resumed_from_step_0(fake_llm, api_keys, tmp_path,  # noqa: F811
                                                                     monkeypatch):
    """A run stopped before anything was recorded (a session cap reached by another worker's calls before its
    first one) left a record: the next session resumes it, from step 0, rather than calling it a new run."""
    fake_llm.responder = ToyCoder(drafts=("ok",))
    killed = []
    kill_at_call(monkeypatch, lambda seen: not killed and not killed.append(seen))  # the first call only
    with pytest.raises(RunError):
        run(fake_llm, tmp_path, "aide", {"num_drafts": 1})
    (record,) = tmp_path.glob("runs/toy_task/*/record.json")
    assert not record.with_name("steps.jsonl").exists() or not record.with_name("steps.jsonl").read_text()
    resumed = run(fake_llm, tmp_path, "aide", {"num_drafts": 1})
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 0
