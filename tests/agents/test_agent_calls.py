"""LLM calls per step of each LLM agent, measured on the loopback server (the figures of docs/reference/agents.md), and
`pytest --agent=NAME --model=...` as users type it for each agent of this folder."""

import pytest
from llm.fixtures import api_keys, fake_llm, run_agent  # noqa: F401 (fixtures)
from llm.toy_coder import ToyCoder
from scripted_coder import ScriptedCoder
from test_ai_scientist_v1 import ToyScientist
from test_ai_scientist_v2 import ToyResearcher
from test_openevolve import ToyEvolver

from conftest import load_record
from doc_pages import lines_starting

STEPS = 6


def calls_by_purpose(run) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in run.ledger():
        counts[call["purpose"]] = counts.get(call["purpose"], 0) + 1
    return counts


# the first coding reply of every agent breaks the code, so each run has one crash to recover from
@pytest.mark.parametrize("agent, coder, calls, purposes", [
    ("aide", lambda: ToyCoder(drafts=("bug", "ok")), 12, {"draft": 5, "debug": 1, "analysis": 6}),
    ("aira-mcts", lambda: ScriptedCoder(edits=["bug", "fix"]), 12, {"draft": 2, "debug": 1, "improve": 3, "analysis": 6}),
    # 25 ideas of 3 rounds each (the idea and 2 reflections) before the first step, then one call per attempt
    ("ai-scientist-v1", lambda: ToyScientist(plans={1: ["bug"]}), 81,
     {"idea": 25, "idea_reflection": 50, "experiment": 5, "fix": 1}),
    # 6 steps: stage budgets 0/1/3/2; the stage's memory is written again once its tree has grown
    ("ai-scientist-v2", lambda: ToyResearcher(drafts=("bug", "ok")), 15,
     {"draft": 4, "improve": 2, "analysis": 6, "memory": 3}),
    ("autoresearch", lambda: ScriptedCoder(ideas=["bug"]), 11, {"idea": 5, "draft": 1, "improve": 4, "debug": 1}),
    ("adaptive-search", lambda: ScriptedCoder(ideas=["bug"]), 11, {"idea": 5, "draft": 1, "improve": 4, "debug": 1}),
    ("openevolve", lambda: ToyEvolver(evolves=("bug", "ok")), 12, {"evolve": 6, "analysis": 6}),
])
def test_llm_calls_per_step(run_agent, fake_llm, agent, coder, calls, purposes):
    fake_llm.responder = coder()
    run = run_agent(agent, steps=STEPS, options={"debug_prob": 1.0} if agent == "aide" else {})
    assert run.record.steps_used == STEPS and run.record.usage.calls == calls == len(fake_llm.completions)
    assert calls_by_purpose(run) == purposes
    print(f"{agent}: {calls / STEPS:.2f} LLM calls per step ({calls} calls, {STEPS} steps): {purposes}")


@pytest.mark.parametrize("agent, options", [
    ("aira-mcts", ["num_children=1"]),
    ("autoresearch", ["max_debug_retries=2"]),
    ("adaptive-search", ["p1_window=1", "encoder=none"]),
])
def test_each_agent_runs_from_the_command_line_with_its_options_recorded(pytester, toy, bench, fake_llm, api_keys,
                                                                          agent, options):
    fake_llm.responder = ScriptedCoder()
    opts = [arg for option in options for arg in ("--agent-opt", option)]
    result = bench(f"--agent={agent}", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", *opts, "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["status"], record["steps_used"], record["usage"]["calls"]) == (agent, "finished", 2, 4)
    name, value = options[0].split("=")
    assert str(record["agent_options"][name]) == value
    # an unknown option is one line naming the valid ones
    bad = bench(f"--agent={agent}", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--agent-opt", "bogus=1", "toy_task")
    bad.stderr.fnmatch_lines([f"ERROR: agent {agent} has no option bogus; options: *{name}*"])


# the scripted model that understands each agent's prompts
MODELS = {"ai-scientist-v1": ToyScientist, "ai-scientist-v2": ToyResearcher, "openevolve": ToyEvolver}
README_AGENTS = ("aira-mcts", "ai-scientist-v1", "ai-scientist-v2", "autoresearch", "openevolve", "adaptive-search")
# as the README and the LLM providers' how-to show them
README_LINES = [line.split("#")[0].split() for line in lines_starting(
    tuple(f"pytest --agent={agent} " for agent in README_AGENTS), "README.md", "how-to/llm-providers.md")]


def test_the_readme_shows_a_command_for_each_of_these_agents():
    assert {words[1].split("=")[1] for words in README_LINES} == set(README_AGENTS)


@pytest.mark.parametrize("words", README_LINES, ids=[w[1] for w in README_LINES])
def test_the_readme_commands_of_these_agents(pytester, toy, bench, fake_llm, api_keys, words):
    fake_llm.responder = MODELS.get(words[1].split("=")[1], ScriptedCoder)()
    # the README's model, served by the loopback server; two steps instead of the README's budget
    result = bench(*words[1:], f"--base-url={fake_llm.url}", "--steps=2", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["model"], record["status"]) == (words[1].split("=")[1], "gpt-5.4", "finished")
    for name, value in (w.split("=") for w in words[2:] if "=" in w and not w.startswith("--")):
        assert str(record["agent_options"][name]) == value
