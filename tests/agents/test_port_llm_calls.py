"""What each agent sends and what it makes of a failed call, as FML-bench's ports do (commit d336651).

Temperatures: the port's editor sends none (code_editor.py 147-155); every other call goes through its
``get_response_from_llm``, whose default is 0.75 (llm.py 217), and no agent passes another.

A model outage: after its retries a call fails for good, and the port turns it into a failed edit (the
editor catches it, code_editor.py 164-166; the step still runs the parent's code and costs its step) or
its fallback (an idea, "(analysis failed: ...)", ...). The step budget goes on, the final test runs, and
the record counts the failed calls.
"""

from __future__ import annotations

import shutil

import pytest
from llm.fake_llm import Fail, Seen
from llm.fixtures import TOY, api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import ToyCoder
from llm.toy_coder import kind_of as aide_kind
from scripted_coder import ScriptedCoder, kind_of
from test_ai_scientist_v1 import ToyScientist
from test_ai_scientist_v2 import ToyResearcher
from test_openevolve import ToyEvolver

from pytest_fmlbench.scoring import process_metrics

# purpose -> the temperature the port sends (None: none at all)
EDIT = None
PORT = 0.75
EDITOR_LIMIT, PORT_LIMIT = None, 8192  # reply limits of the editor's calls (none) and of the port's llm.py
EDITOR_SEED, PORT_SEED = None, 0  # llm.py sends seed=0 to a gpt model (llm.py 292-303); the editor sends none
TEMPERATURES = [
    ("aide", lambda: ToyCoder(drafts=("bug", "ok")), {"num_drafts": 1, "debug_prob": 1.0},
     {"draft": EDIT, "debug": EDIT, "improve": EDIT, "analysis": PORT}),
    ("aira-mcts", lambda: ScriptedCoder(edits=["bug"]), {},
     {"draft": EDIT, "debug": EDIT, "improve": EDIT, "analysis": PORT}),
    ("autoresearch", lambda: ScriptedCoder(ideas=["bug"]), {},
     {"idea": PORT, "draft": EDIT, "improve": EDIT, "debug": EDIT}),
    ("adaptive-search", lambda: ScriptedCoder(ideas=["bug"]), {"encoder": "none"},
     {"idea": PORT, "draft": EDIT, "improve": EDIT, "debug": EDIT}),
    ("openevolve", lambda: ToyEvolver(evolves=("bug", "ok")), {"num_islands": 1},
     {"evolve": EDIT, "debug": EDIT, "analysis": PORT}),
    ("ai-scientist-v1", lambda: ToyScientist(plans={1: ["bug"]}), {"num_ideas": 1, "num_reflections": 2},
     {"idea": PORT, "idea_reflection": PORT, "experiment": EDIT, "fix": EDIT}),
    ("ai-scientist-v2", lambda: ToyResearcher(drafts=("bug", "ok")), {},
     {"draft": EDIT, "improve": EDIT, "debug": EDIT, "analysis": PORT, "memory": PORT, "substage_goals": PORT}),
]


@pytest.mark.parametrize("agent, model, options, expected", TEMPERATURES, ids=[t[0] for t in TEMPERATURES])
def test_temperatures_are_the_ports(run_agent, fake_llm, agent, model, options, expected):
    fake_llm.responder = model()
    run = run_agent(agent, steps=3, options=options)
    sent = {}
    for call in run.ledger():
        sent.setdefault(call["purpose"], set()).add(call["request"]["temperature"])
    assert set(sent) <= set(expected)
    assert {purpose: temps for purpose, temps in sent.items()} == {p: {expected[p]} for p in sent}
    # and on the wire: a temperature goes out exactly with the calls that have one
    on_wire = sorted(str(seen.body.get("temperature")) for seen in fake_llm.completions)
    assert on_wire == sorted(str(call["request"]["temperature"]) for call in run.ledger())
    # reply limits and seeds: the port's own calls ask for llm.py's MAX_NUM_TOKENS = 8192 (llm.py 14) and send
    # seed 0 to this gpt model; its editor sends neither (code_editor.py 147-155)
    limits, seeds = {}, {}
    for call in run.ledger():
        limits.setdefault(call["purpose"], set()).add(call["request"]["max_output_tokens"])
        seeds.setdefault(call["purpose"], set()).add(call["request"]["seed"])
    assert limits == {p: {EDITOR_LIMIT if expected[p] is EDIT else PORT_LIMIT} for p in limits}
    assert seeds == {p: {EDITOR_SEED if expected[p] is EDIT else PORT_SEED} for p in seeds}
    on_wire = sorted((str(seen.body.get("max_tokens")), str(seen.body.get("seed"))) for seen in fake_llm.completions)
    assert on_wire == sorted((str(call["request"]["max_output_tokens"]), str(call["request"]["seed"]))
                             for call in run.ledger())


def failing(model, is_target, attempts: int = 5):
    """``model``, except that the first request ``is_target`` picks fails with a 500 on every attempt
    (the loopback settings allow 4 retries: 5 attempts), as an outage does; later ones are answered."""
    failed = {"n": 0}

    def respond(seen: Seen):
        if failed["n"] < attempts and is_target(seen):
            failed["n"] += 1
            return Fail(500, "the model is unavailable")
        return model(seen)

    return respond, failed


# (agent, model, options, which call fails, what the port makes of it in the record)
OUTAGES = [
    ("autoresearch", ScriptedCoder, {}, lambda m: lambda seen: kind_of(seen) == "edit" and m.asked["edit"] == 1,
     lambda steps: not steps[1].edit_applied and steps[1].edit_error.startswith("LLM call failed: openai: HTTP 500")),
    ("autoresearch", ScriptedCoder, {}, lambda m: lambda seen: kind_of(seen) == "idea" and m.asked["idea"] == 1,
     lambda steps: steps[1].idea == "Try a small hyperparameter change to improve the metric."
     and steps[1].edit_applied),
    ("aira-mcts", ScriptedCoder, {}, lambda m: lambda seen: kind_of(seen) == "analysis" and m.asked["analysis"] == 0,
     lambda steps: steps[0].analysis.startswith("(analysis failed: openai: HTTP 500: the model is unavailable")),
    ("openevolve", ToyEvolver, {"num_islands": 1}, lambda m: lambda seen: m.asked["evolve"] == 1
     and "You analyse ML experiments" not in seen.prompt,
     lambda steps: not steps[1].edit_applied and steps[1].edit_error.startswith("LLM call failed")),
    ("ai-scientist-v2", ToyResearcher, {}, lambda m: lambda seen: "judging experiment results" in seen.prompt,
     lambda steps: steps[0].analysis.startswith("Analysis failed: openai: HTTP 500")),
    ("aide", ToyCoder, {"num_drafts": 2}, lambda m: lambda seen: aide_kind(seen) == "draft" and m.asked["draft"] == 1,
     lambda steps: not steps[1].edit_applied and steps[1].edit_error.startswith("LLM call failed")
     and steps[1].success and not steps[1].extra["aide_buggy"]),
]


@pytest.mark.parametrize("agent, model, options, target, outcome", OUTAGES,
                         ids=["autoresearch-edit", "autoresearch-idea", "aira-analysis", "openevolve-edit",
                              "ai-scientist-v2-analysis", "aide-code"])
def test_an_outage_mid_run_becomes_the_ports_fallback_and_the_run_finishes(run_agent, fake_llm, agent, model,
                                                                            options, target, outcome):
    scripted = model()
    fake_llm.responder, failed = failing(scripted, target(scripted))
    run = run_agent(agent, steps=3, options=options)
    assert failed["n"] == 5  # the call was retried, then given up
    record = run.record
    assert record.status == "finished" and record.steps_used == 3 and len(run.steps) == 3
    assert outcome(run.steps)
    # the failed edit's step ran the parent's code: it succeeded and was measured
    assert all(s.success for s in run.steps if not s.edit_applied)
    # the final test ran on the best code, and the record says one call failed
    assert record.test_metric is not None and record.test_error is None
    assert record.llm_failed_calls == 1 and process_metrics(record, run.steps)["llm_failed_calls"] == 1.0
    errors = [call for call in run.ledger() if call.get("error")]
    assert len(errors) == 1 and errors[0]["error"]["kind"] == "unavailable"


# the port hands one task description to its editor and to its agent (benchmark/runner.py 78-86), so the
# task text every prompt shows is the same: here the description and the task's declared constraints
TASK_TEXT = [
    ("aide", ToyCoder, {"num_drafts": 1}),
    ("aira-mcts", ScriptedCoder, {}),
    ("autoresearch", ScriptedCoder, {}),
    ("adaptive-search", ScriptedCoder, {"encoder": "none"}),
    ("openevolve", ToyEvolver, {"num_islands": 1}),
    ("ai-scientist-v1", ToyScientist, {"num_ideas": 1, "num_reflections": 1}),
    ("ai-scientist-v2", ToyResearcher, {}),
]
CONSTRAINT = "accuracy on the hidden test split stays within 0.05 of validation"


@pytest.fixture(scope="module")
def constrained_toy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("constrained") / "toy_task"
    shutil.copytree(TOY, folder)
    spec = folder / "task.yaml"
    spec.write_text(spec.read_text().replace(
        "constraints: []", f'constraints:\n  - name: small_gap\n    description: "{CONSTRAINT}"'))
    return folder


@pytest.mark.parametrize("agent, model, options", TASK_TEXT, ids=[t[0] for t in TASK_TEXT])
def test_every_prompt_shows_the_task_with_its_constraints(run_agent, fake_llm, constrained_toy, agent, model,
                                                          options):
    fake_llm.responder = model()
    run_agent(agent, steps=2, options=options, task=constrained_toy)
    first_line = "Improve validation accuracy of the classifier in algorithm.py"
    with_task = [seen.prompt for seen in fake_llm.completions if first_line in seen.prompt]
    assert with_task and all(f"small_gap: {CONSTRAINT}" in prompt for prompt in with_task)
