"""AIDE's upstream variant (aideml's prompts, re-asks and review: ``variant=upstream``) on the toy task,
driven by scripted replies from the loopback server through the real openai SDK. The default variant, the
FML-bench port's, is tested in tests/agents/test_aide_port.py."""

import json
import random

import pytest

from pytest_fmlbench.runner import RunError

from .fake_llm import Say
from .fixtures import kill_at_call
from .toy_coder import BROKEN_ALGO, ToyCoder, kind_of


def aide_buggy(node) -> bool:
    return not node.success or not node.edit_applied or node.metric is None or node.extra.get("review_is_bug", False)


def debug_depth(node, by_step) -> int:
    depth = 0
    while node.parent is not None and node.action == "debug":
        depth += 1
        node = by_step[node.parent]
    return depth


def upstream(**options) -> dict:
    return {"variant": "upstream", **options}


def expected_choices(steps, options, seed=0):
    """An independent reading of AIDE's policy, replayed over the recorded tree with the session's RNG."""
    rng = random.Random(f"{seed}:toy_task:aide")
    choices = []
    for k in range(len(steps)):
        history = steps[:k]
        by_step = {n.step: n for n in history}
        choice = ("draft", None)
        if sum(n.parent is None for n in history) >= options["num_drafts"]:
            picked = None
            if rng.random() < options.get("debug_prob", 0.5):
                leaves = [n for n in history if aide_buggy(n) and not any(m.parent == n.step for m in history)
                          and debug_depth(n, by_step) <= options.get("max_debug_depth", 3)]
                if leaves:
                    picked = ("debug", rng.choice(leaves).step)
            if picked is None:
                good = [n for n in history if not aide_buggy(n)]
                if good:
                    best = good[0]
                    for n in good[1:]:
                        if n.metric > best.metric:
                            best = n
                    picked = ("improve", best.step)
            choice = picked or choice
        choices.append(choice)
    return choices


def test_policy_drafts_then_debugs_or_improves_as_upstream(run_aide, fake_llm):
    # the first review calls draft 1 buggy although it ran: AIDE must neither build on it nor remember it
    coder = ToyCoder(drafts=("ok", "ok", "bug"), debugs=("bug", "fix"), review_bugs={1})
    fake_llm.responder = coder
    options = upstream(num_drafts=3, debug_prob=0.5, max_debug_depth=1)
    run = run_aide(steps=8, options=options)
    steps = run.steps
    assert run.record.status == "finished" and len(steps) == 8
    assert [(s.action, s.parent) for s in steps] == expected_choices(steps, options)
    assert steps[0].success and steps[0].extra["review_is_bug"] and steps[0].extra["aide_buggy"]
    assert all(s.parent != 1 or s.action == "debug" for s in steps)
    # the first num_drafts steps are root drafts; the tree links every later node to an earlier one
    assert [s.action for s in steps[:3]] == ["draft"] * 3 and all(s.parent is None for s in steps[:3])
    assert all(s.parent is None or s.parent < s.step for s in steps)
    assert {s.action for s in steps[3:]} <= {"debug", "improve", "draft"}
    assert any(s.action == "debug" for s in steps) and any(s.action == "improve" for s in steps)
    # one coding call and one review per step, the reviews costing no step
    assert coder.asked["review"] == 8 and sum(coder.asked[k] for k in ("draft", "debug", "improve")) == 8
    assert all(s.analysis for s in steps) and all("review_is_bug" in s.extra for s in steps)
    # aideml's temperature, 0.5, for the coding calls and the reviews alike
    assert [seen.body.get("temperature") for seen in fake_llm.completions] == [0.5] * 16
    # usage reached the record: every step paid for its call, the last review joined the run total
    assert all(s.usage.calls >= 1 for s in steps)
    assert run.record.usage.calls == 16 and run.record.usage.cost_usd > 0
    # improvements: one atomic change (config.json only) on the parent's code; memory = the good nodes so far
    first_improve = next(s for s in steps if s.action == "improve")
    parent_files = run.store.read_snapshot(steps[first_improve.parent - 1].snapshot)
    assert run.store.read_snapshot(first_improve.snapshot)["algorithm.py"] == parent_files["algorithm.py"]
    improve_prompt = next(r.prompt for r in fake_llm.completions if kind_of(r) == "improve")
    memory = improve_prompt.split("# Memory", 1)[1].split("# Previous solution", 1)[0]
    remembered = [s for s in steps[: first_improve.step - 1] if not aide_buggy(s)]
    assert remembered and all(s.plan in memory and s.analysis in memory for s in remembered)
    assert steps[0].plan not in memory and memory.count("Validation metric: ") == len(remembered)
    # the final test ran on the best validation node
    good = [s for s in steps if s.success]
    best = max(good, key=lambda s: s.metric)
    assert run.record.best_step == min(s.step for s in good if s.metric == best.metric)
    assert run.record.final_val == run.record.best_val == best.metric and run.record.test_metric is not None


def test_debugs_only_buggy_leaves_within_the_depth_limit_then_drafts_anew(run_aide, fake_llm):
    fake_llm.responder = ToyCoder(drafts=("bug",), debugs=("bug",))
    run = run_aide(steps=5, options=upstream(num_drafts=1, debug_prob=1.0, max_debug_depth=1))
    # depths 0 and 1 may be debugged; the depth-2 leaf may not, and with no good node AIDE drafts again
    assert [(s.action, s.parent) for s in run.steps] == [
        ("draft", None), ("debug", 1), ("debug", 2), ("draft", None), ("debug", 4)]
    assert not any(s.success for s in run.steps)
    assert run.record.test_on_baseline and run.record.status == "finished"
    # a debug prompt shows the buggy code and the tail of its error output
    debug_prompt = next(r.prompt for r in fake_llm.completions if kind_of(r) == "debug")
    assert "# Execution output" in debug_prompt and "injected bug in fit" in debug_prompt
    assert BROKEN_ALGO.strip() in debug_prompt


def test_a_reply_without_usable_code_is_a_failed_step_not_a_crash(run_aide, fake_llm):
    coder = ToyCoder(drafts=("ok",), debugs=("fix",))
    fake_llm.script(Say("I would try a larger learning rate."), Say("Still no code, sorry."), Say("Nothing."),
                    Say("Plan: a typo.\n```python algorithm.py\ndef fit(X, y, config:\n    pass\n```"))
    fake_llm.responder = coder
    run = run_aide(steps=3, options=upstream(num_drafts=2, debug_prob=1.0, reply_attempts=3))
    first, second, third = run.steps
    assert run.record.status == "finished"
    assert not first.edit_applied and first.extra["reply_attempts"] == 3
    assert first.edit_error == "no usable code in the reply: the reply contains no code block for an editable file"
    assert first.plan == "Nothing."
    assert not second.edit_applied and second.edit_error == "algorithm.py: does not parse: '(' was never closed (line 1)"
    # the unchanged code still ran and cost its step; AIDE holds both nodes buggy and reviews neither
    assert first.success and second.success and first.extra["aide_buggy"] and second.extra["aide_buggy"]
    assert coder.asked["review"] == 1
    assert third.action == "debug" and third.parent in (1, 2)
    debug_prompt = next(r.prompt for r in fake_llm.completions if kind_of(r) == "debug")
    assert "Your change could not be applied" in debug_prompt


def test_resume_replays_recorded_llm_replies_without_asking_again(run_aide, fake_llm, tmp_path, monkeypatch):
    coder = ToyCoder(drafts=("ok", "bug"))
    outage = {"on": True}
    # the run is killed after two steps, before its third coding call
    kill_at_call(monkeypatch, lambda seen: outage["on"] and coder.asked["review"] >= 2 and kind_of(seen) != "review")
    fake_llm.responder = coder
    options = upstream(num_drafts=2, debug_prob=1.0)
    with pytest.raises(RunError):
        run_aide(steps=3, options=options)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/*/steps.jsonl")
    crashed = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert len(crashed) == 2
    asked_before = len(fake_llm.completions)
    outage["on"] = False
    run = run_aide(steps=3, options=options)
    assert run.record.status == "finished" and run.record.resumed_from_step == 2
    # steps 1-2 replayed from the record and the ledger: only step 3 went to the provider
    assert [kind_of(r) for r in fake_llm.completions[asked_before:]] == ["debug", "review"]
    assert run.record.usage.calls == 6
    lines = [json.loads(line) for line in (run.dir / "steps.jsonl").read_text().splitlines()]
    assert lines[:2] == crashed and [s["step"] for s in lines] == [1, 2, 3]
    assert (lines[2]["action"], lines[2]["parent"]) == ("debug", 2) and all(s["analysis"] for s in lines)
