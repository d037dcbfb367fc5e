"""OpenEvolve: evolution over a MAP-Elites population split into islands, after codelion/openevolve as
FML-bench ports it.

The population (``pytest_fmlbench.agentkit.map_elites``) starts with the baseline on every island, at
the value one validation run of the baseline code measured, outside the step budget, as the port's
``_seed_population`` (``session.run_baseline``; ``baseline_seed=declared``: the task's declared value, no
run). That run competes for the final test, as the port tests its population's best program: the
baseline code, until a step beats it strictly. Each
generation samples a parent for every island at once (exploration / exploitation / fitness-weighted,
0.2/0.7/0.1), with inspirations and the island's top programs, then runs one step per island: a buggy
parent of debug depth < ``max_debug_depth`` is debugged with probability ``debug_prob`` (the port's
addition), otherwise the parent evolves by one targeted change. The child lives on its parent's island
and takes its MAP-Elites cell (code complexity x diversity) if the cell is empty or it is fitter.
Every ``migration_interval`` generations the islands send their best programs to their ring neighbours.

Each step: an editor call (the parent's metrics, the island's recent history with cells and outcomes,
its top performers and the inspirations, described by their analyses) and one validation run, then an
LLM analysis of the run (the port's; upstream has none), which also describes the program to later
prompts (``llm_analysis=false``: no analysis; the model's plan describes the program). The analysis
costs no step. A crash's error is the last 1,500 characters of its stderr (the analysis sees their first
500), as the port. An edit call that fails after its retries is a failed edit; an analysis call, the
port's "(analysis failed: ...)". An exception inside the evolution loop ends it, and the run goes on to
its final test on the best code so far, as the port's ``except Exception`` does (recorded in the run's
``caught_errors``; ``loop_error=crash``: the run ends as an error).

Where this differs from the port otherwise: when the baseline run and every step failed, the harness
tests the baseline code (the port runs no final test without a good program). Program ids are the step's (``s12``, ``seed0``) where the port's are random; the port draws its random
numbers from Python's unseeded generator, this from the run's seeded one, and it lists an island's
programs in set order where ties arise, this in insertion order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from pytest_fmlbench.agentkit import Agent, tail, task_context
from pytest_fmlbench.agentkit.editing import (
    DEFAULT_MAX_OUTPUT_TOKENS, PORT_LLM_SEED, CodeEditor, EditorOptions, complete_or, port_llm_limit, metric_line, port_value, restore, run_error,
)
from pytest_fmlbench.agentkit.loop import LoopErrorOptions, caught_in_loop
from pytest_fmlbench.agentkit.map_elites import Placement, Population, Program, Sample, Settings, join_code
from pytest_fmlbench.session import Session



class OpenEvolveOptions(EditorOptions, LoopErrorOptions):
    baseline_seed: Literal["measured", "declared"] = Field(
        "measured", description="the value the islands' baseline seeds start at: 'measured' = one validation "
        "run of the baseline code outside the step budget, which also competes for the final test (the port's); "
        "'declared' = the task's declared baseline validation value, no run (ours earlier)")
    num_islands: int = Field(3, ge=1, description="islands evolving apart (upstream: 5)")
    feature_bins: int = Field(5, ge=1, description="bins per MAP-Elites feature (upstream: 10)")
    archive_size: int = Field(30, ge=1, description="fittest programs kept in the elite archive (upstream: 100)")
    exploration_ratio: float = Field(0.2, ge=0, le=1, description="share of parents drawn at random from the island")
    exploitation_ratio: float = Field(0.7, ge=0, le=1, description="share of parents drawn from the archive")
    migration_interval: int = Field(10, ge=1, description="generations between migrations (upstream: 50)")
    migration_rate: float = Field(0.1, ge=0, le=1, description="share of an island's programs sent at a migration")
    num_top_programs: int = Field(3, ge=0, description="top programs of the island described in the prompt")
    num_inspirations: int = Field(3, ge=0, description="inspiration programs described in the prompt (upstream: 2)")
    elite_selection_ratio: float = Field(0.1, ge=0, le=1, description="share of inspirations taken from the elite")
    diversity_reference_size: int = Field(10, ge=1, description="programs diversity is measured against (upstream: 20)")
    debug_prob: float = Field(0.3, ge=0, le=1, description="chance of debugging a buggy parent (upstream: none)")
    max_debug_depth: int = Field(2, ge=0, description="a buggy parent is debugged while its debug depth is below this")
    llm_analysis: bool = Field(True, description="LLM analysis of each run, which describes the program (the port's)")
    feedback_temperature: float = Field(0.75, ge=0, le=2, description="temperature of the analysis calls")
    code_temperature: float | None = Field(
        None, ge=0, le=2, description="temperature of the editor calls (None: the provider's; upstream: 0.7)")
    max_output_tokens: int | None = Field(
        DEFAULT_MAX_OUTPUT_TOKENS, ge=16, description="reply length limit of the editor calls; none = no limit, as "
        "the port's editor (Anthropic: the model's maximum); analysis calls: at most 8192")

    @field_validator("exploitation_ratio")
    @classmethod
    def _ratios(cls, value: float, info: ValidationInfo) -> float:
        if value + info.data.get("exploration_ratio", 0.0) > 1 + 1e-9:
            raise ValueError("exploration_ratio + exploitation_ratio must be at most 1")
        return value


class OpenEvolveAgent(Agent):
    """OpenEvolve: MAP-Elites over code complexity x diversity on 3 islands, elite archive, ring migration."""

    name = "openevolve"
    Options = OpenEvolveOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("openevolve needs an LLM: session.llm is not set")
        _Evolution(session, self.options).run()


def _complexity(files: dict[str, str]) -> float:
    return float(sum(len(content) for content in files.values()))


class _Evolution:
    """One run. Its state is rebuilt by re-running it over the recorded steps and the replayed LLM ledger."""

    def __init__(self, session: Session, options: OpenEvolveOptions):
        self.s = session
        self.o = options
        settings = Settings(**{name: getattr(options, name) for name in Settings.__dataclass_fields__})
        self.pop = Population(settings, session.task.metric.direction, session.rng)
        self.editor = CodeEditor(session, temperature=options.code_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)

    def seed(self) -> dict:
        """Every island starts with the baseline program, at one value: measured (the port's) or declared."""
        files, task = self.s.baseline_files, self.s.task
        if self.o.baseline_seed == "measured":
            # the port's _seed_population: one validation run of the baseline, outside the step budget
            measured = self.s.run_baseline()
            metric = measured.metric if measured.success else None
            buggy = not measured.success or measured.metric is None
            source = "measured: the baseline code's validation run outside the step budget (step 0)"
        else:
            metric, buggy = task.baseline.val, False
            source = "declared: the task's baseline validation value (no run)"
        for island in range(self.o.num_islands):
            # the port's seed keeps no error output: a debug of it is told "(No error captured.)"
            self.pop.add(Program(id=f"seed{island}", code=join_code(files), island=island, metric=metric,
                                 buggy=buggy, description="baseline", complexity=_complexity(files),
                                 diversity=0.5))
        return {"programs": [f"seed{i}" for i in range(self.o.num_islands)], "metric": metric, "buggy": buggy,
                "source": source}

    def run(self) -> None:
        seeded = self.seed()
        # the port's `except Exception` around its evolution loop (not the seeding): on to the final test
        with caught_in_loop(self.s, self.o.loop_error, "openevolve evolution loop"):
            self.evolve(seeded)

    def evolve(self, seeded: dict | None) -> None:
        iteration = 0
        while self.s.steps_left > 0:
            # every island's parent is drawn before any child of this generation exists (parallel workers)
            plan = []
            for island in range(self.o.num_islands):
                sample = self.pop.sample(island)
                plan.append((island, sample, self.pop.top(self.o.num_top_programs, sample.parent.island), iteration))
                iteration += 1
            ran: list[int] = []
            last_step = None
            for island, sample, top, it in plan:
                if self.s.steps_left <= 0:
                    break
                parent = sample.parent
                debug = (parent.buggy and parent.debug_depth < self.o.max_debug_depth
                         and self.s.rng.random() < self.o.debug_prob)
                last_step = self.step(island, sample, top, it, debug, seeded)
                seeded = None
                ran.append(island)
            moves = self.pop.end_generation(ran)
            if moves is not None and last_step is not None:
                self.s.annotate(last_step, extra={"migration": {
                    "after_generation": max(self.pop.generations), "moves": moves}})

    def step(self, island: int, sample: Sample, top: list[Program], iteration: int, debug: bool,
             seeded: dict | None) -> int:
        s, parent = self.s, sample.parent
        restore(s, s.baseline_files if parent.step is None else s.files_of(parent.step))
        if debug:
            instruction = ("The previous code change caused an error. Fix it.\n\n## Instructions\nFix the bug "
                           "and keep the intended improvement. Change as little as needed to remove the error.")
            error = parent.error or "(no error output was captured)"
        else:
            instruction, error = self.evolve_instruction(parent, sample.inspirations, top), ""
        reply = self.editor.request(instruction, error_context=error, purpose="debug" if debug else "evolve")
        edit = self.editor.apply(reply)
        files = s.files
        extra = {
            "island": parent.island, "slot": island, "iteration": iteration, "generation": parent.generation + 1,
            "parent_program": parent.id, "parent_cell": list(self.pop.coords(parent)), "sampling": sample.strategy,
            "inspirations": [p.id for p in sample.inspirations], "top_programs": [p.id for p in top],
        }
        if seeded is not None:
            extra["seeds"] = seeded
        result = s.run_step("debug" if debug else "improve", parent=parent.step, plan=reply.plan[:4000],
                            edit=edit, extra=extra)
        child = Program(
            id=f"s{result.step}", code=join_code(files), island=parent.island, generation=parent.generation + 1,
            step=result.step, parent=parent.id, metric=result.metric if result.success else None,
            buggy=not result.success or result.metric is None, error=tail(run_error(s.journal.get(result.step))),
            complexity=_complexity(files), diversity=self.pop.diversity_of(join_code(files)),
            debug_depth=parent.debug_depth + 1 if debug else 0)
        if self.o.llm_analysis:
            child.analysis = self.analyse(child)
        if debug:
            child.description = f"Debug fix for {parent.id}"
        else:
            # the port describes a program by its analysis alone (without one, by nothing)
            child.description = (child.analysis if self.o.llm_analysis else reply.plan)[:150]
        placement = self.pop.add(child)
        s.annotate(result.step, analysis=child.analysis or None, extra=self.placement_record(child, placement))
        return result.step

    def placement_record(self, child: Program, placement: Placement) -> dict:
        return {
            "program": child.id, "cell": list(placement.cell), "cell_outcome": placement.outcome,
            "in_archive": placement.in_archive, "archive_evicted": list(placement.evicted),
            "archive_size": len(self.pop.archive), "island_best": self.pop.island_best[child.island],
            "best_program": self.pop.best, "diversity": round(child.diversity, 6), "complexity": child.complexity,
        }

    # -- prompts ------------------------------------------------------------------------------------------
    def analyse(self, child: Program) -> str:
        task = self.s.task
        value = port_value(child.metric)
        prompt = (f"Briefly analyse this ML experiment result.\n\n## Task\n{task_context(self.s, self.o)[:500]}\n\n"
                  f"## Execution result\nSuccess: {not child.buggy}\nPrimary metric ({task.metric.key}): {value}\n\n")
        if child.error:
            prompt += f"Error output:\n```\n{child.error[:500]}\n```\n\n"
        prompt += ("Give a concise summary (2-3 sentences): what was attempted, what came of it, and what to try "
                   "next.")
        text = complete_or(
            self.s, [{"role": "system", "content": "You analyse ML experiments. Be concise."},
                     {"role": "user", "content": prompt}], lambda exc: f"(analysis failed: {exc})",
            temperature=self.o.feedback_temperature,
            max_output_tokens=port_llm_limit(self.o.max_output_tokens), seed=PORT_LLM_SEED, purpose="analysis")
        return text.strip()[:300]

    def _value(self, program: Program) -> str:
        return port_value(program.metric)

    def history(self, island: int) -> str:
        programs = self.pop.island_programs(island)
        programs.sort(key=lambda p: p.step if p.step is not None and not p.migrated else 0, reverse=True)
        key = self.s.task.metric.key
        lines = []
        for p in programs[:8]:
            c, d = self.pop.coords(p)
            line = (f"- [{'failed' if p.buggy else 'success'}] {p.description[:100]} | {key}={self._value(p)} "
                    f"features=({c}_{d})")
            origin = self.pop.programs.get(p.parent) if p.parent else None
            if origin is not None and origin.metric is not None and p.metric is not None:
                delta = p.metric - origin.metric
                delta = -delta if self.s.task.metric.direction == "lower" else delta
                line += (f" improved(+{abs(delta):.6f})" if delta > 0 else
                         f" declined(-{abs(delta):.6f})" if delta < 0 else " stable")
            lines.append(line)
        return "\n".join(lines)

    def evolve_instruction(self, parent: Program, inspirations: list[Program], top: list[Program]) -> str:
        task = self.s.task
        key = task.metric.key
        parts = [
            f"## Current solution performance\n{metric_line(self.s, parent.metric, 'Current solution')}\n"
            f"- Generation: {parent.generation}, island: {parent.island}",
            f"## Baseline results\n{metric_line(self.s, task.baseline.val, 'Baseline')}",
        ]
        areas = []
        if parent.metric is not None and top and top[0].metric is not None and top[0].metric != parent.metric:
            areas.append(f"- Gap to the best of this island: {abs(top[0].metric - parent.metric):.6f}")
        if parent.analysis:
            areas.append(f"- Last analysis: {parent.analysis[:200]}")
        if areas:
            parts.append("## Areas for improvement\n" + "\n".join(areas))
        history = self.history(parent.island)
        if history:
            parts.append("## Evolution history (recent attempts)\n" + history)
        if top:
            parts.append(f"## Top performers (island {parent.island})\n" + "\n".join(
                f"{i}. [{key}: {self._value(p)}] {p.description[:100]}" for i, p in enumerate(top, 1)))
        if inspirations:
            parts.append("## Inspiration programs (diverse approaches)\n" + "\n".join(
                f"{i}. [{key}: {self._value(p)}, generation: {p.generation}] {p.description[:100]}"
                for i, p in enumerate(inspirations, 1)))
        parts.append(
            f"## Instructions\nImprove the code for a better {key} ({task.metric.direction} is better).\n"
            "- Make one targeted change.\n- Do not repeat approaches from the evolution history.\n"
            "- Use what the top performers and inspirations suggest.\n- Keep the change small and about one idea.")
        return "\n\n".join(parts)
