"""AIRA (MCTS): Monte Carlo tree search over solutions, after aira-dojo's MCTS solver as FML-bench ports it.

Policy, as the port (and aira-dojo) runs it:

- **Select**: from the root (the baseline, never run as a step), descend to a leaf, at each level taking
  the child of highest UCT = normalised mean value + ``uct_c`` * sqrt(ln N_parent / n_child). Mean values
  are normalised by the lowest and highest value backed up so far (0.5 while they are equal). A child
  never visited - a buggy child whose debug chain was never fixed - scores -1e8, so it is taken only when
  all its siblings are unvisited too (reference.md's "unvisited children first" misreads the code).
- **Expand**: ``num_children`` children of the leaf, one step each: drafts at the root, improvements of
  the leaf's code elsewhere (also of a buggy leaf, as upstream). A run that fails or yields no metric is
  buggy and enters a debug chain of at most ``max_debug_depth`` debug steps, which stops at the first fix.
- **Back up**: a good child's metric is added to every node on root..child (visit + 1, value + metric);
  a fixed debug chain backs up the fix's metric along root..leaf + buggy child + the debug nodes; a
  chain never fixed backs up nothing.
- After each run, one LLM analysis (2-3 sentences) is stored with the node; it costs no step. Prompts
  hold the memory of up to 10 good nodes (best first: node number, action, plan, analysis, metric), the
  parent's analysis when improving, and when debugging the analysis, the error (as the port: the editor
  gets the failed run's whole stderr, the instruction its first 1,500 characters) and the chain of
  earlier debug attempts (plan, and the first 100 characters of each one's error). The analysis sees the
  first 300.
- A node's plan, wherever the prompts show it, is the port's label: "Draft #n" (its rank among the
  root's drafts), "Improve from node n", "Debug fix for node n", the port numbering its nodes in creation
  order from the root's 1, so step n is node n + 1 (``node_plan=model``: the plan the model wrote before
  its code, nodes numbered by step). The step's record keeps the model's plan either way.

Buggy means the run failed or gave no metric, as in the port: an edit that does not apply leaves the
parent's code, which still runs and costs its step; its error is the run's, as the port records it. An
LLM call that fails after its retries is an edit that does not apply, or the port's "(analysis failed:
...)". An exception in the search ends the run as an error: the port catches none. The port's
direction handling (a lower-is-better mean negated, but normalised by raw bounds) differs from this
one's (bounds taken over the negated values too) by a constant per selection, so the same child is
chosen; the recorded scores here lie in [0, 1] + exploration.

Defaults are the FML-bench port's: ``uct_c=1.41``, ``num_children=2``, ``max_debug_depth=3``. The AIRA
paper's MLE-bench configuration uses 0.25, 5 and 20.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from pytest_fmlbench.agentkit import (
    Agent, CodeEditor, EditorOptions, EditReply, metric_line, restore, run_error, task_context,
)
from pytest_fmlbench.agentkit.editing import PORT_LLM_SEED, port_llm_limit, port_value
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.session import Session

UNVISITED = -1e8
MEMORY_SIZE = 10
ERROR_SHOWN_CHARS = 1500  # the port's max_stderr_output: how much of the error a debug instruction shows


class AiraMctsOptions(EditorOptions):
    uct_c: float = Field(1.41, ge=0, description="UCT exploration constant (AIRA paper: 0.25)")
    num_children: int = Field(2, ge=1, description="children expanded per selected leaf (AIRA paper: 5)")
    max_debug_depth: int = Field(3, ge=0, description="debug steps at most per buggy child (AIRA paper: 20)")
    edit_temperature: float | None = Field(None, ge=0, le=2,
                                           description="sampling temperature of the edit calls; none = the "
                                           "provider's default, as the port (aira-dojo: 0.6)")
    analysis_temperature: float | None = Field(0.75, ge=0, le=2,
                                               description="temperature of the analysis calls, the port's "
                                               "default (aira-dojo: 0.5); none = the provider's")
    max_output_tokens: int | None = Field(None, ge=16, description="reply length limit of the editor calls; "
                                          "none = no limit, as the port's editor (Anthropic: the model's maximum); "
                                          "the analysis calls ask for at most 8192, as the port's llm.py")
    node_plan: Literal["port", "model"] = Field(
        "port", description="a node's plan in the memory, the analysis and the debug chain: 'port' = the port's "
        "label ('Draft #n', 'Improve from node n', 'Debug fix for node n'; its nodes numbered step + 1, the root "
        "1); 'model' = the plan the model wrote before its code (the label when it wrote none), nodes numbered "
        "by step")


@dataclass
class Node:
    step: int  # 0 = the root (the baseline code)
    action: str
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    visits: int = 0
    value: float = 0.0  # sum of the raw metrics backed up through this node
    metric: float | None = None
    buggy: bool = True
    plan: str = ""
    analysis: str = ""
    error: str = ""

    @property
    def debug_depth(self) -> int:
        """Consecutive debug nodes ending here, this one included."""
        depth, node = 0, self
        while node is not None and node.action == "debug":
            depth, node = depth + 1, node.parent
        return depth


class Tree:
    """The search statistics: UCT selection and backup, in the metric's better-is-higher orientation."""

    def __init__(self, direction: str, uct_c: float):
        self.sign = 1.0 if direction == "higher" else -1.0
        self.uct_c = uct_c
        self.root = Node(step=0, action="root")
        self.nodes: dict[int, Node] = {0: self.root}
        self.q_min = math.inf
        self.q_max = -math.inf

    def add(self, node: Node) -> None:
        self.nodes[node.step] = node
        node.parent.children.append(node)

    def q(self, node: Node) -> float:
        return self.sign * node.value / node.visits

    def normalised(self, q: float) -> float:
        if self.q_max == self.q_min:
            return 0.5
        return (q - self.q_min) / (self.q_max - self.q_min)

    def uct(self, child: Node, parent: Node) -> float:
        if child.visits == 0:
            return UNVISITED
        return self.normalised(self.q(child)) + self.uct_c * math.sqrt(math.log(parent.visits) / child.visits)

    def select(self) -> tuple[list[Node], list[dict]]:
        """The path root..leaf, and at each level the candidates with their scores."""
        path, levels, node = [self.root], [], self.root
        while node.children:
            parent = node
            scored = [(self.uct(c, parent), c) for c in parent.children]
            levels.append({"parent": parent.step, "visits": parent.visits, "candidates": [
                {"node": c.step, "visits": c.visits, "value": c.value,
                 "q_norm": None if c.visits == 0 else self.normalised(self.q(c)),
                 "uct": None if score == UNVISITED else score} for score, c in scored]})
            node = max(scored, key=lambda sc: sc[0])[1]  # the first of equal scores, as max() does upstream
            levels[-1]["chosen"] = node.step
            path.append(node)
        return path, levels

    def backup(self, path: list[Node], metric: float) -> None:
        for node in path:
            node.visits += 1
            node.value += metric
        self.q_min = min(self.q_min, self.sign * metric)
        self.q_max = max(self.q_max, self.sign * metric)

    def snapshot(self) -> dict:
        return {
            "q_min": None if math.isinf(self.q_min) else self.q_min,
            "q_max": None if math.isinf(self.q_max) else self.q_max,
            "nodes": [{"node": n.step, "parent": None if n.parent is None else n.parent.step, "action": n.action,
                       "visits": n.visits, "value": n.value, "metric": n.metric, "buggy": n.buggy}
                      for n in sorted(self.nodes.values(), key=lambda n: n.step)],
        }


class AiraMctsAgent(Agent):
    """Monte Carlo tree search (UCT select, expand k children, debug chains, back up), after AIRA-dojo."""

    name = "aira-mcts"
    Options = AiraMctsOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("aira-mcts needs an LLM: session.llm is not set")
        _Search(session, self.options).run()


class _Search:
    """One run's search. Everything it knows comes from the steps' results and the LLM's replies, so a
    resumed run (recorded steps and replies replayed) rebuilds the same tree and takes the same decisions."""

    def __init__(self, session: Session, options: AiraMctsOptions):
        self.s = session
        self.o = options
        self.tree = Tree(session.task.metric.direction, options.uct_c)
        self.editor = CodeEditor(session, temperature=options.edit_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)

    def run(self) -> None:
        while self.s.steps_left > 0:
            path, levels = self.tree.select()
            self.expand(path, levels)

    def expand(self, path: list[Node], levels: list[dict]) -> None:
        leaf = path[-1]
        planned = min(self.o.num_children, self.s.steps_left)
        for index in range(planned):
            if self.s.steps_left <= 0:
                return
            selection = {"path": [n.step for n in path], "levels": levels, "child": index + 1, "of": planned}
            child = self.new_node(leaf, "draft" if leaf is self.tree.root else "improve", selection)
            if not child.buggy:
                self.backup(path + [child], child.metric, child)
                continue
            chain, fixed = self.debug_chain(child, selection)
            if fixed is not None:
                self.backup(path + chain, fixed.metric, fixed)

    def debug_chain(self, buggy: Node, selection: dict) -> tuple[list[Node], Node | None]:
        chain, current = [buggy], buggy
        for _ in range(self.o.max_debug_depth):
            if self.s.steps_left <= 0 or current.debug_depth >= self.o.max_debug_depth:
                break
            current = self.new_node(current, "debug", selection)
            chain.append(current)
            if not current.buggy:
                return chain, current
        return chain, None

    def backup(self, path: list[Node], metric: float, source: Node) -> None:
        self.tree.backup(path, metric)
        self.s.annotate(source.step, extra={"mcts_backup": {"value": metric, "path": [n.step for n in path]}})

    # -- one step -------------------------------------------------------------------------------
    def code_of(self, node: Node) -> dict[str, str]:
        return self.s.baseline_files if node is self.tree.root else self.s.files_of(node.step)

    def new_node(self, parent: Node, action: str, selection: dict) -> Node:
        base = self.code_of(parent)
        restore(self.s, base)
        instruction, error = self.instruction(parent, action)
        reply = self.editor.request(instruction, base, error_context=error, purpose=action)
        edit = self.editor.apply(reply)
        extra = {"mcts": {**selection, "expanding": parent.step, "tree": self.tree.snapshot()}}
        if action == "debug":
            extra["mcts"]["debug_depth"] = parent.debug_depth + 1
        plan = self.plan_of(reply, parent, action)
        # the record keeps what the model wrote; the node, which the prompts see, its plan as the option says
        result = self.s.run_step(action, parent=parent.step or None, plan=reply.plan[:4000] or plan, edit=edit,
                                 extra=extra)
        record = self.s.journal.get(result.step)
        node = Node(step=result.step, action=action, parent=parent, metric=result.metric,
                    buggy=not result.success or result.metric is None, plan=plan, error=run_error(record))
        self.tree.add(node)
        node.analysis = self.analyse(node)
        self.s.annotate(node.step, analysis=node.analysis)
        return node

    def number(self, node: Node) -> int:
        """How prompts name a node: the port numbers its nodes in creation order, the root 1, so a step's
        node is step + 1; with node_plan=model, by step (the root 0)."""
        return node.step + 1 if self.o.node_plan == "port" else node.step

    def plan_of(self, reply: EditReply, parent: Node, action: str) -> str:
        if reply.plan and self.o.node_plan == "model":
            return reply.plan[:4000]
        # the port's node plan is its label, whatever the model wrote
        if action == "draft":
            return f"Draft #{sum(c.action == 'draft' for c in parent.children) + 1}"
        return f"{'Improve from' if action == 'improve' else 'Debug fix for'} node {self.number(parent)}"

    # -- prompts --------------------------------------------------------------------------------
    def memory(self) -> str:
        good = [n for n in self.tree.nodes.values() if n.step and not n.buggy and n.metric is not None]
        if not good:
            return "(No successful attempts yet.)"
        good.sort(key=lambda n: self.tree.sign * n.metric, reverse=True)
        key = self.s.task.metric.key
        return "\n".join(f"- [Node {self.number(n)}] Action={n.action}, Plan: {n.plan[:200]}, "
                         f"Analysis: {n.analysis[:200]}, {key}={port_value(n.metric)}" for n in good[:MEMORY_SIZE])

    def instruction(self, parent: Node, action: str) -> tuple[str, str]:
        """(instruction, error context for the editor)."""
        if action == "draft":
            return ("You are starting a new approach to improve the ML code for this task.\n\n"
                    f"## Previous attempts summary\n{self.memory()}\n\n"
                    f"## Baseline\n{metric_line(self.s, self.s.task.baseline.val, 'Baseline')}\n\n"
                    "## Instructions\nPropose AND implement a novel algorithmic improvement.\n"
                    "- Describe your plan in 3-5 sentences before implementing."), ""
        if action == "improve":
            summary = (f"Parent node {self.number(parent)}: {metric_line(self.s, parent.metric)}, "
                       f"action={parent.action}")
            if parent.analysis:
                summary += f"\nAnalysis: {parent.analysis}"
            return ("You are improving an existing ML solution.\n\n"
                    f"## Current solution info\n{summary}\n"
                    "The code shown is this solution's.\n\n"
                    f"## Previous attempts summary\n{self.memory()}\n\n"
                    "## Instructions\nMake a single, targeted improvement to boost the metric further.\n"
                    "- Focus on one specific change, not several at once.\n"
                    "- Do not repeat approaches already tried (see previous attempts).\n"
                    "- Describe your improvement plan in 3-5 sentences before implementing."), ""
        earlier, node = [], parent
        while node is not None and node.action == "debug":
            earlier.append(f"- Attempt: {node.plan[:150]}\n  Error: {node.error[:100]}")
            node = node.parent
        text = ("The previous code change caused an error. Please fix it.\n\n"
                "## Instructions\nFix the bug while keeping the intended improvement.\n"
                "- Read the error carefully and find the root cause.\n- Make minimal changes to fix it.")
        if parent.analysis:
            text += f"\n\n## Analysis of the buggy attempt\n{parent.analysis}"
        if parent.error:
            text += f"\n\n## Error output\n{parent.error[:ERROR_SHOWN_CHARS]}"
        if earlier:
            text += "\n\n## Previous debug attempts\n" + "\n".join(reversed(earlier))
        return text, parent.error

    # -- analysis (no step) ---------------------------------------------------------------------
    def analyse(self, node: Node) -> str:
        prompt = (f"Analyse these ML experiment results briefly.\n\n## Task\n{task_context(self.s, self.o)}\n\n"
                  f"Action: {node.action}\nPlan: {node.plan[:300]}\n"
                  f"{metric_line(self.s, node.metric, 'Execution result')}\n"
                  f"Success: {not node.buggy}\nError: {node.error[:300]}\n\n"
                  "Give a concise analysis (2-3 sentences): what worked, what did not, and one concrete "
                  "suggestion for the next iteration.")
        messages = [{"role": "system", "content": "You are an ML experiment analyst. Be concise and actionable."},
                    {"role": "user", "content": prompt}]
        try:
            text = self.s.llm.complete(messages, temperature=self.o.analysis_temperature, purpose="analysis",
                                       max_output_tokens=port_llm_limit(self.o.max_output_tokens),
                                       seed=PORT_LLM_SEED).text
        except LLMCallError as exc:  # the port keeps the failure itself as the analysis, uncut (agent.py 612-613)
            return f"(analysis failed: {exc})"
        return text.strip()[:500]
