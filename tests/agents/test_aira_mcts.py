"""AIRA (MCTS) on the toy task, scripted replies over the loopback server through the real openai SDK."""

import json
import math

import pytest
from llm.fixtures import api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401 (fixtures)
from scripted_coder import ScriptedCoder, kind_of

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.runner import RunError

C = 1.41


def uct(mean, q_min, q_max, visits, parent_visits):
    return (mean - q_min) / (q_max - q_min) + C * math.sqrt(math.log(parent_visits) / visits)


def test_the_tree_unit_hand_computed():
    tree_mod = load_agent_class("aira-mcts").__module__
    import sys

    Tree, Node = sys.modules[tree_mod].Tree, sys.modules[tree_mod].Node
    tree = Tree("lower", uct_c=1.0)
    a, b, dead = (Node(step=i, action="draft", parent=tree.root) for i in (1, 2, 3))
    for n in (a, b, dead):
        tree.add(n)
    tree.backup([tree.root, a], 10.0)  # lower is better: a is the worse
    tree.backup([tree.root, b], 6.0)
    tree.backup([tree.root, b], 8.0)
    # q in better-is-higher orientation: a -10, b -7; bounds -10..-6
    assert (tree.root.visits, tree.root.value, b.visits, b.value) == (3, 24.0, 2, 14.0)
    assert tree.uct(a, tree.root) == pytest.approx(0.0 + math.sqrt(math.log(3) / 1))
    assert tree.uct(b, tree.root) == pytest.approx(0.75 + math.sqrt(math.log(3) / 2))
    assert tree.uct(dead, tree.root) == -1e8  # a never-visited child is taken last
    path, levels = tree.select()
    assert [n.step for n in path] == [0, 2] and levels[0]["chosen"] == 2  # 0.75 + 0.741 > 0 + 1.048
    assert [c["uct"] for c in levels[0]["candidates"]][2] is None


def test_uct_selection_and_backup_with_hand_computed_values(run_agent, fake_llm):
    # metrics of the toy task's val split: lr .5 with 10 / 40 / 80 / 160 epochs -> .79 / .80 / .81 / .83
    coder = ScriptedCoder(edits=["lr=0.5,epochs=10", "lr=0.5,epochs=40", "epochs=80", "bug", "fix,epochs=160",
                                 "epochs=20"])
    fake_llm.responder = coder
    run = run_agent("aira-mcts", steps=6)
    steps = run.steps
    assert run.record.status == "finished" and len(steps) == 6
    assert [(s.action, s.parent, s.metric) for s in steps] == [
        ("draft", None, 0.79), ("draft", None, 0.80), ("improve", 2, 0.81), ("improve", 2, None),
        ("debug", 4, 0.83), ("improve", 1, 0.79)]
    mcts = [s.extra["mcts"] for s in steps]
    # step 3: root visited twice (0.79, 0.80); node 2 normalises to 1, node 1 to 0
    (level,) = mcts[2]["levels"]
    assert [c["uct"] for c in level["candidates"]] == pytest.approx(
        [uct(0.79, 0.79, 0.80, 1, 2), uct(0.80, 0.79, 0.80, 1, 2)])
    assert level["chosen"] == 2 and mcts[2]["path"] == [0, 2] and mcts[3]["path"] == [0, 2]
    # the buggy child backs up nothing; its fix backs 0.83 up root, 2, the buggy 4 and the fix 5
    assert "mcts_backup" not in steps[3].extra
    assert steps[4].extra["mcts_backup"] == {"value": 0.83, "path": [0, 2, 4, 5]}
    assert steps[4].extra["mcts"]["debug_depth"] == 1
    # step 6: root 4 visits; node 1 (1 visit, mean .79) explores past node 2 (3 visits, mean 2.44/3)
    level = mcts[5]["levels"][0]
    by_node = {c["node"]: c for c in level["candidates"]}
    assert (by_node[2]["visits"], by_node[2]["value"]) == (3, pytest.approx(2.44))
    assert by_node[1]["uct"] == pytest.approx(uct(0.79, 0.79, 0.83, 1, 4))
    assert by_node[2]["uct"] == pytest.approx(uct(2.44 / 3, 0.79, 0.83, 3, 4))
    assert by_node[1]["uct"] > by_node[2]["uct"] and level["chosen"] == 1
    tree = {n["node"]: n for n in mcts[5]["tree"]["nodes"]}
    assert (tree[0]["visits"], tree[4]["visits"], tree[4]["buggy"]) == (4, 1, True)
    # one edit and one analysis call per step, each analysis stored on its step
    assert coder.kinds() == ["edit", "analysis"] * 6
    assert all(s.analysis.startswith("The run ") for s in steps) and run.record.usage.calls == 12
    # the debug prompt, as the port's: the crash's whole stderr as the editor's error context, again (its
    # first 1,500 characters) in the instruction's Error output section, after the buggy attempt's analysis
    debug_prompt = [p for k, p in coder.prompts if k == "edit"][4]
    error = debug_prompt.split("## Previous execution error\n```\n", 1)[1].split("\n```", 1)[0]
    assert error.startswith("Traceback") and error.rstrip().endswith("RuntimeError: injected bug in fit")
    assert debug_prompt.count(error) == 2
    assert f"## Analysis of the buggy attempt\nThe run failed; fix the bug.\n\n## Error output\n{error}" in debug_prompt
    # the memory, as the port's: nodes numbered in creation order (the root 1, so step n is node n + 1),
    # each with the port's label as its plan ("Draft #n", "Improve from node n", "Debug fix for node n"),
    # never what the model wrote ("Plan: ..."); best first
    edits = [p for k, p in coder.prompts if k == "edit"]
    assert ("## Previous attempts summary\n"
            "- [Node 3] Action=draft, Plan: Draft #2, Analysis: The run worked; go on., accuracy=0.8\n"
            "- [Node 2] Action=draft, Plan: Draft #1, Analysis: The run worked; go on., accuracy=0.79\n\n") in edits[2]
    assert "Parent node 3: Metric: accuracy = 0.8 (higher is better), action=draft" in edits[2]
    assert ("- [Node 6] Action=debug, Plan: Debug fix for node 5, Analysis: The run worked; go on., "
            "accuracy=0.83\n- [Node 4] Action=improve, Plan: Improve from node 3, ") in edits[5]
    # the analysis sees the label too; the record keeps what the model wrote
    analyses = [p for k, p in coder.prompts if k == "analysis"]
    assert "Action: debug\nPlan: Debug fix for node 5\n" in analyses[4]
    assert steps[4].plan == "fix,epochs=160."
    assert run.record.agent_options == {"uct_c": 1.41, "num_children": 2, "max_debug_depth": 3,
                                        "edit_temperature": None, "analysis_temperature": 0.75,
                                        "max_output_tokens": None, "editor": "port", "node_plan": "port",
                                        "port_task_text": None}


@pytest.mark.parametrize("steps", [1, 3])
def test_never_exceeds_the_budget_and_ends_mid_debug_chain(run_agent, fake_llm, steps):
    coder = ScriptedCoder(edits=["bug"] * 5)
    fake_llm.responder = coder
    run = run_agent("aira-mcts", steps=steps, options={"num_children": 2})
    assert run.record.status == "finished" and run.record.steps_used == steps == len(run.steps)
    assert [s.action for s in run.steps] == ["draft", "debug", "debug"][:steps]
    # no call was spent on a step that could not run
    assert coder.asked["edit"] == steps and coder.asked["analysis"] == steps


def test_resume_after_a_crash_takes_the_same_decisions(run_agent, fake_llm, tmp_path, monkeypatch):
    script = ["lr=0.5,epochs=10", "bug", "fix,epochs=40", "epochs=80", "epochs=160"]
    fake_llm.responder = ScriptedCoder(edits=list(script))
    whole = run_agent("aira-mcts", steps=5, seed=1)
    reference = [(s.action, s.parent, s.metric, s.extra) for s in whole.steps]

    coder = ScriptedCoder(edits=list(script))
    outage = {"on": True}
    kill_at_call(monkeypatch, lambda seen: outage["on"] and kind_of(seen) == "edit" and coder.asked["edit"] >= 2)
    fake_llm.responder = coder
    with pytest.raises(RunError):
        run_agent("aira-mcts", steps=5, seed=2)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/aira-mcts*seed2*/steps.jsonl")
    assert len(steps_file.read_text().splitlines()) == 2
    outage["on"] = False
    asked = coder.asked["edit"]
    resumed = run_agent("aira-mcts", steps=5, seed=2)
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 2
    # the tree holds no randomness: the same decisions as the uninterrupted run
    assert [(s.action, s.parent, s.metric, s.extra) for s in resumed.steps] == reference
    assert coder.asked["edit"] == asked + 3  # recorded steps and replies were replayed, not asked again
    lines = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert [s["step"] for s in lines] == [1, 2, 3, 4, 5]
