"""AI Scientist v1 on the toy task, over the loopback server and the real openai SDK."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import load_record
from llm.fixtures import api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401  (fixtures)
from llm.fake_llm import Say, Seen
from llm.toy_coder import BROKEN_ALGO, GOOD_ALGO, file_block
from pytest_fmlbench.agentkit import AgentLoadError, load_agent_class, parse_agent_options
from pytest_fmlbench.runner import RunError

TOY = Path(__file__).parents[1] / "data" / "toy_task"
AGENT = load_agent_class("ai-scientist-v1")


def last_user(seen: Seen) -> str:
    return [m["content"] for m in seen.body["messages"] if m["role"] == "user"][-1]


def kind_of(seen: Seen) -> str:
    text = last_user(seen)
    if "Propose the next impactful" in text:
        return "idea"
    if re.match(r"Round \d+/\d+", text):
        return "reflection"
    instruction = text.split("## Instruction\n", 1)[-1]
    if instruction.startswith("Your goal is to implement this idea"):
        return "run1"
    if instruction.startswith("The previous run failed"):
        return "fix"
    if re.match(r"Run \d+ completed", instruction):
        return "next_run"
    return "other"


def idea_json(k: int) -> str:
    return json.dumps({"Name": f"idea_{k}", "Title": f"Idea number {k}", "Experiment": f"Sweep the lr, take {k}.",
                       "Interestingness": 6, "Feasibility": 8, "Novelty": k % 10})


class ToyScientist:
    """A scripted model. Which idea an editor call serves is read from the notes shown in the prompt.

    ``done_at``: reflection rounds saying "I am done" per idea (default: never); ``plans``: per idea
    title, the outcome of each editor call in turn: 'ok' (a working change), 'bug' (code that crashes),
    'done' (a working change and ALL_COMPLETED), 'none' (no code at all); the default is 'ok'.
    """

    def __init__(self, done_at: dict[int, int] | None = None, plans: dict[int, list[str]] | None = None,
                 bad_json: set[int] = frozenset()):
        self.done_at = done_at or {}
        self.plans = plans or {}
        self.bad_json = set(bad_json)
        self.asked: Counter[str] = Counter()
        self.edit_calls: Counter[int] = Counter()
        self.kinds: list[str] = []

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.asked[kind] += 1
        self.kinds.append(kind)
        if kind == "idea":
            k = self.asked["idea"]
            if k in self.bad_json:
                return Say("THOUGHT:\nI cannot think of anything.\n")
            return Say(f"THOUGHT:\nA fresh direction.\n\nNEW IDEA JSON:\n```json\n{idea_json(k)}\n```")
        if kind == "reflection":
            said = [m["content"] for m in seen.body["messages"] if m["role"] == "assistant"][-1]
            k = json.loads(re.findall(r"```json\n(.*?)\n```", said, re.DOTALL)[-1])["Name"].split("_")[1]
            rnd = int(re.match(r"Round (\d+)", last_user(seen)).group(1))
            done = self.done_at.get(int(k)) == rnd
            return Say("THOUGHT:\nLooks fine." + (" I am done" if done else " Sharpened it.")
                       + f"\n\nNEW IDEA JSON:\n```json\n{idea_json(int(k))}\n```")
        if kind in ("run1", "next_run", "fix"):
            shown = re.search(r"# Idea title: Idea number (\d+)", seen.prompt)
            idea = int(shown.group(1)) if shown else 0
            n = self.edit_calls[idea]
            self.edit_calls[idea] += 1
            plan = self.plans.get(idea, [])
            outcome = plan[n] if n < len(plan) else "ok"
            if outcome == "none":
                return Say("I would rather think some more.")
            algo = BROKEN_ALGO if outcome == "bug" else GOOD_ALGO
            config = {"lr": round(0.05 * (n + 1), 3), "epochs": 10 + 5 * n}
            done = "\nALL_COMPLETED" if outcome == "done" else ""
            return Say(f"Run with lr {config['lr']}.{done}\n\n{file_block('algorithm.py', algo)}\n\n"
                       f"{file_block('config.json', json.dumps(config))}\n\n"
                       + file_block("notes.txt", f"# Idea title: Idea number {idea}\nedit {n} of idea {idea}\n"))
        return Say("?")


@pytest.fixture
def run_v1(run_agent):  # noqa: F811
    def run(steps: int, **options):
        return run_agent("ai-scientist-v1", steps=steps, options=options)

    return run


def test_ideas_come_from_reflection_rounds_that_stop_at_i_am_done(run_v1, fake_llm):
    model = ToyScientist(done_at={1: 2, 3: 3})
    fake_llm.responder = model
    run = run_v1(steps=1, num_ideas=3, num_reflections=4, max_runs=1)
    # idea 1 converges in round 2, idea 2 uses all 4 rounds, idea 3 stops in round 3: all before step 1
    assert model.kinds[:10] == ["idea", "reflection", "idea", "reflection", "reflection", "reflection",
                                "idea", "reflection", "reflection", "run1"]
    ideas = run.steps[0].extra["ideas"]
    assert [(i["name"], i["rounds"], i["converged"]) for i in ideas] == [
        ("idea_1", 2, True), ("idea_2", 4, False), ("idea_3", 3, True)]
    assert ideas[2]["ratings"] == {"Interestingness": 6.0, "Feasibility": 8.0, "Novelty": 3.0}
    # each reflection round's reasoning is recorded with its idea
    assert ideas[0]["reflections"] == ["Looks fine. I am done"]
    assert ideas[1]["reflections"] == ["Looks fine. Sharpened it."] * 3
    # each new conversation shows the ideas generated before it; reflections continue the conversation
    idea_calls = [r for r in fake_llm.completions if kind_of(r) == "idea"]
    assert "idea_1" in last_user(idea_calls[1]) and "idea_2" in last_user(idea_calls[2])
    assert "idea_2" not in last_user(idea_calls[1])
    reflection = next(r for r in fake_llm.completions if kind_of(r) == "reflection")
    assert [m["role"] for m in reflection.body["messages"]] == ["system", "user", "assistant", "user"]
    # idea calls cost no step: the one step paid for everything before it
    assert run.record.steps_used == 1 and run.steps[0].usage.calls == 10
    assert run.steps[0].idea == "idea_1: Idea number 1"


def test_runs_per_idea_retry_limit_and_all_completed(run_v1, fake_llm):
    model = ToyScientist(plans={
        1: ["ok", "bug", "ok", "done"],     # run 1, run 2 fails once then works, run 3 says ALL_COMPLETED
        2: ["ok", "bug", "bug", "bug"],     # run 2 fails all 3 attempts: the idea is dropped
        3: ["ok", "ok", "ok"],              # all 3 runs
    })
    fake_llm.responder = model
    run = run_v1(steps=14, num_ideas=3, num_reflections=1, max_runs=3, max_retries_per_run=3)
    steps = run.steps
    shape = [(s.extra["idea"]["name"], s.extra["run"], s.extra["attempt"], s.action, s.success) for s in steps]
    assert shape == [
        ("idea_1", 1, 1, "draft", True), ("idea_1", 2, 1, "improve", False), ("idea_1", 2, 2, "debug", True),
        ("idea_1", 3, 1, "improve", True),
        ("idea_2", 1, 1, "draft", True), ("idea_2", 2, 1, "improve", False), ("idea_2", 2, 2, "debug", False),
        ("idea_2", 2, 3, "debug", False),
        ("idea_3", 1, 1, "draft", True), ("idea_3", 2, 1, "improve", True), ("idea_3", 3, 1, "improve", True),
    ]
    assert run.record.status == "finished" and run.record.steps_used == 11  # ideas ran out before the budget
    ends = {s.extra["idea"]["name"]: s.extra["idea_ended"] for s in steps if "idea_ended" in s.extra}
    assert ends == {"idea_1": "ALL_COMPLETED", "idea_2": "run 2 failed 3 times", "idea_3": "all 3 runs done"}
    assert steps[3].extra["all_completed"] and not steps[2].extra["all_completed"]
    # every idea starts from the baseline: its first step has no parent and edits the baseline files
    first_of_idea = [s for s in steps if s.extra["run"] == 1]
    assert [s.parent for s in first_of_idea] == [None, None, None]
    edit_prompts = [r for r in fake_llm.completions if kind_of(r) == "run1"]
    baseline_config = (TOY / "workspace" / "config.json").read_text().strip()
    assert all(baseline_config in last_user(p) for p in edit_prompts)
    # a retry continues from the failing code, shown with the error tail; later runs see the last metric
    fix = next(r for r in fake_llm.completions if kind_of(r) == "fix")
    assert "## Previous execution error" in last_user(fix) and "injected bug in fit" in last_user(fix)
    assert BROKEN_ALGO.strip() in last_user(fix)
    assert steps[2].parent == 2 and steps[1].parent == 1
    next_run = next(r for r in fake_llm.completions if kind_of(r) == "next_run")
    assert f"Last run result: accuracy = {steps[0].metric:.6g}" in last_user(next_run)
    # the notes the model keeps come back in the next prompt of the same idea, not in the next idea's
    assert "edit 0 of idea 1" in last_user(next_run)
    assert not any("of idea 1" in last_user(p) for p in edit_prompts[1:])
    assert steps[2].extra["idea_runs"] == [{"run": 1, "step": 1, "metric": steps[0].metric},
                                           {"run": 2, "step": 3, "metric": steps[2].metric}]


def test_budget_ends_mid_idea_and_max_iter_caps_attempts(run_v1, fake_llm):
    fake_llm.responder = ToyScientist()
    run = run_v1(steps=4, num_ideas=2, num_reflections=1, max_runs=3)
    assert run.record.status == "finished" and run.record.steps_used == 4
    assert [s.extra["idea"]["name"] for s in run.steps] == ["idea_1"] * 3 + ["idea_2"]
    assert run.steps[-1].extra["idea_ended"] == "step budget spent"
    # no editor call was made that no step could pay for
    assert sum(1 for r in fake_llm.completions if kind_of(r) != "idea") == 4

    fake_llm.responder = model = ToyScientist()
    capped = run_v1(steps=10, num_ideas=2, num_reflections=1, max_runs=3, max_iter=4, idea_generation="lazy")
    assert capped.record.steps_used == 4 and capped.steps[-1].extra["idea_ended"] == "max_iter (4) attempts reached"
    assert model.asked["idea"] == 2


def test_lazy_generation_asks_for_an_idea_only_when_it_is_needed(run_v1, fake_llm):
    model = ToyScientist()
    fake_llm.responder = model
    run = run_v1(steps=2, num_ideas=25, num_reflections=2, max_runs=2, idea_generation="lazy")
    assert model.kinds == ["idea", "reflection", "run1", "next_run"]
    assert run.record.steps_used == 2 and run.record.agent_options["idea_generation"] == "lazy"
    assert run.record.agent_options["num_ideas"] == 25


def test_failed_idea_conversations_are_dropped_and_a_free_form_idea_is_the_last_resort(run_v1, fake_llm):
    model = ToyScientist(bad_json={1})
    fake_llm.responder = model
    run = run_v1(steps=1, num_ideas=2, num_reflections=1, max_runs=1)
    assert [i["name"] for i in run.steps[0].extra["ideas"]] == ["idea_2", "idea_3"]

    # no conversation gives JSON (the port crashes): with too_few_ideas=continue the last reply becomes a
    # free-form idea, marked so
    silent = ToyScientist(bad_json={1, 2, 3, 4})
    fake_llm.responder = silent
    free = run_v1(steps=2, num_ideas=2, num_reflections=1, max_runs=2, too_few_ideas="continue")
    assert free.record.status == "finished" and free.record.steps_used == 2 and silent.asked["idea"] == 4
    idea = free.steps[0].extra["idea"]
    assert (idea["name"], idea["parsed"]) == ("unparsed_idea", False)
    assert idea["experiment"] == "THOUGHT:\nI cannot think of anything."
    first_prompt = [r for r in fake_llm.completions if kind_of(r) == "run1"][-1]
    assert "The proposed experiment: THOUGHT:\nI cannot think of anything." in last_user(first_prompt)

    fake_llm.responder = lambda seen: Say("")
    empty = run_v1(steps=2, num_ideas=1, num_reflections=1, max_runs=1, too_few_ideas="continue")
    assert empty.record.status == "stopped" and empty.record.steps_used == 0
    assert "none of 2 idea conversation(s) gave an idea" in empty.record.stop_reason


def test_fewer_ideas_than_asked_for_end_the_run_before_its_first_step_as_the_ports(run_v1, fake_llm):
    """The port's generate_ideas asserts it made num_generations ideas (generate_ideas.py 187); the agent
    turns the AssertionError into "Error during idea generation" and the run ends (theaiscientist.py 467-468)."""
    fake_llm.responder = model = ToyScientist(bad_json={2, 3, 4})
    run = run_v1(steps=3, num_ideas=2, num_reflections=1, max_runs=1)
    assert run.record.status == "stopped" and run.record.steps_used == 0
    assert model.asked["idea"] == 4  # 2 * num_ideas conversations, as the port's max_attempts
    assert "1 of num_ideas=2 ideas from 4 idea conversation(s)" in run.record.stop_reason


def test_the_instructions_list_the_ports_read_only_files_and_the_idea_prompt_its_code(run_v1, fake_llm):
    fake_llm.responder = ToyScientist()
    run_v1(steps=1, num_ideas=1, num_reflections=1, max_runs=1)
    run1 = next(r for r in fake_llm.completions if kind_of(r) == "run1")
    # theaiscientist.py 629: {self.read_only_files}, from a benchmark-config key no task sets: []
    assert "The read-only files: [].\n" in last_user(run1)
    # generate_ideas.py 28-32, 107-110: the description, then the files' contents run together, no names
    idea = next(r for r in fake_llm.completions if kind_of(r) == "idea")
    code = "".join((TOY / "workspace" / name).read_text() for name in ("algorithm.py", "config.json", "split_config.json"))
    assert f"\n<experiment.py>\n{code}\n</experiment.py>\n\n" in last_user(idea)

    fake_llm.responder = ToyScientist()
    fake_llm.requests.clear()
    run_v1(steps=1, num_ideas=1, num_reflections=1, max_runs=1, read_only_files="protected", idea_code="named")
    run1 = next(r for r in fake_llm.completions if kind_of(r) == "run1")
    assert "The read-only files: ['train.py'" in last_user(run1)
    idea = next(r for r in fake_llm.completions if kind_of(r) == "idea")
    assert "<experiment.py>" not in last_user(idea) and "algorithm.py" in last_user(idea)


def test_a_reply_without_code_still_runs_and_costs_its_step(run_v1, fake_llm):
    fake_llm.responder = ToyScientist(plans={1: ["none", "ok"]})
    run = run_v1(steps=2, num_ideas=1, num_reflections=1, max_runs=2)
    first, second = run.steps
    assert not first.edit_applied and "no usable code" in first.edit_error and first.success
    assert second.action == "improve" and second.edit_applied


def test_resume_replays_ideas_and_steps(run_v1, fake_llm, tmp_path, monkeypatch):
    model = ToyScientist(plans={1: ["ok", "bug", "ok"]})
    outage = {"on": True}
    # the run is killed after step 2, before its first fix call
    kill_at_call(monkeypatch, lambda seen: outage["on"] and kind_of(seen) == "fix")
    fake_llm.responder = model
    options = dict(num_ideas=3, num_reflections=2, max_runs=3)
    with pytest.raises(RunError):
        run_v1(steps=5, **options)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/*/steps.jsonl")
    crashed = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert len(crashed) == 2
    asked_before = len(fake_llm.completions)
    outage["on"] = False
    run = run_v1(steps=5, **options)
    assert run.record.status == "finished" and run.record.resumed_from_step == 2
    # ideas and the first two steps came from the ledger and the record: only new calls went out
    assert [kind_of(r) for r in fake_llm.completions[asked_before:]] == ["fix", "next_run", "run1"]
    lines = [json.loads(line) for line in (run.store.dir / "steps.jsonl").read_text().splitlines()]
    assert lines[:2] == crashed and [s["step"] for s in lines] == [1, 2, 3, 4, 5]
    assert [(s["action"], s["parent"]) for s in lines] == [
        ("draft", None), ("improve", 1), ("debug", 2), ("improve", 3), ("draft", None)]


def test_options_default_to_the_port_and_unknown_ones_are_named():
    defaults = AGENT.Options()
    port = (defaults.num_ideas, defaults.num_reflections, defaults.max_runs, defaults.max_retries_per_run)
    assert port == (25, 3, 5, 4)
    assert parse_agent_options(AGENT, ["idea_generation=lazy", "num_ideas=2"]).num_ideas == 2
    with pytest.raises(AgentLoadError, match="no option ideas; options: .*num_ideas"):
        parse_agent_options(AGENT, ["ideas=3"])
    with pytest.raises(AgentLoadError, match="idea_generation"):
        parse_agent_options(AGENT, ["idea_generation=sometimes"])


# -- as users run it --------------------------------------------------------------------------------------
def test_runs_from_the_command_line_with_its_options_recorded(pytester, toy, bench, fake_llm, api_keys):  # noqa: F811
    fake_llm.responder = ToyScientist()
    opts = [arg for option in ["num_ideas=1", "num_reflections=1"] for arg in ("--agent-opt", option)]
    # the command line, not isolation, under test: sandboxed experiments import the package the venv
    # installs, which need not be this checkout
    result = bench("--agent=ai-scientist-v1", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", *opts,
                   "--no-sandbox", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["status"], record["steps_used"], record["usage"]["calls"]) == \
        ("ai-scientist-v1", "finished", 2, 3)
    assert record["agent_options"]["num_ideas"] == 1 and record["agent_options"]["max_runs"] == 5
    bad = bench("--agent=ai-scientist-v1", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--agent-opt", "bogus=1",
                "toy_task")
    bad.stderr.fnmatch_lines(["ERROR: agent ai-scientist-v1 has no option bogus; options: *max_runs*"])
