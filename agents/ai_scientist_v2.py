"""The AI Scientist v2: best-first tree search in four stages, after SakanaAI's AI-Scientist-v2 as
FML-bench ports it.

Stages: initial implementation, baseline tuning, creative research, ablation studies (the port names them
basic_implementation, hyperparameter_tuning, creative_research, ablation_refinement), with
``stage_budgets`` shares of ``--steps`` (10/20/50/20%; rounded down, the remainder to the last stage; a
stage with none is skipped). Each stage keeps its own tree ("intentional forgetting").

As the port (``stage_seed=port``): stage 1 drafts ``num_drafts`` roots from the baseline; stages 2 and 4
improve the node the stage before handed on, at every step (the port's rule); stage 3, and stage 2 or 4
when nothing was handed on, opens with one draft from the baseline. Stages 1 and 3 select batches of
``num_workers`` nodes at once, as upstream's parallel workers do (drafts first; with ``debug_prob`` a
buggy leaf of debug depth <= ``max_debug_depth`` from a tree not yet in the batch; otherwise the best
good node, one per tree while untouched trees remain; a slot with no good node in the stage's tree
drafts). A stage hands on the best node of its own tree, or what it was handed when its tree has none:
it may be worse than an earlier stage's best (the final test still takes the best of the whole run).
``stage_seed=previous_best`` (this project's earlier variant): each stage's tree is rooted at the best
node found so far, carried over without being run again; stage 3 improves it too and drafts only while
no stage has a working node, so what a stage hands on never gets worse.

Each step: an editor call (instruction with the stage's guidance, the LLM-written memory of the stage's
successes and failures, the parent's results and analysis, or the bug analysis and error tail for a
debug), one validation run, then an LLM analysis of the run. A node's plan, as the memory ("Design: ...")
and the analysis see it, is the first 500 characters of its instruction, as the port (``node_plan=model``:
the plan the model wrote before its code); the step's record keeps the model's plan either way.
Sub-stages (the port's rule: after max(3, nodes // 2) steps, or when the last three good nodes share a
metric) get LLM-written goals. Analysis, memory and sub-stage calls cost no step. A crash's error is the
last 1,500 characters of its stderr; a debug shows it in the instruction and as the editor's error
context, as the port does. An LLM call that fails after its retries becomes what the port makes of it: a
failed edit (the step still runs), "Analysis failed: ...", a memory listing the stage's last successes
and failures without an LLM, or the port's stock sub-stage goal. An exception inside the stage loop ends
it, and the run goes on to its final test, as the port's ``except Exception`` does (recorded in the run's
``caught_errors``; ``loop_error=crash``: the run ends as an error).

Where this differs from the port otherwise: prompts are in our words (same sections, same order); the
port draws its random numbers from Python's unseeded generator, this from the run's seeded one; ideas
(``generate_ideas``) are off, as the port has them without a seed-ideas file, which no task has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator

from pytest_fmlbench.agentkit import Agent, tail, task_context
from pytest_fmlbench.agentkit.editing import (
    DEFAULT_MAX_OUTPUT_TOKENS, PORT_LLM_SEED, CodeEditor, EditorOptions, complete_or, port_llm_limit, metric_line, port_value, restore, run_error,
)
from pytest_fmlbench.agentkit.loop import LoopErrorOptions, caught_in_loop
from pytest_fmlbench.agentkit.port_task_text import port_prompt
from pytest_fmlbench.agentkit.scientist_ideas import Idea, IdeaGenerator, idea_system_prompt
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.session import Session

# the port's sub-stage goal when its call fails (ai_scientist_v2/agent.py 620-622)
FALLBACK_GOALS = "Continue improving based on current progress."


@dataclass(frozen=True)
class Stage:
    name: str
    goals: str


STAGES = (
    Stage("initial_implementation",
          "Get a basic working implementation first. Keep the changes simple and incremental and check that "
          "the code is correct before trying anything sophisticated."),
    Stage("baseline_tuning",
          "Tune hyper-parameters (learning rate, batch size, number of epochs, regularisation, ...) to improve "
          "performance. Do NOT change the core algorithm of the previous stage."),
    Stage("creative_research",
          "Explore novel, creative improvements: architectural changes, new techniques, unconventional "
          "approaches. Think outside the box."),
    Stage("ablation_studies",
          "Test the components of the best solution systematically: find out which changes contribute most, "
          "and refine the solution by removing complexity that does not pay for itself."),
)
FORCED_IMPROVE_STAGES = (1, 3)  # 0-based: baseline tuning and ablation improve the carried-over best


class AIScientistV2Options(EditorOptions, LoopErrorOptions):
    stage_budgets: tuple[float, float, float, float] = Field(
        (0.10, 0.20, 0.50, 0.20),
        description="shares of --steps for the four stages, comma-separated (upstream: 20/12/12/18 nodes)")
    num_workers: int = Field(4, ge=1, description="nodes selected together per batch, upstream's parallel workers "
                             "(the port's num_parallel)")
    num_drafts: int = Field(3, ge=1, description="root drafts of stage 1 (the port's num_ideas; with generate_ideas, "
                            "as many as ideas came out)")
    debug_prob: float = Field(0.5, ge=0, le=1, description="chance of debugging a buggy leaf at each batch slot")
    max_debug_depth: int = Field(3, ge=0, description="a buggy leaf is debugged while its debug depth is at most this")
    max_stderr_output: int = Field(1500, ge=1, description="characters of a failed run's stderr (its tail) a node "
                                   "keeps as its error: shown to a debug, the analysis and the memory")
    generate_ideas: bool = Field(
        False, description="bind an AI-Scientist idea to each stage-1 draft (the port needs a seed-ideas file no "
        "task has)")
    num_reflections: int = Field(3, ge=1, description="reflection rounds per idea when generate_ideas is on")
    memory: bool = Field(True, description="LLM-written memory of the stage's successes and failures in prompts")
    stage_seed: Literal["port", "previous_best"] = Field(
        "port", description="how a stage starts: 'port' = stage 3 drafts from the baseline and each stage hands "
        "on the best of its own nodes (it may be worse than an earlier stage's), as the port; 'previous_best' = "
        "every stage's tree is rooted at the best node found so far, which stage 3 improves too")
    node_plan: Literal["port", "model"] = Field(
        "port", description="a node's plan, as the memory and the analysis see it: 'port' = the first 500 "
        "characters of its instruction, as the port; 'model' = the plan the model wrote before its code")
    feedback_temperature: float = Field(
        0.75, ge=0, le=2, description="temperature of analysis, memory and sub-stage calls (upstream: 0.5)")
    code_temperature: float | None = Field(
        None, ge=0, le=2, description="temperature of the editor calls (None: the provider's; upstream: 1.0)")
    max_output_tokens: int | None = Field(
        DEFAULT_MAX_OUTPUT_TOKENS, ge=16, description="reply length limit of the editor calls; none = no limit, as "
        "the port's editor (Anthropic: the model's maximum); analysis, memory, sub-stage and idea calls: at most 8192")

    @field_validator("stage_budgets", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        if isinstance(value, str):
            return tuple(part.strip() for part in value.strip("()[] ").split(","))
        return value

    @field_validator("stage_budgets")
    @classmethod
    def _shares(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(v < 0 for v in value) or sum(value) > 1 + 1e-9 or sum(value) <= 0:
            raise ValueError("four non-negative shares summing to at most 1, e.g. 0.1,0.2,0.5,0.2")
        return value


def stage_budgets(steps: int, shares: tuple[float, ...]) -> list[int]:
    """Steps per stage: each share rounded down, the remainder to the last stage (as the port)."""
    budgets = [int(steps * share) for share in shares]
    budgets[-1] += steps - sum(budgets)
    return budgets


@dataclass(eq=False)
class Node:
    """A node of one stage's tree. A carried-over seed refers to the step that ran its code."""

    key: int  # position in the stage's tree
    step: int
    action: str
    plan: str
    buggy: bool
    metric: float | None
    error: str = ""
    analysis: str = ""
    idea: Idea | None = None
    parent: Node | None = None
    seed: bool = False
    children: list[Node] = field(default_factory=list)

    @property
    def debug_depth(self) -> int:
        depth, node = 0, self
        while node.parent is not None and node.parent.buggy:
            depth, node = depth + 1, node.parent
        return depth

    @property
    def root(self) -> Node:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def leaves(self) -> list[Node]:
        out, stack = [], [self]
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children)
            else:
                out.append(node)
        return out


class AIScientistV2Agent(Agent):
    """The AI Scientist v2: best-first tree search in 4 stages (10/20/50/20% of the steps), LLM-written memory."""

    name = "ai-scientist-v2"
    Options = AIScientistV2Options
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("ai-scientist-v2 needs an LLM: session.llm is not set")
        _TreeSearch(session, self.options).run()


class _TreeSearch:
    """One run. Its state is rebuilt by re-running it over the recorded steps and the replayed LLM ledger."""

    def __init__(self, session: Session, options: AIScientistV2Options):
        self.s = session
        self.o = options
        self.budgets = stage_budgets(session.steps_total, options.stage_budgets)
        self.editor = CodeEditor(session, temperature=options.code_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)
        self.feedback_tokens = port_llm_limit(options.max_output_tokens)
        self.ideas: list[Idea] = []
        self.drafts_bound = 0
        self.nodes: list[Node] = []  # the current stage's tree
        self.stage = 0
        self.goals = ""
        self.substage = 1
        self.substage_start = 0
        self.stage_start = 0
        self.batch = 0
        self._memory_for = -1
        self._memory = ""
        self.handover: dict | None = None  # why the current stage began, for its first step's record
        self._substage_reason: str | None = None

    # -- the four stages ----------------------------------------------------------------------------
    def run(self) -> None:
        if self.o.generate_ideas:
            original = port_prompt(self.s.task, self.o.port_task_text)
            persona = original.system if original is not None else idea_system_prompt(self.s.task.domain)
            generator = IdeaGenerator(
                self.s, system=persona, num_reflections=self.o.num_reflections, temperature=0.75,
                max_output_tokens=self.feedback_tokens, max_attempts=2 * self.o.num_drafts, options=self.o)
            self.ideas = generator.generate(self.o.num_drafts)
        # the port's `except Exception` around its stage loop: the run goes on to the final test
        with caught_in_loop(self.s, self.o.loop_error, "ai-scientist-v2 stage loop"):
            self.stages()

    def stages(self) -> None:
        seeded = self.o.stage_seed == "previous_best"
        previous_best: Node | None = None
        skipped: list[str] = []
        for index, stage in enumerate(STAGES):
            if self.s.steps_left <= 0:
                return
            budget = self.budgets[index]
            if budget <= 0:
                skipped.append(stage.name)
                continue
            self.begin_stage(index, previous_best, skipped)
            skipped = []
            forced = index in FORCED_IMPROVE_STAGES and previous_best is not None
            if index == 0:
                # the port drafts one root per generated idea, num_ideas when none came out (agent.py 439)
                drafts = len(self.ideas) or self.o.num_drafts
            elif seeded:
                drafts = 0 if previous_best is not None else 1
            else:
                drafts = 1  # the port: one draft from the baseline opens stages 2-4 that are not forced
            while self.used_in_stage < budget and self.s.steps_left > 0:
                self.maybe_next_substage()
                if forced:
                    # the port improves the node the last stage handed on, outside this stage's tree
                    self.improve(self.nodes[0] if seeded else previous_best, slot=None)
                    continue
                batch = self.select_batch(min(self.o.num_workers, budget - self.used_in_stage,
                                              self.s.steps_left), drafts)
                self.batch += 1
                plan = [[action, node.step if node else None] for action, node in batch]
                for position, (action, node) in enumerate(batch):
                    if self.used_in_stage >= budget or self.s.steps_left <= 0:
                        break
                    slot = {"number": self.batch, "position": position + 1, "selected": plan}
                    if action == "draft":
                        self.draft(slot)
                    elif action == "debug":
                        self.debug(node, slot)
                    else:
                        self.improve(node, slot)
            # the best of this stage's tree (with 'previous_best', which holds the carried-over node, it
            # is never worse than before; in the port's way it may be), or the one handed on before
            previous_best = self.best() or previous_best

    @property
    def used_in_stage(self) -> int:
        return self.s.steps_used - self.stage_start

    def begin_stage(self, index: int, previous_best: Node | None, skipped: list[str]) -> None:
        stage = STAGES[index]
        self.stage, self.stage_start = index, self.s.steps_used
        self.goals, self.substage, self.substage_start = stage.goals, 1, self.s.steps_used
        self.nodes, self._memory_for, self.batch = [], -1, 0
        seeded = self.o.stage_seed == "previous_best"
        if previous_best is not None and seeded:
            seed = Node(key=0, step=previous_best.step, action="seed", plan=previous_best.plan, buggy=False,
                        metric=previous_best.metric, analysis=previous_best.analysis, idea=previous_best.idea,
                        seed=True)
            self.nodes.append(seed)
        before = STAGES[index - 1].name if index else None
        reason = (f"stage '{before}' spent its {self.budgets[index - 1]}-step budget" if before and not skipped
                  else None)
        if skipped:
            reason = "stage(s) " + ", ".join(f"'{n}'" for n in skipped) + " had a 0-step budget"
        if previous_best is None:
            start = "the baseline (no working node yet)"
        else:
            start = f"step {previous_best.step} ({self.s.task.metric.key} {previous_best.metric:.6g})"
            if not seeded and index not in FORCED_IMPROVE_STAGES:
                start = f"drafts from the baseline (the port's stage {index + 1}; handed on: {start})"
        self.handover = {"from": before, "to": stage.name, "reason": reason or "start of the search",
                         "start_from": start}

    def best(self) -> Node | None:
        best = None
        for node in self.nodes:
            if not node.buggy and node.metric is not None and (
                    best is None or self.s.journal.better(node.metric, best.metric)):
                best = node
        return best

    def ran(self) -> list[Node]:
        return [n for n in self.nodes if not n.seed]

    # -- batch selection (upstream's parallel node selection, run serially) ----------------------------
    def select_batch(self, size: int, num_drafts: int) -> list[tuple[str, Node | None]]:
        batch: list[tuple[str, Node | None]] = []
        trees: set[int] = set()
        pending_drafts = 0
        roots = [n for n in self.nodes if n.parent is None]
        while len(batch) < size:
            if len(roots) + pending_drafts < num_drafts:
                batch.append(("draft", None))
                pending_drafts += 1
                continue
            viable = [r for r in roots if not all(leaf.buggy for leaf in r.leaves())]
            if self.s.rng.random() < self.o.debug_prob:
                debuggable = [n for n in self.nodes if n.buggy and not n.children
                              and n.debug_depth <= self.o.max_debug_depth and n.root.key not in trees]
                if debuggable:
                    node = self.s.rng.choice(debuggable)
                    trees.add(node.root.key)
                    batch.append(("debug", node))
                    continue
            good = [n for n in self.nodes if not n.buggy and n.metric is not None]
            if not good:
                batch.append(("draft", None))
                pending_drafts += 1
                continue
            ranked = sorted(good, key=lambda n: n.metric, reverse=self.s.task.metric.direction == "higher")
            chosen = next((n for n in ranked if n.root.key not in trees or len(trees) >= len(viable)), None)
            if chosen is None:
                batch.append(("draft", None))
                pending_drafts += 1
                continue
            trees.add(chosen.root.key)
            batch.append(("improve", chosen))
        return batch

    # -- sub-stages ---------------------------------------------------------------------------------
    def maybe_next_substage(self) -> None:
        in_substage = self.s.steps_used - self.substage_start
        if in_substage <= 0:
            return
        ran = self.ran()
        good = [n for n in ran if not n.buggy]
        if in_substage >= max(3, len(ran) // 2):
            reason = "sub-stage step limit reached"
        elif len(good) >= 3 and len({n.metric for n in good[-3:]}) == 1:
            reason = "metric converged over the last 3 good nodes"
        else:
            return
        best = self.best()
        stage = STAGES[self.stage]
        prompt = (
            "From the progress of the experiments so far, write focused goals for the next sub-stage of the "
            f"research.\n\nMain stage goals:\n{stage.goals}\n\nProgress so far:\n"
            f"- Successful experiments: {len(good)}\n- Failed experiments: {len(ran) - len(good)}\n"
            f"- Best {self.s.task.metric.key}: {port_value(best.metric if best else None, 'N/A')} "
            f"({self.s.task.metric.direction} is better)\n\n"
            "Write specific, actionable goals (3-5 sentences) that:\n1. address the current problems and "
            "limitations\n2. build on the recent progress\n3. move towards the main stage goals"
        )
        text = self._ask("You are an AI research advisor.", prompt, "substage_goals", lambda exc: FALLBACK_GOALS)
        self.substage += 1
        self.substage_start = self.s.steps_used
        self.goals = f"{stage.goals}\n\nSub-stage {self.substage} focus:\n{text.strip()[:500]}"
        self._substage_reason = reason

    # -- the three operations -------------------------------------------------------------------------
    def draft(self, slot: dict) -> None:
        restore(self.s, self.s.baseline_files)
        idea = None
        if self.drafts_bound < len(self.ideas):
            idea = self.ideas[self.drafts_bound]
            self.drafts_bound += 1
        instruction = self.draft_instruction(self.memory(), idea)
        self.execute("draft", None, instruction, None, slot, idea)

    def improve(self, parent: Node, slot: dict | None) -> None:
        restore(self.s, self.s.files_of(parent.step))
        idea = parent.root.idea
        instruction = self.improve_instruction(parent, self.memory(), idea)
        self.execute("improve", parent, instruction, None, slot, idea)

    def debug(self, parent: Node, slot: dict) -> None:
        restore(self.s, self.s.files_of(parent.step))
        instruction = self.debug_instruction(parent)
        self.execute("debug", parent, instruction, parent.error or None, slot, parent.root.idea)

    def execute(self, action: str, parent: Node | None, instruction: str, error: str | None, slot: dict | None,
                idea: Idea | None) -> None:
        s = self.s
        reply = self.editor.request(instruction, error_context=error or "", purpose=action)
        edit = self.editor.apply(reply)
        stage = STAGES[self.stage]
        extra = {
            "stage": {"number": self.stage + 1, "name": stage.name, "budget": self.budgets[self.stage],
                      "step_in_stage": self.used_in_stage + 1, "budgets": self.budgets},
            "substage": {"number": self.substage, "goals": self.goals},
            "batch": slot,
            "debug_depth": (parent.debug_depth + 1) if action == "debug" and parent else 0,
        }
        if self.handover is not None:
            extra["handover"], self.handover = self.handover, None
        if self._substage_reason:
            extra["substage"]["reason"], self._substage_reason = self._substage_reason, None
        if idea is not None:
            extra["idea"] = idea.summary()
        written = reply.plan or instruction[:500]
        # the port's node keeps the first 500 characters of its instruction as its plan
        plan = written if self.o.node_plan == "model" else instruction[:500]
        result = s.run_step(action, parent=parent.step if parent else None, plan=written[:4000], edit=edit,
                            idea=f"{idea.name}: {idea.title}" if idea else None, extra=extra)
        node = Node(key=len(self.nodes), step=result.step, action=action, plan=plan, buggy=not result.success,
                    metric=result.metric if result.success else None,
                    error=tail(run_error(s.journal.get(result.step)), self.o.max_stderr_output), idea=idea,
                    parent=parent)
        if parent is not None:
            parent.children.append(node)
        self.nodes.append(node)
        node.analysis = self.analyse(node)
        best = self.best()
        s.annotate(result.step, analysis=node.analysis,
                   extra={"buggy": node.buggy, "stage_best_step": best.step if best else None})

    # -- LLM calls that cost no step ------------------------------------------------------------------
    def _ask(self, system: str, prompt: str, purpose: str, fallback) -> str:
        return complete_or(self.s, [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                           fallback, temperature=self.o.feedback_temperature,
                           max_output_tokens=self.feedback_tokens, seed=PORT_LLM_SEED, purpose=purpose)

    def analyse(self, node: Node) -> str:
        task = self.s.task
        value = port_value(node.metric)
        prompt = (
            "You wrote code for a research experiment and it was run; now judge the output of that run. "
            "Analyse it, decide whether there were bugs, and summarise the findings.\n\n"
            f"## Task\n{task_context(self.s, self.o)}\n\n## Plan\n{node.plan[:500]}\n\n"
            f"## Execution result\nSuccess: {not node.buggy}\nPrimary metric ({task.metric.key}): {value}\n"
        )
        if node.error:
            prompt += f"Error output:\n```\n{node.error}\n```\n\n"
        prompt += ("If there is a bug, summarise it and propose a fix. Otherwise summarise the findings in 2-3 "
                   "sentences.")
        messages = [{"role": "system", "content": "You are an experienced AI researcher judging experiment results."},
                    {"role": "user", "content": prompt}]
        try:
            text = self.s.llm.complete(messages, temperature=self.o.feedback_temperature,
                                       max_output_tokens=self.feedback_tokens, seed=PORT_LLM_SEED,
                                       purpose="analysis").text
        except LLMCallError as exc:  # the port keeps the failure itself as the analysis, uncut (925-926)
            return f"Analysis failed: {exc}"
        return text.strip()[:500]

    def memory(self) -> str:
        """The LLM-written summary of this stage's experiments, re-written only when a node was added."""
        if not self.o.memory:
            return ""
        ran = self.ran()
        if len(ran) == self._memory_for:
            return self._memory
        self._memory_for = len(ran)
        if not ran:
            self._memory = ""
            return ""
        key = self.s.task.metric.key
        parts = []
        good = [n for n in ran if not n.buggy]
        if good:
            parts.append("## Successful experiments")
            parts += [f"\n### Experiment {i}\nDesign: {n.plan[:300]}\nResults: {n.analysis}\n"
                      f"{key}: {port_value(n.metric)}" for i, n in enumerate(good, 1)]
        failed = [n for n in ran if n.buggy][:10]
        if failed:
            parts.append("\n## Failed experiments")
            parts += [f"\n### Failed experiment {i}\nDesign: {n.plan[:200]}\n"
                      f"Error: {n.error[:200] or 'unknown error'}\nDebug depth: {n.debug_depth}"
                      for i, n in enumerate(failed, 1)]
        prompt = (
            "You summarise the progress of a line of experiments. Analyse both the successful and the failed "
            "experiments to give insight for the next ones.\n\n" + "\n".join(parts) + "\n\n"
            "Give a thorough summary covering:\n1. patterns shared by the working experiments\n2. common "
            "failures and pitfalls to avoid\n3. concrete recommendations for the next experiments, drawn from "
            "both\n\nKeep it concise (10-15 sentences)."
        )
        messages = [{"role": "system", "content": "You are an experienced AI researcher summarising experimental "
                     "progress."}, {"role": "user", "content": prompt}]
        try:  # the port cuts the model's summary to 1,500 characters but keeps its own fallback whole (248-256)
            self._memory = self.s.llm.complete(messages, temperature=self.o.feedback_temperature,
                                               max_output_tokens=self.feedback_tokens, seed=PORT_LLM_SEED,
                                               purpose="memory").text
            self._memory = self._memory.strip()[:1500]
        except LLMCallError:
            self._memory = self.plain_memory(good, ran)
        return self._memory

    def plain_memory(self, good: list[Node], ran: list[Node]) -> str:
        """The port's memory when its LLM call fails: the last 5 successes and the last 3 failures."""
        key = self.s.task.metric.key
        lines = [f"- [success] {n.plan[:150]} | {key}={port_value(n.metric)}" for n in good[-5:]]
        lines += [f"- [failed] {n.plan[:150]}" for n in [n for n in ran if n.buggy][-3:]]
        return "\n".join(lines) or "(No experiments yet.)"

    # -- instructions -------------------------------------------------------------------------------------
    def _common(self, idea: Idea | None, memory: str) -> list[str]:
        parts = []
        if idea is not None:
            parts.append(f"## Research idea\nTitle: {idea.title}\nExperiment plan: {idea.experiment}")
        if memory:
            parts.append(f"## Memory\n{memory}")
        return parts

    def draft_instruction(self, memory: str, idea: Idea | None) -> str:
        task = self.s.task
        parts = [
            "## Introduction\nYou are an AI researcher aiming to publish work that moves the field forward. "
            "Implement a solid baseline of the research idea below, from data preparation through training to "
            "evaluation. Get a simple, working implementation first, before any sophisticated improvement: "
            "later stages explore more advanced variations.",
            *self._common(idea, memory),
            f"## Baseline results\n{metric_line(self.s, task.baseline.val, 'Baseline')}",
            "## Experiment design sketch guideline\n- This first design should stay fairly simple, without "
            "extensive hyper-parameter optimisation.\n- Take the Memory section into account.\n- The solution "
            "sketch should be 6-10 sentences.\n- Do not suggest exploratory data analysis.\n- Make sure to create "
            "synthetic data if needed.",
            f"## Stage guidance\n{self.goals}",
        ]
        return "\n\n".join(parts)

    def improve_instruction(self, parent: Node, memory: str, idea: Idea | None) -> str:
        task = self.s.task
        parts = [
            "## Introduction\nYou are an experienced AI researcher. You get an implementation developed earlier; "
            "improve it according to the current experimental stage.",
            *self._common(idea, memory),
            f"## Previous results\n{metric_line(self.s, parent.metric, 'Previous result')}\n"
            f"Analysis: {parent.analysis}",
            f"## Baseline for comparison\n{metric_line(self.s, task.baseline.val, 'Baseline')}",
            f"## Stage guidance\n{self.goals}",
        ]
        return "\n\n".join(parts)

    def debug_instruction(self, parent: Node) -> str:
        parts = [
            "## Introduction\nYou are an experienced AI researcher. Your previous code for this experiment had a "
            "bug; using the information below, revise it to fix the bug.",
        ]
        idea = parent.root.idea
        if idea is not None:
            parts.append(f"## Research idea\nTitle: {idea.title}\nExperiment plan: {idea.experiment}")
        if parent.analysis:
            parts.append(f"## Bug analysis\n{parent.analysis}")
        if parent.error:
            parts.append(f"## Error output\n```\n{parent.error}\n```")
        depth = parent.debug_depth
        if depth > 0:
            parts.append(f"## Debug depth\nThis is debug attempt #{depth}: the earlier attempts did not fix it.")
        parts.append("## Bug-fix sketch guideline\n- Write a short description (3-5 sentences) of how to fix "
                     "the problem of the previous implementation.\n- Do not suggest exploratory "
                     "data analysis.")
        parts.append(f"## Stage guidance\n{self.goals}")
        return "\n\n".join(parts)
