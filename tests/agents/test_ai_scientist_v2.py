"""AI Scientist v2 on the toy task, over the loopback server and the real openai SDK."""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter

import pytest

from conftest import load_record
from llm.fixtures import TOY, api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401  (fixtures)
from llm.fake_llm import Fail, Say, Seen
from llm.toy_coder import BROKEN_ALGO, GOOD_ALGO, file_block, shown_file
from scripted_coder import edit_reply, instruction_of
from pytest_fmlbench.agentkit import AgentLoadError, load_agent_class, parse_agent_options
from pytest_fmlbench.journal import Journal
from pytest_fmlbench.runner import RunError
from pytest_fmlbench.spec import load_task

AGENT = load_agent_class("ai-scientist-v2")
STAGE_NAMES = ["initial_implementation", "baseline_tuning", "creative_research", "ablation_studies"]


def kind_of(seen: Seen) -> str:
    system = seen.body["messages"][0]["content"]
    user = seen.body["messages"][-1]["content"]
    if "judging experiment results" in system:
        return "analysis"
    if "summarising experimental progress" in system:
        return "memory"
    if "research advisor" in system:
        return "substage"
    instruction = user.split("## Instruction\n", 1)[-1]
    if "Implement a solid baseline" in instruction:
        return "draft"
    if "improve it according to the current experimental stage" in instruction:
        return "improve"
    if "had a bug" in instruction:
        return "debug"
    return "other"


def config_shown(seen: Seen) -> dict:
    return json.loads(shown_file(seen.body["messages"][-1]["content"], "config.json"))


class ToyResearcher:
    """Drafts follow ``drafts`` ('ok' or 'bug', cycled) with rising learning rates; improvements add 10
    epochs to the code shown and draw another validation split (so metrics move); debugs restore working
    code; analyses, memories and goals are short."""

    def __init__(self, drafts=("ok",)):
        self.drafts = list(drafts)
        self.asked: Counter[str] = Counter()
        self.kinds: list[str] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.asked[kind] += 1
        self.kinds.append(kind)
        i = self.asked[kind] - 1
        if kind == "analysis":
            return Say("The run " + ("crashed in fit." if "Success: False" in seen.body["messages"][-1]["content"]
                                     else "worked; accuracy moved."))
        if kind == "memory":
            return Say(f"Memory {i + 1}: longer training helps.")
        if kind == "substage":
            return Say(f"Goals {i + 1}: train longer and check the learning rate.")
        if kind == "draft":
            algo = BROKEN_ALGO if self.drafts[i % len(self.drafts)] == "bug" else GOOD_ALGO
            lr = [0.05, 0.1, 0.2, 0.4][i % 4]
            return Say(f"Sketch: logistic regression, lr {lr}.\n\n{file_block('algorithm.py', algo)}\n\n"
                       + file_block("config.json", json.dumps({"lr": lr, "epochs": 10})))
        if kind == "debug":
            return Say(f"Fix: restore fit.\n\n{file_block('algorithm.py', GOOD_ALGO)}")
        if kind == "improve":
            config = config_shown(seen)
            config["epochs"] = int(config["epochs"]) + 10
            split = {"val_ratio": 0.25, "val_seed": i + 1}
            return Say(f"Train for {config['epochs']} epochs.\n\n{file_block('config.json', json.dumps(config))}\n\n"
                       + file_block("split_config.json", json.dumps(split)))
        return Say("?")


@pytest.fixture
def run_v2(run_agent):  # noqa: F811
    def run(steps: int, **options):
        return run_agent("ai-scientist-v2", steps=steps, options=options)

    return run


def first_best(steps) -> int | None:
    best = None
    for s in steps:
        if s.success and (best is None or s.metric > best.metric):
            best = s
    return best.step if best else None


def test_stage_budgets_and_with_previous_best_each_stage_starts_from_the_best_so_far(run_v2, fake_llm):
    model = ToyResearcher(drafts=("ok", "bug", "ok"))
    fake_llm.responder = model
    run = run_v2(steps=20, stage_seed="previous_best")
    steps = run.steps
    assert run.record.status == "finished" and len(steps) == 20
    # 10/20/50/20% of 20 steps, in order
    assert [s.extra["stage"]["number"] for s in steps] == [1] * 2 + [2] * 4 + [3] * 10 + [4] * 4
    assert steps[0].extra["stage"]["budgets"] == [2, 4, 10, 4]
    assert run.record.agent_options["stage_budgets"] == [0.1, 0.2, 0.5, 0.2]
    # each later stage starts from the best node found before it, carried over without a new run
    for number in (2, 3, 4):
        first = next(s for s in steps if s.extra["stage"]["number"] == number)
        before = steps[: first.step - 1]
        assert first.parent == first_best(before), number
        assert first.action == "improve"
        handover = first.extra["handover"]
        assert handover["from"] == STAGE_NAMES[number - 2] and handover["to"] == STAGE_NAMES[number - 1]
        assert handover["reason"].startswith(f"stage '{STAGE_NAMES[number - 2]}' spent its")
        assert handover["start_from"].startswith(f"step {first.parent} ")
        assert sum("handover" in s.extra for s in steps if s.extra["stage"]["number"] == number) == 1
    # stages 2 and 4 improve the carried-over best at every step; stage 3 searches a tree rooted at it
    for number in (2, 4):
        in_stage = [s for s in steps if s.extra["stage"]["number"] == number]
        assert len({s.parent for s in in_stage}) == 1 and all(s.action == "improve" for s in in_stage)
    stage3 = [s for s in steps if s.extra["stage"]["number"] == 3]
    assert len({s.parent for s in stage3}) > 1
    # stage 1: a batch of 2 (its budget) of drafts from the baseline
    assert [(s.action, s.parent) for s in steps[:2]] == [("draft", None), ("draft", None)]
    assert steps[0].extra["batch"]["selected"] == [["draft", None], ["draft", None]]
    # stage 3 picks batches of 4 at once, and a sub-stage starts with LLM-written goals after 4 steps
    assert [s.extra["batch"]["number"] for s in stage3] == [1] * 4 + [2] * 4 + [3] * 2
    assert [s.extra["substage"]["number"] for s in stage3] == [1] * 4 + [2] * 4 + [3] * 2
    assert stage3[4].extra["substage"]["reason"] == "sub-stage step limit reached"
    assert "Sub-stage 2 focus:\nGoals " in stage3[4].extra["substage"]["goals"]
    # the improve prompt carries the stage's guidance, the memory and the parent's own analysis
    improve = [r for r in fake_llm.completions if kind_of(r) == "improve"]
    assert "Tune hyper-parameters" in improve[0].body["messages"][-1]["content"]
    assert "## Memory" not in improve[0].body["messages"][-1]["content"]  # nothing ran yet in stage 2
    assert "## Memory\nMemory" in improve[1].body["messages"][-1]["content"]
    assert "Analysis: The run worked" in improve[0].body["messages"][-1]["content"]
    # one analysis per step; memories only when the stage's tree grew; every step's analysis recorded
    assert model.asked["analysis"] == 20 and all(s.analysis for s in steps)
    assert model.asked["memory"] <= 20 - 4  # never for a debug, never twice for the same tree


class ScriptedResearcher:
    """Each coding call (draft, improve or debug, in order) carries out the next outcome of ``outcomes``
    on the config.json it is shown ('lr=0.4,epochs=10': see scripted_coder.edit_reply); analyses, memories
    and sub-stage goals are short fixed texts. Every request is kept with its kind."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.seen: list[tuple[str, str]] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.seen.append((kind, seen.body["messages"][-1]["content"]))
        if kind == "analysis":
            return Say("Analysis: " + ("it crashed." if "Success: False" in seen.prompt else "it ran."))
        if kind == "memory":
            return Say("Memory: keep lr moderate.")
        if kind == "substage":
            return Say("Goals: vary the learning rate.")
        return Say(edit_reply(self.outcomes.pop(0), seen.body["messages"][-1]["content"]))

    def prompts(self, kind: str) -> list[str]:
        return [text for k, text in self.seen if k == kind]


def test_stages_as_the_port_stage_3_drafts_from_the_baseline_and_each_stage_hands_on_its_own_best(
        run_v2, fake_llm):
    # 10 steps: stage budgets 1, 2, 5, 2. Toy validation accuracy of each config.json, measured beforehand:
    # (lr, epochs) (0.5, 10) .79, (0.1, 10) .77, (0.4, 10) .78, (0.05, 5) .76, (0.2, 5) .77, (0.3, 5) .76,
    # (0.05, 20) .77, (0.5, 30) .80, (0.1, 20) .76
    model = ScriptedResearcher([
        "lr=0.5,epochs=10",                                             # 1 stage 1: draft -> .79
        "lr=0.1", "lr=0.4",                                             # 2, 3 stage 2: improve 1 -> .77, .78
        "lr=0.05", "lr=0.2", "lr=0.4,epochs=10", "lr=0.3",              # 4-7 stage 3: drafts -> .76 .77 .78 .76
        "lr=0.05,epochs=20",                                            # 8 improve 6 -> .77
        "lr=0.5,epochs=30", "lr=0.1,epochs=20",                         # 9, 10 stage 4: improve 6 -> .80, .76
    ])
    fake_llm.responder = model
    run = run_v2(steps=10)
    steps = run.steps
    assert run.record.status == "finished" and not model.outcomes
    assert [s.metric for s in steps] == [0.79, 0.77, 0.78, 0.76, 0.77, 0.78, 0.76, 0.77, 0.80, 0.76]
    assert [s.extra["stage"]["number"] for s in steps] == [1, 2, 2, 3, 3, 3, 3, 3, 4, 4]
    # stage 2 improves stage 1's best (step 1) at each step
    assert [(s.action, s.parent) for s in steps[1:3]] == [("improve", 1)] * 2
    # stage 3 opens with one draft from the baseline; its tree has no good node yet, so the other three
    # slots of the batch draft as well (the port's _select_batch): none starts from step 1 (.79) or 3
    assert [(s.action, s.parent) for s in steps[3:7]] == [("draft", None)] * 4
    assert steps[3].extra["batch"]["selected"] == [["draft", None]] * 4
    for prompt in model.prompts("draft")[1:]:
        assert json.loads(shown_file(prompt, "config.json")) == {"lr": 0.01, "epochs": 5}
    assert steps[3].extra["handover"]["start_from"].startswith("drafts from the baseline")
    # after 4 steps a sub-stage starts; the batch of 1 improves the best good node of stage 3's own tree
    assert steps[7].extra["substage"]["number"] == 2 and (steps[7].action, steps[7].parent) == ("improve", 6)
    # stage 3's best (step 6, .78) is what stage 4 improves, though step 1 (.79) was better: the carried
    # "best" is the best of the stage's own nodes
    assert [(s.action, s.parent) for s in steps[8:]] == [("improve", 6)] * 2
    assert steps[8].extra["handover"]["start_from"].startswith("step 6 (accuracy 0.78)")
    # the final test runs the best validation code of the whole run
    assert run.record.best_step == 9 and run.record.test_metric is not None

    # the memory, as the port's: a node's "design" is the first 300 characters of its instruction
    # (boilerplate), never the model's plan; stage 2's memory holds stage 2's nodes only
    instructions = [instruction_of(p) for p in model.prompts("draft") + model.prompts("improve")]
    improve_2 = instruction_of(model.prompts("improve")[0])
    memories = model.prompts("memory")
    assert len(memories) == 6  # before steps 3, 5, 6, 7, 8 and 10: each when the stage's tree has grown
    assert memories[0].count("### Experiment") == 1 and "### Experiment 1\nDesign: " + improve_2[:300] + \
        "\nResults: Analysis: it ran.\naccuracy: 0.77" in memories[0]
    assert all("Plan: lr=" not in m for m in memories)
    assert all(i.startswith("## Introduction\n") for i in instructions)
    # stage 4's first memory (before step 10) holds step 9 alone
    assert memories[-1].count("### Experiment") == 1 and "accuracy: 0.8\n" in memories[-1] + "\n"
    # the analysis sees the same plan: the instruction's first 500 characters
    analysis_2 = model.prompts("analysis")[1]
    assert "## Plan\n" + improve_2[:500] + "\n\n## Execution result" in analysis_2
    # the memory reaches the prompts that follow
    assert "## Memory\nMemory: keep lr moderate." in model.prompts("improve")[1]
    # the draft's sketch guideline, as the port's, ends with the synthetic-data line
    assert "- Make sure to create synthetic data if needed." in model.prompts("draft")[0]


def test_debug_takes_a_buggy_leaf_with_its_error_tail(run_v2, fake_llm):
    model = ToyResearcher(drafts=("bug",))
    fake_llm.responder = model
    run = run_v2(steps=4, stage_budgets="1,0,0,0", num_drafts=1, num_workers=1, debug_prob=1.0)
    # the buggy draft is debugged; a debugged node has a child, so it is no longer a leaf to debug
    assert [(s.action, s.parent) for s in run.steps][:3] == [("draft", None), ("debug", 1), ("improve", 2)]
    assert run.steps[3].action == "improve"
    debug = next(r for r in fake_llm.completions if kind_of(r) == "debug")
    text = debug.body["messages"][-1]["content"]
    assert "## Previous execution error" in text and "injected bug in fit" in text
    assert "## Bug analysis\nThe run crashed in fit." in text
    assert run.steps[1].extra["debug_depth"] == 1


def test_budget_ends_mid_batch_and_zero_budget_stages_are_skipped(run_v2, fake_llm):
    fake_llm.responder = ToyResearcher()
    run = run_v2(steps=7)  # shares give 0, 1, 3, 3 steps
    steps = run.steps
    assert run.record.steps_used == 7 and run.record.status == "finished"
    assert [s.extra["stage"]["number"] for s in steps] == [2, 3, 3, 3, 4, 4, 4]
    assert steps[0].extra["handover"]["reason"] == "stage(s) 'initial_implementation' had a 0-step budget"
    assert steps[0].extra["handover"]["start_from"] == "the baseline (no working node yet)"
    assert steps[0].action == "draft"  # no working node yet: stage 2 drafts from the baseline
    # stage 3's batch is cut to its 3 steps: as in the port, it drafts (one draft asked for; then, with no
    # good node in its own tree yet, every other slot drafts too)
    assert steps[1].extra["batch"]["selected"] == [["draft", None]] * 3
    # stage 4 improves stage 3's best at every step
    stage3_best = max((s for s in steps[1:4] if s.success), key=lambda s: s.metric).step
    assert [(s.action, s.parent) for s in steps[4:]] == [("improve", stage3_best)] * 3
    coding = [r for r in fake_llm.completions if kind_of(r) in ("draft", "improve", "debug")]
    assert len(coding) == 7


def test_options_are_typed_and_unknown_ones_named(run_v2):
    options = parse_agent_options(AGENT, ["stage_budgets=0.25,0.25,0.25,0.25", "num_workers=2"])
    assert options.stage_budgets == (0.25, 0.25, 0.25, 0.25) and options.num_workers == 2
    with pytest.raises(AgentLoadError, match="stage_budgets"):
        parse_agent_options(AGENT, ["stage_budgets=0.5,0.5,0.5,0.5"])
    with pytest.raises(AgentLoadError, match="no option num_stages; options: .*stage_budgets"):
        parse_agent_options(AGENT, ["num_stages=3"])


def test_resume_replays_the_stages(run_v2, fake_llm, tmp_path, monkeypatch):
    model = ToyResearcher(drafts=("ok", "bug"))
    outage = {"on": True}
    kill_at_call(monkeypatch, lambda seen: outage["on"] and model.asked["analysis"] >= 5
                 and kind_of(seen) in ("improve", "debug", "draft"))
    fake_llm.responder = model
    with pytest.raises(RunError):
        run_v2(steps=10)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/*/steps.jsonl")
    crashed = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert len(crashed) == 5
    asked_before = len(fake_llm.completions)
    outage["on"] = False
    run = run_v2(steps=10)
    assert run.record.status == "finished" and run.record.resumed_from_step == 5
    lines = [json.loads(line) for line in (run.store.dir / "steps.jsonl").read_text().splitlines()]
    assert lines[:5] == crashed and len(lines) == 10
    # the replayed part asked nothing new: the first new request is the coding call of step 6
    new = [kind_of(r) for r in fake_llm.completions[asked_before:]]
    assert new[0] in ("improve", "debug", "draft", "memory") and new.count("analysis") == 5
    assert [s["extra"]["stage"]["number"] for s in lines] == [1, 2, 2, 3, 3, 3, 3, 3, 4, 4]


# -- as users run it --------------------------------------------------------------------------------------
def test_runs_from_the_command_line_with_its_options_recorded(pytester, toy, bench, fake_llm, api_keys):  # noqa: F811
    fake_llm.responder = ToyResearcher()
    opts = [arg for option in ["num_workers=2"] for arg in ("--agent-opt", option)]
    # the command line, not isolation, under test: sandboxed experiments import the package the venv
    # installs, which need not be this checkout
    result = bench("--agent=ai-scientist-v2", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", *opts,
                   "--no-sandbox", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["status"], record["steps_used"], record["usage"]["calls"]) == \
        ("ai-scientist-v2", "finished", 2, 4)
    options = record["agent_options"]
    assert options["num_workers"] == 2 and options["stage_budgets"] == [0.1, 0.2, 0.5, 0.2]
    bad = bench("--agent=ai-scientist-v2", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--agent-opt", "bogus=1",
                "toy_task")
    bad.stderr.fnmatch_lines(["ERROR: agent ai-scientist-v2 has no option bogus; options: *stage_budgets*"])


# -- the port's batch selection, hand-derived (ai_scientist_v2/agent.py 636-707) ----------------------------
MOD = sys.modules[AGENT.__module__]


def hand_built_tree(direction: str = "higher"):
    """A stage's tree, built by hand: three roots A (.78, improved once to .80), B (buggy, debugged once,
    still buggy) and C (.79), and a fourth root D, a chain of buggy debugs four deep. A stand-in session
    holds what selection reads: the metric's direction and the run's random generator."""
    spec = load_task(TOY / "task.yaml").spec
    spec = spec.model_copy(update={"metric": spec.metric.model_copy(update={"direction": direction})})
    session = type("Session", (), {"steps_total": 10, "task": spec, "rng": random.Random(0),
                                   "journal": Journal(direction)})()
    search = MOD._TreeSearch(session, AGENT.Options())
    nodes = []

    def add(action, buggy, metric=None, parent=None):
        node = MOD.Node(key=len(nodes), step=len(nodes) + 1, action=action, plan="", buggy=buggy, metric=metric,
                        parent=parent)
        if parent is not None:
            parent.children.append(node)
        nodes.append(node)
        return node

    a = add("draft", False, 0.78)
    a1 = add("improve", False, 0.80, a)
    b = add("draft", True)
    b1 = add("debug", True, parent=b)
    c = add("draft", False, 0.79)
    d = add("draft", True)
    for _ in range(4):  # debug depths 1, 2, 3, 4: the last leaf is past max_debug_depth=3
        d = add("debug", True, parent=d)
    search.nodes = nodes
    return search, {"a": a, "a1": a1, "b": b, "b1": b1, "c": c, "d4": d}


def picks(batch, named):
    by_node = {id(node): name for name, node in named.items()}
    return [(action, by_node.get(id(node)) if node is not None else None) for action, node in batch]


def test_batch_selection_is_the_ports_over_a_hand_built_tree():
    # viable trees (a leaf that is not buggy): A and C, so len(viable) = 2 (agent.py 656-661)
    search, named = hand_built_tree()
    search.o = AGENT.Options(debug_prob=1.0)
    # slot 1: the only debuggable leaf is B's debug (D's leaf is at depth 4 > 3; B's root has a child):
    # debug it, tree B processed. Slot 2: no debuggable leaf outside tree B -> improve the best good node,
    # A1 (.80), tree A processed. Slots 3, 4: A1's tree is processed, but len(processed) = 2 >= len(viable)
    # = 2 (tree B counts though it is not viable), so A1 again; C is never reached (agent.py 694-701)
    assert picks(search.select_batch(4, 3), named) == [("debug", "b1"), ("improve", "a1"), ("improve", "a1"),
                                                        ("improve", "a1")]
    search.o = AGENT.Options(debug_prob=0.0)
    # A1 (tree A); then A1's tree is taken and only 1 < 2 trees are: C (.79); then A1, A1
    assert picks(search.select_batch(4, 3), named) == [("improve", "a1"), ("improve", "c"), ("improve", "a1"),
                                                        ("improve", "a1")]
    # four roots exist, five asked for: one draft first, then the rest as above (agent.py 648-653)
    assert picks(search.select_batch(3, 5), named) == [("draft", None), ("improve", "a1"), ("improve", "c")]
    # lower is better: ascending order, A (.78) first, then tree C
    search, named = hand_built_tree("lower")
    search.o = AGENT.Options(debug_prob=0.0)
    assert picks(search.select_batch(3, 3), named) == [("improve", "a"), ("improve", "c"), ("improve", "a")]


class PlateauResearcher(ScriptedResearcher):
    """ScriptedResearcher whose second memory call and first sub-stage call fail on every attempt (the
    loopback settings allow 5), as a model outage does."""

    def __init__(self, outcomes):
        super().__init__(outcomes)
        self.failed = Counter()
        self.answered = Counter()

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        if (kind == "memory" and self.answered["memory"] == 1 or kind == "substage" and not self.answered["substage"]) \
                and self.failed[kind] < 5:
            self.failed[kind] += 1
            return Fail(500, "the model is unavailable")
        self.answered[kind] += 1
        return super().__call__(seen)


def test_sub_stages_and_failed_memory_and_goal_calls_as_the_port(run_v2, fake_llm):
    # 8 steps, shares 1/8, 6/8, 1/8, 0: stage budgets 1, 6, 1, 0 (the last stage skipped). Stage 1 drafts
    # lr=0.5,epochs=10 (.79); stage 2 improves it at each step to lr=0.8,epochs=10, .79 as well
    model = PlateauResearcher(["lr=0.5,epochs=10"] + ["lr=0.8,epochs=10"] * 6 + ["lr=0.1,epochs=10"])
    fake_llm.responder = model
    run = run_v2(steps=8, stage_budgets="0.125,0.75,0.125,0")
    steps = run.steps
    assert run.record.status == "finished" and [s.extra["stage"]["number"] for s in steps] == [1] + [2] * 6 + [3]
    stage2 = steps[1:7]
    assert [s.metric for s in stage2] == [0.79] * 6 and {(s.action, s.parent) for s in stage2} == {("improve", 1)}
    # the port checks before every forced step (agent.py 504-511, 575-589): after 3 steps of a sub-stage,
    # max(3, nodes // 2) is reached; then, 1 step into the next one, the last 3 good nodes share .79
    assert [s.extra["substage"]["number"] for s in stage2] == [1, 1, 1, 2, 3, 4]
    assert [s.extra["substage"].get("reason") for s in stage2] == [
        None, None, None, "sub-stage step limit reached", "metric converged over the last 3 good nodes",
        "metric converged over the last 3 good nodes"]
    # the first goal call failed: the port's stock goal (agent.py 620-621); the next ones are the model's
    goals = "Tune hyper-parameters"
    assert stage2[3].extra["substage"]["goals"].endswith(
        "\n\nSub-stage 2 focus:\nContinue improving based on current progress.")
    assert stage2[4].extra["substage"]["goals"].endswith("\n\nSub-stage 3 focus:\nGoals: vary the learning rate.")
    improves = model.prompts("improve")
    assert all(goals in p for p in improves)
    # memory: none before stage 2's first step (its tree is empty), the model's before its second; the
    # second call failed, so before step 3 the port's fallback (agent.py 251-256): the last 5 successes
    # as "- [success] <plan[:150]> | <metric>=<value>", a plan being the instruction's first 500 characters
    instructions = [instruction_of(p) for p in improves]
    assert "## Memory" not in instructions[0] and "## Memory\nMemory: keep lr moderate.\n" in instructions[1]
    fallback = "\n".join(f"- [success] {i[:150]} | accuracy=0.79" for i in instructions[:2])
    assert f"## Memory\n{fallback}\n\n## Previous results" in instructions[2]
    # the failed calls cost no step, the budget held, the final test ran, and the record counts them
    assert run.record.steps_used == 8 and run.record.llm_failed_calls == 2 and run.record.test_metric is not None
    # stage 3 opens with one draft from the baseline
    assert (steps[7].action, steps[7].parent) == ("draft", None)
