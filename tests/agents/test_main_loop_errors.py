"""An exception inside an agent's main loop, as FML-bench's ports handle it (commit d336651).

Autoresearch, AdaptiveSearch, OpenEvolve and AI Scientist v2 wrap their main loop in ``except Exception``
(autoresearch/agent.py 197-202, adaptivesearch 383-388, openevolve 855-860, ai_scientist_v2 362-366): the
loop ends and the run goes on to its final test on the best code so far. The AI Scientist v1 port catches
per idea (theaiscientist.py 299-310): the next idea starts from the baseline. AIRA (and AIDE) catch
nothing: the run ends as an error.

The exception is a bug planted in the agent's own code at a chosen call (the agent runs in the harness's
process so that the test can reach it); everything else is the real agent against the loopback server.
"""

from __future__ import annotations

import sys

import pytest
from llm.fixtures import api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)
from scripted_coder import ScriptedCoder
from test_ai_scientist_v1 import ToyScientist
from test_ai_scientist_v2 import ToyResearcher
from test_openevolve import ToyEvolver

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.runner import RunError


def plant_bug(monkeypatch, agent: str, attribute: str, call: int) -> dict:
    """``Class.method`` of the agent's module raises on its ``call``-th call and works as before otherwise."""
    module = sys.modules[load_agent_class(agent).__module__]
    owner_name, method = attribute.split(".")
    owner = getattr(module, owner_name)
    real = getattr(owner, method)
    calls = {"n": 0}

    def planted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == call:
            raise RuntimeError(f"planted bug in {attribute}")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, method, planted)
    return calls


# (agent, model, options, where the bug is, on which call, the catch's name in the record)
# Each bug fires right after the third step's run: the Climber judges a run after it, the others analyse it.
CATCHING = [
    ("autoresearch", ScriptedCoder, {}, "autoresearch.Climber.judge", 3, "autoresearch main loop"),
    ("adaptive-search", ScriptedCoder, {"encoder": "none"}, "autoresearch.Climber.judge", 3,
     "adaptive-search main loop"),
    ("openevolve", ToyEvolver, {"num_islands": 1}, "openevolve._Evolution.analyse", 3,
     "openevolve evolution loop"),
    ("ai-scientist-v2", ToyResearcher, {}, "ai-scientist-v2._TreeSearch.analyse", 3,
     "ai-scientist-v2 stage loop"),
]


@pytest.mark.parametrize("agent, model, options, where, call, name", CATCHING, ids=[c[0] for c in CATCHING])
def test_an_exception_in_the_main_loop_ends_it_and_the_best_code_gets_its_final_test(
        run_agent, fake_llm, monkeypatch, agent, model, options, where, call, name):
    owner_agent, attribute = where.split(".", 1)
    plant_bug(monkeypatch, owner_agent, attribute, call)
    fake_llm.responder = model()
    run = run_agent(agent, steps=6, options=options, in_process=True)
    record = run.record
    # the loop stopped at the third step; the run is finished, not an error, and says why it is short
    assert record.status == "finished" and record.error is None
    assert record.steps_used == len(run.steps) == 3 < record.steps_budget
    (caught,) = record.caught_errors
    assert caught.startswith(f"{name}: RuntimeError: planted bug in {attribute}\n")
    assert "Traceback" in caught
    # the final test ran on the best validation code of the three steps
    best = max((s for s in run.steps if s.success), key=lambda s: s.metric)
    assert record.best_step == best.step and record.test_metric is not None and record.test_error is None


@pytest.mark.parametrize("agent, model, options, where, call, name", CATCHING[:1], ids=["autoresearch"])
def test_loop_error_crash_ends_the_run_as_an_error(run_agent, fake_llm, monkeypatch, agent, model, options,
                                                   where, call, name):
    owner_agent, attribute = where.split(".", 1)
    plant_bug(monkeypatch, owner_agent, attribute, call)
    fake_llm.responder = model()
    with pytest.raises(RunError, match="planted bug"):
        run_agent(agent, steps=6, options={**options, "loop_error": "crash"}, in_process=True)


def test_ai_scientist_v1_goes_on_with_the_next_idea(run_agent, fake_llm, monkeypatch):
    # the bug hits the second editor call, in idea 1's second run: idea 1 ends, idea 2 starts afresh
    plant_bug(monkeypatch, "ai-scientist-v1", "_Scientist.ask", 2)
    model = ToyScientist()
    fake_llm.responder = model
    run = run_agent("ai-scientist-v1", steps=4, options={"num_ideas": 2, "num_reflections": 1},
                    in_process=True)
    record, steps = run.record, run.steps
    assert record.status == "finished" and record.steps_used == 4
    assert [s.idea for s in steps] == ["idea_1: Idea number 1"] + ["idea_2: Idea number 2"] * 3
    # idea 2 begins as any idea does: run 1, from the baseline, no parent
    assert (steps[1].action, steps[1].parent, steps[1].extra["run"]) == ("draft", None, 1)
    (caught,) = record.caught_errors
    assert caught.startswith("ai-scientist-v1 idea 1 (idea_1): RuntimeError: planted bug in _Scientist.ask")
    assert record.test_metric is not None


def test_aira_catches_nothing_the_run_ends_as_an_error(run_agent, fake_llm, monkeypatch):
    plant_bug(monkeypatch, "aira-mcts", "_Search.analyse", 3)
    fake_llm.responder = ScriptedCoder()
    with pytest.raises(RunError, match="planted bug in _Search.analyse"):
        run_agent("aira-mcts", steps=6, in_process=True)
