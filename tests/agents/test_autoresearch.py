"""Autoresearch on the toy task, scripted replies over the loopback server through the real openai SDK."""

import json

import pytest
from llm.fixtures import api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import shown_file
from scripted_coder import BROKEN_ALGO, GOOD_ALGO, ScriptedCoder, kind_of

from pytest_fmlbench.runner import RunError


def decisions(run):
    return [s.extra["autoresearch"]["decision"] for s in run.steps]


def test_keeps_only_strict_improvements_and_reverts_otherwise(run_agent, fake_llm):
    # toy val accuracy, lr .5: 10 epochs .79, 40 epochs .80, 80 epochs .81; the baseline is .76
    coder = ScriptedCoder(ideas=["lr=0.5,epochs=40", "epochs=10", "epochs=80", "epochs=80"])
    fake_llm.responder = coder
    run = run_agent("autoresearch", steps=4)
    steps = run.steps
    assert [s.metric for s in steps] == [0.80, 0.79, 0.81, 0.81]
    assert decisions(run) == ["keep", "discard", "keep", "discard"]  # an equal metric is not kept
    assert [(s.action, s.parent) for s in steps] == [("draft", None), ("improve", 1), ("improve", 1), ("improve", 3)]
    # each idea edits the incumbent: after the discard, step 3 starts again from step 1's code
    assert json.loads(run.files(3)["config.json"]) == {"lr": 0.5, "epochs": 80}
    assert steps[1].extra["autoresearch"] == {"incumbent_step": 1, "incumbent_metric": 0.80,
                                              "consecutive_crashes": 0, "decision": "discard", "reverted_to": 1}
    idea_prompts = [p for k, p in coder.prompts if k == "idea"]
    assert "Current Best: accuracy = 0.76 (higher is better)" in idea_prompts[0]
    assert "Current Best: accuracy = 0.8 (higher is better)" in idea_prompts[2]
    assert "   2 |   0.790000 | discard | IDEA: epochs=10" in idea_prompts[2]
    # the final test runs the best validation code
    assert run.record.best_step == 3 and run.record.test_metric is not None
    assert coder.kinds() == ["idea", "edit"] * 4 and run.record.usage.calls == 8


@pytest.mark.parametrize("debug_from, shown", [("incumbent", GOOD_ALGO), ("crashed", BROKEN_ALGO)])
def test_a_crash_gets_debug_retries_until_three_crashes_in_a_row_then_the_idea_is_given_up(
        run_agent, fake_llm, debug_from, shown):
    coder = ScriptedCoder(ideas=["bug", "lr=0.5,epochs=20", "bug"], edits=["bug", "bug", "fix"])
    fake_llm.responder = coder
    run = run_agent("autoresearch", steps=7, options={"debug_from": debug_from})
    steps = run.steps
    assert [s.action for s in steps] == ["draft", "debug", "debug", "improve", "improve", "debug", "improve"]
    chain = [s.extra["autoresearch"] for s in steps]
    assert [(c["decision"], c.get("next"), c.get("crashes_in_a_row")) for c in chain[:3]] == [
        ("crash", "debug retry", 1), ("crash", "debug retry", 2), ("crash", "give up the idea, revert", 3)]
    # the debug chain links each retry to the crash it fixes; the given-up idea left the baseline in place
    assert [s.parent for s in steps[:4]] == [None, 1, 2, None]
    assert steps[3].success and chain[3]["decision"] == "keep"
    # a fixed crash ends the chain and is judged like any run
    assert chain[4]["decision"] == "crash" and steps[5].success and chain[5]["decision"] in ("keep", "discard")
    assert steps[5].idea.startswith("[debug retry] IDEA: bug")
    # a debug retry is one editor call (no idea call), with the intended idea and the crash's stderr tail,
    # twice as the port shows it: in the instruction's Error section and as the editor's error context
    assert coder.kinds() == ["idea", "edit", "edit", "edit", "idea", "edit", "idea", "edit", "edit", "idea", "edit"]
    debug_prompt = [p for k, p in coder.prompts if k == "edit"][1]
    error = debug_prompt.split("## Previous execution error\n```\n", 1)[1].split("\n```", 1)[0]
    assert error.startswith("Traceback") and error.rstrip().endswith("RuntimeError: injected bug in fit")
    assert debug_prompt.count(error) == 2 and f"## Error\n```\n{error}\n```" in debug_prompt
    assert "The intended change was:\nIDEA: bug" in debug_prompt
    assert shown_file(debug_prompt, "algorithm.py").rstrip() == shown.rstrip()


@pytest.mark.parametrize("steps", [1, 2])
def test_never_exceeds_the_budget_and_spends_no_call_on_a_step_it_cannot_run(run_agent, fake_llm, steps):
    coder = ScriptedCoder(ideas=["epochs=+5", "bug", "epochs=+5"])
    fake_llm.responder = coder
    run = run_agent("autoresearch", steps=steps)
    assert run.record.status == "finished" and run.record.steps_used == len(run.steps) == steps
    # the crash at step 2 wants a debug retry, but no step is left: nothing more is asked
    assert coder.kinds() == ["idea", "edit"] * steps


def test_resume_after_a_crash_takes_the_same_decisions(run_agent, fake_llm, tmp_path, monkeypatch):
    ideas = ["lr=0.5,epochs=40", "bug", "epochs=10", "epochs=80"]
    fake_llm.responder = ScriptedCoder(ideas=list(ideas), edits=["bug"])
    reference = run_agent("autoresearch", steps=5, seed=1)

    coder = ScriptedCoder(ideas=list(ideas), edits=["bug"])
    outage = {"on": True}
    kill_at_call(monkeypatch, lambda seen: outage["on"] and kind_of(seen) == "edit" and coder.asked["edit"] >= 3)
    fake_llm.responder = coder
    with pytest.raises(RunError):
        run_agent("autoresearch", steps=5, seed=2)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/autoresearch*seed2*/steps.jsonl")
    assert len(steps_file.read_text().splitlines()) == 3
    outage["on"] = False
    resumed = run_agent("autoresearch", steps=5, seed=2)
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 3
    view = lambda run: [(s.action, s.parent, s.metric, s.idea, s.extra) for s in run.steps]  # noqa: E731
    assert view(resumed) == view(reference)
    assert coder.asked["edit"] == 5 and coder.asked["idea"] == 3  # nothing recorded was asked twice
