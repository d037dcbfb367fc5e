"""OpenEvolve: the MAP-Elites population on its own, then the agent on the toy task over the loopback server."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest

from conftest import load_record
from llm.fixtures import api_keys, fake_llm, kill_at_call, run_agent  # noqa: F401  (fixtures)
from llm.fake_llm import Say, Seen
from llm.toy_coder import BROKEN_ALGO, GOOD_ALGO, file_block, shown_file
from pytest_fmlbench.agentkit import AgentLoadError, load_agent_class, parse_agent_options
from pytest_fmlbench.agentkit.map_elites import Population, Program, Settings
from pytest_fmlbench.runner import RunError

AGENT = load_agent_class("openevolve")


def program(pid: str, island: int = 0, metric: float | None = 0.5, *, complexity: float = 100.0,
            diversity: float = 0.5, code: str | None = None) -> Program:
    return Program(id=pid, code=code or f"# program {pid}\n", island=island, metric=metric, buggy=metric is None,
                   complexity=complexity, diversity=diversity)


# -- the population ---------------------------------------------------------------------------------
def test_parent_sampling_follows_the_exploration_exploitation_ratios():
    pop = Population(Settings(num_islands=2, archive_size=4), "higher", random.Random(7))
    metrics = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, None, None]
    for k, metric in enumerate(metrics):
        pop.add(program(f"p{k}", 0, metric, complexity=100 + 40 * k, diversity=k / 10))
    pop.add(program("other", 1, 0.9))
    # the archive keeps the 4 fittest, on both islands: other (island 1), p5, p4, p3
    assert pop.archive == ["p3", "p4", "p5", "other"]
    draws = 20000
    strategies, parents = Counter(), {"exploration": Counter(), "exploitation": Counter(), "weighted": Counter()}
    for _ in range(draws):
        sample = pop.sample(0)
        strategies[sample.strategy] += 1
        parents[sample.strategy][sample.parent.id] += 1
    assert abs(strategies["exploration"] / draws - 0.2) < 0.015
    assert abs(strategies["exploitation"] / draws - 0.7) < 0.015
    assert abs(strategies["weighted"] / draws - 0.1) < 0.015
    # exploration: any program of the island, buggy ones included, about evenly
    assert set(parents["exploration"]) == {f"p{k}" for k in range(8)}
    assert max(parents["exploration"].values()) < 1.35 * min(parents["exploration"].values())
    # exploitation: archive programs of this island only
    assert set(parents["exploitation"]) == {"p3", "p4", "p5"}
    # weighted: in proportion to the metric, buggy programs at the floor weight
    weighted = parents["weighted"]
    total = sum(weighted.values())
    weights = {f"p{k}": (m if m is not None else 1e-3) for k, m in enumerate(metrics)}
    norm = sum(weights.values())
    for pid, w in weights.items():
        assert abs(weighted[pid] / total - w / norm) < 0.035, pid


def test_lower_is_better_weights_mirror_the_scored_range():
    pop = Population(Settings(num_islands=1), "lower", random.Random(3))
    for pid, metric in (("a", 10.0), ("b", 30.0), ("c", 20.0)):
        pop.add(program(pid, 0, metric))
    counts = Counter(pop._weighted(0).id for _ in range(12000))
    # mirrored around 10 + 30: fitness a = 30, c = 20, b = 10
    assert counts["a"] > counts["c"] > counts["b"]
    assert abs(counts["a"] / 12000 - 0.5) < 0.03


def test_map_elites_a_fitter_child_takes_the_cell_a_weaker_one_does_not():
    pop = Population(Settings(num_islands=1), "higher", random.Random(0))
    first = pop.add(program("first", metric=0.5))
    assert first.outcome == "new cell" and first.in_archive
    fitter = pop.add(program("fitter", metric=0.7))
    assert fitter.cell == first.cell and fitter.outcome == "took the cell from first"
    weaker = pop.add(program("weaker", metric=0.6))
    assert weaker.outcome == "cell kept by fitter"
    crashed = pop.add(program("crashed", metric=None))
    assert crashed.outcome == "cell kept by fitter" and not crashed.in_archive
    elsewhere = pop.add(program("elsewhere", metric=0.1, diversity=0.95))
    assert elsewhere.cell != first.cell and elsewhere.outcome == "new cell"
    assert pop.cells[0] == {first.cell: "fitter", elsewhere.cell: "elsewhere"}
    assert pop.best == "fitter" and pop.island_best[0] == "fitter"
    # lower is better: the smaller metric wins the cell
    low = Population(Settings(num_islands=1), "lower", random.Random(0))
    low.add(program("a", metric=5.0))
    assert low.add(program("b", metric=3.0)).outcome == "took the cell from a"
    assert low.add(program("c", metric=4.0)).outcome == "cell kept by b"


def test_the_archive_keeps_the_fittest():
    pop = Population(Settings(num_islands=1, archive_size=3), "higher", random.Random(0))
    evicted = [pop.add(program(f"p{k}", metric=m, diversity=k / 6)).evicted for k, m in enumerate(
        [0.5, 0.9, 0.1, 0.7, 0.8])]
    assert evicted == [(), (), (), ("p2",), ("p0",)]
    assert sorted(pop.archive) == ["p1", "p3", "p4"]


def test_migration_every_10_generations_to_both_ring_neighbours():
    pop = Population(Settings(num_islands=3), "higher", random.Random(0))
    for island in range(3):
        for k in range(12):
            pop.add(program(f"i{island}p{k}", island, metric=island + k / 100, diversity=k / 12))
    due = [g for g in range(1, 31) if pop.end_generation([0, 1, 2]) is not None]
    assert due == [10, 20, 30]
    pop2 = Population(Settings(num_islands=3), "higher", random.Random(0))
    for island in range(3):
        for k in range(12):
            pop2.add(program(f"i{island}p{k}", island, metric=island + k / 100, diversity=k / 12))
    for _ in range(9):
        assert pop2.end_generation([0, 1, 2]) is None
    moves = pop2.end_generation([0, 1, 2])
    # 10% of 12 programs -> 1 program per island (its best), sent to both neighbours
    sent = [(m["program"], m["from"], m["to"]) for m in moves]
    assert sent[:2] == [("i0p11", 0, 1), ("i0p11", 0, 2)]
    assert ("i1p11", 1, 0) in sent and ("i1p11", 1, 2) in sent
    copies = [pop2.programs[m["copy"]] for m in moves]
    assert all(c.migrated and c.island == m["to"] and c.parent == m["program"] for c, m in zip(copies, moves))
    # island 0's best is now island 2's copy: copies are never sent on
    again = pop2.migrate()
    assert not any(pop2.programs[m["program"]].migrated for m in again)


def test_a_generation_counts_only_the_islands_that_ran():
    pop = Population(Settings(num_islands=3, migration_interval=2), "higher", random.Random(0))
    for island in range(3):
        pop.add(program(f"s{island}", island))
    assert pop.end_generation([0]) is None and pop.generations == [1, 0, 0]
    assert pop.end_generation([0, 1]) is not None and pop.last_migration_generation == 2


# -- the agent over the loopback server ---------------------------------------------------------------
def last_user(seen: Seen) -> str:
    return seen.body["messages"][-1]["content"]


def kind_of(seen: Seen) -> str:
    if "You analyse ML experiments" in seen.body["messages"][0]["content"]:
        return "analysis"
    instruction = last_user(seen).split("## Instruction\n", 1)[-1]
    if instruction.startswith("The previous code change caused an error"):
        return "debug"
    if instruction.startswith("## Current solution performance"):
        return "evolve"
    return "other"


class ToyEvolver:
    """Evolve calls follow ``evolves`` ('ok' or 'bug', cycled): 'ok' adds epochs and draws another
    validation split (so metrics move), 'bug' breaks fit; debug calls follow ``debugs`` ('fix' or 'bug')."""

    def __init__(self, evolves=("ok",), debugs=("fix",)):
        self.evolves = list(evolves)
        self.debugs = list(debugs)
        self.asked: Counter[str] = Counter()

    def __call__(self, seen: Seen) -> Say:
        kind = kind_of(seen)
        self.asked[kind] += 1
        i = self.asked[kind] - 1
        if kind == "analysis":
            ok = "Success: True" in last_user(seen)
            return Say(f"Attempt {i + 1}: " + ("more epochs helped." if ok else "fit crashed."))
        if kind == "debug":
            algo = GOOD_ALGO if self.debugs[i % len(self.debugs)] == "fix" else BROKEN_ALGO
            return Say(file_block("algorithm.py", algo))
        if kind == "evolve":
            if self.evolves[i % len(self.evolves)] == "bug":
                return Say(file_block("algorithm.py", BROKEN_ALGO))
            config = json.loads(shown_file(last_user(seen), "config.json"))
            config["epochs"] = int(config["epochs"]) + 10
            return Say(file_block("config.json", json.dumps(config)) + "\n\n"
                       + file_block("split_config.json", json.dumps({"val_ratio": 0.25, "val_seed": i + 1})))
        return Say("?")


@pytest.fixture
def run_oe(run_agent):  # noqa: F811
    def run(steps: int, **options):
        return run_agent("openevolve", steps=steps, options=options)

    return run


def test_islands_take_turns_children_stay_home_and_migration_follows_generations(run_oe, fake_llm):
    model = ToyEvolver(evolves=("ok", "ok", "bug"))
    fake_llm.responder = model
    run = run_oe(steps=12, num_islands=3, migration_interval=2, debug_prob=0.0)
    steps = run.steps
    assert run.record.status == "finished" and len(steps) == 12
    assert [s.extra["slot"] for s in steps] == [0, 1, 2] * 4
    # the first generation starts from the baseline seeded on each island, at no step's cost
    assert [s.extra["parent_program"] for s in steps[:3]] == ["seed0", "seed1", "seed2"]
    assert steps[0].extra["seeds"]["metric"] == 0.76 and all(s.parent is None for s in steps[:3])
    programs = {f"s{s.step}": s for s in steps}
    for s in steps:
        parent = s.extra["parent_program"]
        if parent in programs:  # a child lives on its parent's island and links to the parent's step
            assert s.parent == programs[parent].step and s.extra["island"] == programs[parent].extra["island"]
        assert s.extra["sampling"] in ("exploration", "exploitation", "weighted")
        assert re.fullmatch(r"new cell|took the cell from \w+|cell kept by \w+", s.extra["cell_outcome"])
        assert s.extra["in_archive"] == s.success
    # migration after generations 2 and 4 (steps 6 and 12), recorded on the generation's last step
    migrated = [s.step for s in steps if "migration" in s.extra]
    assert migrated == [6, 12]
    moves = steps[5].extra["migration"]["moves"]
    assert {(m["from"], m["to"]) for m in moves} >= {(0, 1), (0, 2)}
    # the prompt describes the island's history, top performers and inspirations by their analyses
    prompts = [last_user(r) for r in fake_llm.completions if kind_of(r) == "evolve"]
    later = prompts[-1]
    assert "## Evolution history (recent attempts)" in later and "features=(" in later
    assert "## Top performers (island" in later and "Attempt " in later
    # two calls per step: the coding call and the analysis (costing no step)
    assert model.asked["analysis"] == 12 and model.asked["evolve"] + model.asked["debug"] == 12
    assert run.record.usage.calls == 24
    assert all(s.analysis.startswith("Attempt ") for s in steps)


def test_buggy_parents_are_debugged_within_the_depth_limit(run_oe, fake_llm):
    fake_llm.responder = ToyEvolver(evolves=("bug",), debugs=("bug",))
    run = run_oe(steps=6, num_islands=1, debug_prob=1.0, max_debug_depth=1, exploration_ratio=1.0,
                 exploitation_ratio=0.0)
    actions = [(s.action, s.extra["parent_program"], s.success) for s in run.steps]
    assert actions[0] == ("improve", "seed0", False)
    debugs = [s for s in run.steps if s.action == "debug"]
    assert debugs and all(run.steps[s.parent - 1].success is False for s in debugs)
    # a failed debug (depth 1) is never debugged again: it evolves like any other parent
    assert all(run.steps[s.parent - 1].action != "debug" for s in debugs)
    assert any(s.action == "improve" and s.parent in {d.step for d in debugs} for s in run.steps)
    debug_prompt = next(last_user(r) for r in fake_llm.completions if kind_of(r) == "debug")
    assert "## Previous execution error" in debug_prompt and "injected bug in fit" in debug_prompt


def test_budget_ends_mid_generation(run_oe, fake_llm):
    model = ToyEvolver()
    fake_llm.responder = model
    run = run_oe(steps=4)
    assert run.record.steps_used == 4 and run.record.status == "finished"
    assert [s.extra["slot"] for s in run.steps] == [0, 1, 2, 0]
    assert model.asked["evolve"] + model.asked["debug"] == 4  # nothing asked that no step pays for
    assert run.record.agent_options["num_islands"] == 3 and run.record.agent_options["migration_interval"] == 10


def test_options_are_checked():
    with pytest.raises(AgentLoadError, match="must be at most 1"):
        parse_agent_options(AGENT, ["exploration_ratio=0.5", "exploitation_ratio=0.7"])
    with pytest.raises(AgentLoadError, match="no option islands; options: .*num_islands"):
        parse_agent_options(AGENT, ["islands=4"])


def test_resume_rebuilds_the_population(run_oe, fake_llm, tmp_path, monkeypatch):
    model = ToyEvolver(evolves=("ok", "bug"))
    outage = {"on": True}
    kill_at_call(monkeypatch, lambda seen: outage["on"] and model.asked["analysis"] >= 4
                 and kind_of(seen) != "analysis")
    fake_llm.responder = model
    options = dict(num_islands=2, migration_interval=2)
    with pytest.raises(RunError):
        run_oe(steps=8, **options)
    (steps_file,) = tmp_path.glob("out/runs/toy_task/*/steps.jsonl")
    crashed = [json.loads(line) for line in steps_file.read_text().splitlines()]
    assert len(crashed) == 4 and "migration" in crashed[3]["extra"]
    asked_before = len(fake_llm.completions)
    outage["on"] = False
    run = run_oe(steps=8, **options)
    assert run.record.status == "finished" and run.record.resumed_from_step == 4
    lines = [json.loads(line) for line in (run.store.dir / "steps.jsonl").read_text().splitlines()]
    assert lines[:4] == crashed and len(lines) == 8
    assert len(fake_llm.completions) - asked_before == 8  # only steps 5-8 were asked for
    assert "migration" in lines[7]["extra"]


# -- as users run it --------------------------------------------------------------------------------------
def test_runs_from_the_command_line_with_its_options_recorded(pytester, toy, bench, fake_llm, api_keys):  # noqa: F811
    fake_llm.responder = ToyEvolver()
    opts = [arg for option in ["num_islands=2"] for arg in ("--agent-opt", option)]
    # the command line, not isolation, under test: sandboxed experiments import the package the venv
    # installs, which need not be this checkout
    result = bench("--agent=openevolve", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--steps=2", *opts,
                   "--no-sandbox", "toy_task")
    result.assert_outcomes(passed=1)
    record = load_record(pytester.path)
    assert (record["agent"], record["status"], record["steps_used"], record["usage"]["calls"]) == \
        ("openevolve", "finished", 2, 4)
    assert record["agent_options"]["num_islands"] == 2 and record["agent_options"]["archive_size"] == 30
    bad = bench("--agent=openevolve", "--model=gpt-4o", f"--base-url={fake_llm.url}", "--agent-opt", "bogus=1",
                "toy_task")
    bad.stderr.fnmatch_lines(["ERROR: agent openevolve has no option bogus; options: *num_islands*"])
