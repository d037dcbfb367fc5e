"""AIDE's default variant, FML-bench's port (agents/aide/agent.py at d336651), on the toy task.

Every expectation below is derived by hand from the port's code, not from ours:

- a step = restore the parent's code (the baseline for a draft), build the instruction (380-390 draft,
  431-449 improve, 487-517 debug), ONE editor call (``_edit_code``; a debug also passes the parent's
  error_context, 503/520), ONE validation run, then one analysis call that costs no step (550-589);
- the node's plan is ``instruction[:300]`` (392/451/519); it is buggy iff the run failed or gave no
  metric (408), whatever the edit did; its error_context is the head of the error (412);
- memory (133-146) lists the good nodes as "Plan / Analysis / <metric>: <value>", or "(No successful
  attempts yet.)"; the debug chain (487-501) lists the debug nodes in a row ending at the parent, oldest
  first, with ``plan[:150]`` and ``error_context[:100]``;
- the policy (335-362): drafts until num_drafts roots exist, then debug a random buggy leaf of debug
  depth <= max_debug_depth with probability debug_prob, else the best good node (max() keeps the first
  of equal metrics), else a new draft.

Toy-task metrics used here (accuracy on the validation split, higher is better; the task declares 0.76
for the baseline): lr=0.01/epochs=5 (the baseline's config) 0.76, lr=0.1/epochs=10 0.77, lr=0.5/epochs=10
and lr=0.8/epochs=10 0.79, lr=0.5/epochs=40 0.8.
"""

from __future__ import annotations

import random
import re

import pytest
from llm.fake_llm import Fail, Say, Seen
from llm.fixtures import TOY as TOY_TASK
from llm.fixtures import api_keys, fake_llm, kill_at_call, llm_settings, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import file_block, kind_of
from scripted_coder import GOOD_ALGO, TOY, edit_reply, instruction_of, shown_config

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.llm import make_llm_factory
from pytest_fmlbench.runner import RunError, RunSettings, execute
from pytest_fmlbench.spec import load_task

SEPARATOR = "\n-------------------------------\n"
DRAFT_HEAD = ("You are an expert ML researcher. Your goal is to improve the ML algorithm to achieve better "
              "performance.\n\n## Baseline results\nBaseline: accuracy = 0.76 (higher is better)\n\n"
              "## Memory of previous attempts\n")
DRAFT_TAIL = ("\n\n## Instructions\nPropose a novel approach that differs from previous attempts (listed in "
              "Memory). Make targeted changes to improve the metric. Keep the changes minimal and focused on a "
              "single idea.")
IMPROVE_HEAD = ("You are an expert ML researcher. You have a working solution and need to improve it further.\n\n"
                "## Last validation result\n")
IMPROVE_TAIL = ("\n\n## Instructions\nPropose a single, specific improvement to the current solution. The change "
                "should be atomic so we can evaluate its effect. Do not repeat approaches that already appear in "
                "Memory.")
DEBUG_HEAD = ("You are an expert ML researcher. Your previous solution had a bug. Fix the issue based on the error "
              "context provided.")
DEBUG_INSTRUCTIONS = ("\n\n## Instructions\nFix the bug while preserving the original intent of the code. Make "
                      "minimal changes to resolve the error.")
ANALYSIS_SYSTEM = "You are an experienced AI researcher evaluating experiment results."
ANALYSIS_HEAD = ("You have written code for your research experiment and now need to evaluate the output of the "
                 "code execution. Analyze the execution output, determine if there were any bugs, and provide a "
                 "summary of the findings.\n\n## Task\n")
ANALYSIS_TAIL = ("If there is a bug, summarize the bug and propose a fix. Otherwise, provide a 2-3 sentence summary "
                 "of findings.")
TASK = ("Improve validation accuracy of the classifier in algorithm.py (fit(X, y, config) -> weights,\n"
        "predict(X, weights) -> labels). Hyper-parameters live in config.json.")
BASELINE = {p.name: p.read_text() for p in (TOY / "workspace").iterdir() if p.is_file() and p.name != "train.py"}
# a crash with nothing on stderr: the exit status alone says the run failed
SILENT_ALGO = GOOD_ALGO.replace("def fit(X, y, config):\n", "def fit(X, y, config):\n    raise SystemExit(3)\n")
# a crash with a long stderr: a head marker, 4,000 filler characters, then the exception
LOUD_ALGO = GOOD_ALGO.replace("import numpy as np\n", "import sys\n\nimport numpy as np\n").replace(
    "def fit(X, y, config):\n",
    "def fit(X, y, config):\n    sys.stderr.write('HEAD-OF' + '-STDERR\\n' + '#' * 4000 + '\\n')\n"
    "    raise RuntimeError('injected bug in fit')\n")


class PortModel:
    """Answers the port's AIDE on the toy task. Editor calls take the next outcome of ``edits`` (the
    scripted coder's outcomes, plus 'silent': a fit that exits with status 3 and writes nothing, and
    'loud': a fit that writes 4,000 characters to stderr before it raises);
    analysis calls answer "Analysis N: the run worked/crashed." padded with blanks, to be stripped."""

    def __init__(self, edits=(), default="epochs=+5", long_analyses=()):
        self.edits = list(edits)
        self.default = default
        self.long_analyses = set(long_analyses)
        self.calls: list[tuple[str, Seen]] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.calls.append((kind, seen))
        if kind == "analysis":
            n = sum(k == "analysis" for k, _ in self.calls)
            text = f"Analysis {n}: the run {'crashed' if 'Success: False' in seen.prompt else 'worked'}."
            if n in self.long_analyses:
                text += " More." * 200
            return Say(f"  \n{text}\n  ")
        assert kind in ("draft", "improve", "debug"), seen.prompt[:300]
        outcome = self.edits.pop(0) if self.edits else self.default
        if outcome in ("silent", "loud"):
            return Say(file_block("algorithm.py", SILENT_ALGO if outcome == "silent" else LOUD_ALGO))
        if "+" in outcome:  # relative: epochs=+5 adds to the shown config
            key, delta = outcome.split("=+")
            outcome = f"{key}={int(shown_config(seen.prompt)[key]) + int(delta)}"
        return Say(edit_reply(outcome, seen.prompt))

    def prompts(self, kind: str) -> list[str]:
        return [seen.prompt for k, seen in self.calls if k == kind]

    def instructions(self) -> list[str]:
        """The instruction of each editor call, as the editor's '## Instruction' section holds it."""
        return [instruction_of(seen.prompt).removesuffix("\n\n") for k, seen in self.calls if k != "analysis"]


def memory_of(steps) -> str:
    good = [s for s in steps if s.success and s.metric is not None]
    if not good:
        return "(No successful attempts yet.)"
    return SEPARATOR.join(f"Plan: {s.plan}\nAnalysis: {s.analysis}\naccuracy: {s.metric}" for s in good)


def draft_instruction(earlier) -> str:
    return DRAFT_HEAD + memory_of(earlier) + DRAFT_TAIL


def improve_instruction(parent, earlier) -> str:
    analysis = f"\nAnalysis: {parent.analysis}\n" if parent.analysis else ""
    return (IMPROVE_HEAD + f"Last validation result: accuracy = {parent.metric:.6g} (higher is better)\n"
            + analysis + "\n## Memory of previous attempts\n" + memory_of(earlier) + IMPROVE_TAIL)


def debug_instruction(parent, chain) -> str:
    text = DEBUG_HEAD + (f"\n\n## Bug analysis\n{parent.analysis}" if parent.analysis else "") + DEBUG_INSTRUCTIONS
    if chain:
        text += "\n\n## Previous debug attempts\n" + "\n".join(
            f"- Attempt: {node.plan[:150]}\n  Error: {node.stderr[:1500][:100]}" for node in chain)
    return text


def headings(text: str) -> list[str]:
    return re.findall(r"^## [^\n]*", text, re.MULTILINE)


def test_a_reply_without_code_runs_the_parents_code_costs_one_step_and_the_node_is_good(run_agent, fake_llm):
    model = PortModel(edits=["lr=0.5,epochs=40", "nocode", "nocode", "lr=0.01,epochs=5"])
    fake_llm.responder = model
    run = run_agent("aide", steps=4, options={"num_drafts": 2, "debug_prob": 0.0})
    steps = run.steps
    assert run.record.status == "finished" and run.record.steps_used == 4
    # one editor call per step (no re-ask after a reply without code) and one analysis per run
    assert [k for k, _ in model.calls] == ["draft", "analysis"] * 2 + ["improve", "analysis"] * 2
    # the draft without code ran the baseline code: 0.76, a good node
    second = steps[1]
    assert not second.edit_applied and second.edit_error.startswith("no usable code in the reply")
    assert run.files(2) == BASELINE and second.success and second.metric == 0.76
    assert not second.extra["aide_buggy"] and second.analysis == "Analysis 2: the run worked."
    # the improvement without code ran its parent's code (step 1, the best): the same code, the same metric
    third = steps[2]
    assert (third.action, third.parent, third.edit_applied) == ("improve", 1, False)
    assert run.files(3) == run.files(1) and third.metric == steps[0].metric == 0.8
    assert not third.extra["aide_buggy"]
    # the tie (steps 1 and 3 at 0.8) keeps the first: step 4 improves step 1 again, with all three good
    # nodes in its memory
    assert (steps[3].action, steps[3].parent) == ("improve", 1)
    assert model.instructions()[3] == improve_instruction(steps[0], steps[:3])
    assert run.record.best_step == 1 and run.record.test_metric is not None


def test_a_crash_is_debugged_with_its_bug_analysis_and_the_chain_of_earlier_debug_attempts(run_agent, fake_llm):
    model = PortModel(edits=["loud", "bug", "silent", "bug", "fix"])
    fake_llm.responder = model
    run = run_agent("aide", steps=5, options={"num_drafts": 1, "debug_prob": 1.0, "max_debug_depth": 3})
    steps = run.steps
    assert [(s.action, s.parent, s.success) for s in steps] == [
        ("draft", None, False), ("debug", 1, False), ("debug", 2, False), ("debug", 3, False), ("debug", 4, True)]
    assert [s.extra["debug_depth"] for s in steps] == [0, 1, 2, 3, 4]
    editor_prompts = [seen.prompt for k, seen in model.calls if k != "analysis"]
    instructions = model.instructions()
    # a debug of the draft: its analysis, no chain (the draft is no debug node)
    assert instructions[1] == debug_instruction(steps[0], [])
    assert "## Bug analysis\nAnalysis 1: the run crashed." in instructions[1]
    assert "Previous debug attempts" not in instructions[1]
    # deeper: the debug nodes in a row ending at the parent, oldest first; the draft never
    assert instructions[2] == debug_instruction(steps[1], [steps[1]])
    assert instructions[3] == debug_instruction(steps[2], [steps[1], steps[2]])
    assert instructions[4] == debug_instruction(steps[3], [steps[1], steps[2], steps[3]])
    assert instructions[3].index("- Attempt: " + steps[1].plan[:150]) < instructions[3].index(
        "- Attempt: " + steps[2].plan[:150])
    # a debug node's plan is the head of its own instruction, so the chain quotes the port's boilerplate
    assert all(s.plan == i[:300] for s, i in zip(steps, instructions))
    assert steps[1].plan.startswith(DEBUG_HEAD)
    # the editor gets the parent's error: the first 1,500 characters of its stderr, the analysis its last
    # 1,500 after '...'
    crash = steps[0].stderr
    assert crash.startswith("HEAD-OF-STDERR\n" + "#" * 4000) and "injected bug in fit" in crash[-300:]
    assert f"## Previous execution error\n```\n{crash[:1500]}\n```" in editor_prompts[1]
    first_analysis = model.prompts("analysis")[0]
    assert f"Error output:\n```\n...{crash[-1500:]}\n```" in first_analysis and "HEAD-OF-STDERR" not in first_analysis
    # ... and the port's stand-in when the failed run wrote nothing (step 3 exited with status 3)
    assert steps[2].stderr == "" and "## Bug analysis\nAnalysis 3: the run crashed." in instructions[3]
    assert "## Previous execution error\n```\n(No error output captured.)\n```" in editor_prompts[3]
    assert instructions[4].endswith("- Attempt: " + steps[3].plan[:150] + "\n  Error: " + steps[3].stderr[:100])
    # the fix is good, remembered by nothing yet (no draft or improvement came after it)
    assert not steps[4].extra["aide_buggy"] and run.record.best_step == 5


def test_each_prompt_holds_the_ports_sections_in_the_ports_order(run_agent, fake_llm):
    model = PortModel(edits=["lr=0.1,epochs=10", "bug", "fix", "lr=0.5,epochs=10"], long_analyses={1})
    fake_llm.responder = model
    run = run_agent("aide", steps=4, options={"num_drafts": 2, "debug_prob": 1.0})
    steps = run.steps
    # step 4: no buggy leaf is left to debug, so the best good node (step 1) is improved
    assert [(s.action, s.parent) for s in steps] == [("draft", None), ("draft", None), ("debug", 2), ("improve", 1)]
    editor = [seen.prompt for k, seen in model.calls if k != "analysis"]
    # the editor's sections (code_editor.py 207-250), the instruction's own sections inside it
    assert headings(editor[0]) == [
        "## Task context", "## Optimisation target", "## Files to change (reply with each changed file complete)",
        "## Instruction", "## Baseline results", "## Memory of previous attempts", "## Instructions",
        "## Implementation guidelines", "## Reply format"]
    assert headings(editor[2]) == [
        "## Task context", "## Optimisation target", "## Files to change (reply with each changed file complete)",
        "## Previous execution error", "## Instruction", "## Bug analysis", "## Instructions",
        "## Implementation guidelines", "## Reply format"]
    # whole instructions, as the port writes them
    instructions = model.instructions()
    assert instructions[0] == DRAFT_HEAD + "(No successful attempts yet.)" + DRAFT_TAIL
    assert instructions[1] == draft_instruction(steps[:1])
    assert instructions[2] == debug_instruction(steps[1], [])
    assert instructions[3] == improve_instruction(steps[0], steps[:3])
    # the improvement: the parent's metric line, its analysis, then the memory of the good nodes so far
    assert instructions[3].startswith(IMPROVE_HEAD + "Last validation result: accuracy = 0.77 (higher is better)\n"
                                      f"\nAnalysis: {steps[0].analysis}\n\n## Memory of previous attempts\n")
    # (the remembered plans are instruction heads, so they hold the same headings: cut from the outside)
    memory = instructions[3].split("## Memory of previous attempts\n", 1)[1].rsplit("\n\n## Instructions", 1)[0]
    assert memory == (f"Plan: {steps[0].plan}\nAnalysis: {steps[0].analysis}\naccuracy: 0.77" + SEPARATOR
                      + f"Plan: {steps[2].plan}\nAnalysis: {steps[2].analysis}\naccuracy: 0.76")
    # the analysis is the reply stripped and cut to 500 characters
    assert steps[0].analysis == ("Analysis 1: the run worked." + " More." * 200)[:500]
    assert steps[1].analysis == "Analysis 2: the run crashed."
    # analysis prompts: system message, then the port's sections; the error only for a failed run
    analyses = [seen for k, seen in model.calls if k == "analysis"]
    assert all(seen.body["messages"][0] == {"role": "system", "content": ANALYSIS_SYSTEM} for seen in analyses)
    user = [seen.body["messages"][1]["content"] for seen in analyses]
    assert user[0] == (ANALYSIS_HEAD + TASK + f"\n\n## Plan\n{steps[0].plan}\n\n## Execution Result\n"
                       "Success: True\nPrimary Metric (accuracy): 0.77\n" + ANALYSIS_TAIL)
    error = steps[1].stderr
    shown = error if len(error) <= 1500 else "..." + error[-1500:]
    assert user[1] == (ANALYSIS_HEAD + TASK + f"\n\n## Plan\n{steps[1].plan}\n\n## Execution Result\n"
                       f"Success: False\nPrimary Metric (accuracy): None\nError output:\n```\n{shown}\n```\n\n"
                       + ANALYSIS_TAIL)


def test_selection_over_a_scripted_sequence_of_metrics(run_agent, fake_llm):
    # drafts 0.77, 0.79, 0.79; then improvements 0.76 (worse), 0.8 (better), a crash, 0.8 again (no code)
    model = PortModel(edits=["lr=0.1,epochs=10", "lr=0.5,epochs=10", "lr=0.8,epochs=10", "lr=0.01,epochs=5",
                             "lr=0.5,epochs=40", "bug", "nocode", "lr=0.01,epochs=5"])
    fake_llm.responder = model
    run = run_agent("aide", steps=8, options={"num_drafts": 3, "debug_prob": 0.0})
    steps = run.steps
    assert [s.metric for s in steps[:7]] == [0.77, 0.79, 0.79, 0.76, 0.8, None, 0.8]
    # the first of the tied 0.79 drafts; it stays best past a worse child; the 0.8 child takes over; a
    # crash is never debugged at debug_prob 0; the tie at 0.8 keeps the first
    assert [s.parent for s in steps] == [None, None, None, 2, 2, 5, 5, 5]
    assert [s.action for s in steps] == ["draft"] * 3 + ["improve"] * 5
    # the harness's best (the final test's code) is the same node: the first to reach the best metric
    assert run.record.best_step == 5 and run.record.best_val == 0.8 and run.record.final_val == 0.8


def test_no_good_node_means_a_new_draft_even_with_buggy_leaves(run_agent, fake_llm):
    fake_llm.responder = PortModel(edits=["bug"] * 3 + ["fix"])
    run = run_agent("aide", steps=4, options={"num_drafts": 1, "debug_prob": 0.0})
    assert [(s.action, s.parent) for s in run.steps] == [("draft", None)] * 4
    # at depth limit 0 a buggy draft may be debugged once; its buggy debug child may not
    fake_llm.responder = PortModel(edits=["bug", "bug", "bug"])
    run = run_agent("aide", steps=3, options={"num_drafts": 1, "debug_prob": 1.0, "max_debug_depth": 0}, seed=1)
    assert [(s.action, s.parent) for s in run.steps] == [("draft", None), ("debug", 1), ("draft", None)]
    # nothing ever succeeded: the harness tests the baseline code (the port would run no test)
    assert run.record.best_step is None and run.record.test_on_baseline and run.record.status == "finished"


def port_choices(steps, options, seed):
    """The port's _search_policy, replayed over the recorded tree with the session's RNG."""
    rng = random.Random(f"{seed}:toy_task:aide")
    by_step = {s.step: s for s in steps}

    def buggy(node):
        return not node.success or node.metric is None

    def depth(node):
        d = 0
        while node.parent is not None and buggy(by_step[node.parent]):
            d, node = d + 1, by_step[node.parent]
        return d

    choices = []
    for k in range(len(steps)):
        history = steps[:k]
        choice = ("draft", None)
        if sum(s.parent is None for s in history) >= options["num_drafts"]:
            leaves = [s for s in history if buggy(s) and not any(t.parent == s.step for t in history)
                      and depth(s) <= options["max_debug_depth"]]
            good = [s for s in history if not buggy(s)]
            if rng.random() < options["debug_prob"] and leaves:
                choice = ("debug", rng.choice(leaves).step)
            elif good:
                choice = ("improve", max(good, key=lambda s: s.metric).step)
        choices.append(choice)
    return choices


@pytest.mark.parametrize("seed", [0, 5])
def test_random_choices_follow_the_ports_policy(run_agent, fake_llm, seed):
    options = {"num_drafts": 2, "debug_prob": 0.5, "max_debug_depth": 1}
    fake_llm.responder = PortModel(edits=["bug", "lr=0.1,epochs=10", "bug", "bug", "lr=0.5,epochs=10", "fix",
                                          "bug", "epochs=+30", "fix", "bug"])
    run = run_agent("aide", steps=10, options=options, seed=seed)
    steps = run.steps
    assert [(s.action, s.parent) for s in steps] == port_choices(steps, options, seed)
    assert {s.action for s in steps} == {"draft", "debug", "improve"}


def reply_limit(body: dict) -> int | None:
    return body.get("max_completion_tokens", body.get("max_tokens"))


def test_temperatures_and_reply_limits_on_the_wire(run_agent, fake_llm):
    model = PortModel(edits=["bug", "fix"])
    fake_llm.responder = model
    run_agent("aide", steps=3, options={"num_drafts": 1, "debug_prob": 1.0})
    sent = [(k, seen.body) for k, seen in model.calls]
    assert [k for k, _ in sent] == ["draft", "analysis", "debug", "analysis", "improve", "analysis"]
    # the port's editor sends no temperature; its analysis goes through llm.py's default, 0.75
    assert all("temperature" not in body for k, body in sent if k != "analysis")
    assert [body["temperature"] for k, body in sent if k == "analysis"] == [0.75] * 3
    # llm.py asks for at most MAX_NUM_TOKENS = 8192 (llm.py 14, 217-310), with seed 0 to a gpt model; the
    # editor sends neither a limit nor a seed (code_editor.py 147-155)
    assert [reply_limit(body) for k, body in sent if k == "analysis"] == [8192] * 3
    assert [reply_limit(body) for k, body in sent if k != "analysis"] == [None] * 3
    assert [body.get("seed") for k, body in sent] == [None, 0] * 3
    fake_llm.responder = model = PortModel()
    run_agent("aide", steps=1, options={"edit_temperature": 0.2, "analysis_temperature": None}, seed=1)
    assert [seen.body.get("temperature") for _, seen in model.calls] == [0.2, None]


def test_an_unavailable_model_mid_run_keeps_the_run_going_and_the_final_test_runs(run_agent, fake_llm):
    model = PortModel(edits=["lr=0.1,epochs=10"])
    answered = {"n": 0}

    def respond(seen):
        # the first step is answered; from then on the model is down for good
        if answered["n"] < 2:
            answered["n"] += 1
            return model(seen)
        return Fail(500, "the model is unavailable")

    fake_llm.responder = respond
    run = run_agent("aide", steps=4, options={"num_drafts": 2, "debug_prob": 0.0}, retries=1)
    steps, record = run.steps, run.record
    assert record.status == "finished" and record.steps_used == 4
    # each later step: the editor call failed (a failed edit, the parent's code ran), the analysis failed
    assert [(s.action, s.parent) for s in steps] == [("draft", None), ("draft", None), ("improve", 1), ("improve", 1)]
    for s in steps[1:]:
        assert not s.edit_applied and s.edit_error.startswith("LLM call failed: openai: HTTP 500")
        assert s.success and not s.extra["aide_buggy"]
        assert s.analysis.startswith("Analysis failed: openai: HTTP 500: the model is unavailable")
    assert [s.metric for s in steps] == [0.77, 0.76, 0.77, 0.77]
    assert record.llm_failed_calls == 6 and len(fake_llm.completions) == 2 + 6 * 2  # two tries per failed call
    assert record.best_step == 1 and record.test_metric is not None and record.test_error is None


def test_the_strict_editor_and_the_upstream_variant_are_options(run_agent, fake_llm):
    fake_llm.responder = model = PortModel(edits=["lr=0.1,epochs=10"])
    run = run_agent("aide", steps=1, options={"editor": "strict"})
    assert "## Files you may change" in model.prompts("draft")[0] and run.steps[0].metric == 0.77
    assert run.record.agent_options["variant"] == "port"


def test_a_run_killed_between_a_run_and_its_analysis_resumes_with_the_same_decisions(fake_llm, api_keys, tmp_path,
                                                                                   monkeypatch):
    # inside a debug chain, so the resumed run must rebuild the chain's plans, errors and analyses
    edits = ["bug", "lr=0.1,epochs=10", "bug", "bug", "fix", "epochs=+5"]
    options = {"num_drafts": 2, "debug_prob": 1.0}

    def run(out):
        cls = load_agent_class("aide")
        settings = llm_settings(fake_llm)
        return execute(load_task(TOY_TASK / "task.yaml"), 0, RunSettings(
            agent_cls=cls, agent_name="aide", agent_options=cls.Options(**options), out_dir=out, steps=6,
            model=settings.model, provider=settings.provider, llm_factory=make_llm_factory(settings), sandboxed=False))

    def decisions(outcome):
        return [(s.action, s.parent, s.plan, s.edit_applied, s.success, s.metric, s.analysis, s.extra,
                 outcome.store.read_snapshot(s.snapshot)) for s in outcome.store.load_steps()]

    fake_llm.responder = PortModel(edits=edits)
    whole = run(tmp_path / "whole")
    reference = decisions(whole)
    assert [(d[0], d[1]) for d in reference] == [
        ("draft", None), ("draft", None), ("debug", 1), ("debug", 3), ("debug", 4), ("improve", 2)]

    model = PortModel(edits=edits)
    fake_llm.responder = model
    # killed just before the analysis of step 4 (the second debug), its run already recorded
    killing = {"on": True}
    kill_at_call(monkeypatch, lambda seen: killing["on"] and kind_of(seen) == "analysis" and sum(
        k == "analysis" for k, _ in model.calls) == 3)
    with pytest.raises(RunError):
        run(tmp_path / "cut")
    (steps_file,) = (tmp_path / "cut").glob("runs/toy_task/*/steps.jsonl")
    assert len(steps_file.read_text().splitlines()) == 4
    killing["on"] = False
    asked = len(fake_llm.completions)
    resumed = run(tmp_path / "cut")
    assert resumed.record.status == "finished" and resumed.record.resumed_from_step == 4
    assert decisions(resumed) == reference
    # only step 4's analysis and the two steps after it went to the provider
    assert [kind_of(seen) for seen in fake_llm.completions[asked:]] == ["analysis", "debug", "analysis",
                                                                      "improve", "analysis"]
