"""AIDE: tree search over solutions (draft, debug, improve), as FML-bench ports WecoAI's aideml.

Policy (both variants, the port's and aideml's): draft until ``num_drafts`` root nodes exist; then with
probability ``debug_prob`` debug a random buggy leaf whose debug depth (debug nodes in a row ending
there) is at most ``max_debug_depth``; otherwise improve the best good node, the first one to reach the
best metric when several tie; draft again while no node is good. Each validation run is one step and
one node (``parent`` links form the tree).

``variant=port`` (the default), FML-bench's ``agents/aide/agent.py`` step by step:

- The agent writes an instruction and the shared editor (``editor=port``: one call, no re-ask) turns it
  into an edit of the parent's code (the baseline for a draft). A draft's instruction holds the baseline
  metric line and the memory; an improvement's the parent's metric line, its analysis and the memory; a
  debug's the parent's analysis ("Bug analysis") and, when the parent is itself a debug node, the chain
  of earlier debug attempts (first 150 characters of each one's plan, first 100 of its error). A debug
  also hands the editor the parent's error, the first ``max_stderr_output`` (1,500) characters of its
  stderr, or "(No error output captured.)" when it wrote none.
- Memory: every good node so far as "Plan / Analysis / <metric>: value", separator-joined;
  "(No successful attempts yet.)" when there is none. A node's plan is the port's: the first 300
  characters of its instruction, not the model's words.
- A failed edit (a reply without usable code, or an editor call that fails after its retries) still runs
  the parent's code and costs its step. Buggy = the run failed or gave no metric, nothing else.
- After each run one LLM analysis (no step; temperature 0.75 and at most 8,192 tokens, the port's
  ``llm.py`` defaults) sees the plan, success, metric and the last 1,500 characters of the error; its
  reply, stripped and cut to 500 characters, is the node's analysis; a call that fails gives
  "Analysis failed: <error>".

``variant=upstream``: aideml's own coding prompts (task, memory, the whole code, the failure report),
re-asked up to ``reply_attempts`` times until a reply holds code; an edit that does not apply makes the
node buggy; an LLM review after each run (``review=true``) writes the summary and may call a successful
run buggy; both kinds of call at aideml's temperature, 0.5.

Metrics appear in full, as the port prints a float. Where ``variant=port`` still differs from the port:
the policy draws from the run's seeded RNG (the port: Python's global one); with no good node at the end the harness
tests the baseline code (the port runs no test); and the shared editor's own differences (its module).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from pytest_fmlbench.agentkit import (
    Agent, CodeEditor, EditorOptions, extract_json, metric_line, parse_reply, render_files, reply_format, restore,
    run_error, tail, task_context,
)
from pytest_fmlbench.agentkit.editing import PORT_LLM_SEED, EditorMode, cut_off_note, port_llm_limit
from pytest_fmlbench.llm.backends import LENGTH_LIMIT_REASONS
from pytest_fmlbench.editor import EditResult
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.record import StepRecord
from pytest_fmlbench.session import Session

SEPARATOR = "\n-------------------------------\n"
NO_SUCCESS = "(No successful attempts yet.)"
NO_ERROR = "(No error output captured.)"
PLAN_CHARS = 300  # the port keeps the head of the instruction as a node's plan
ANALYSIS_CHARS = 500

# the port's instruction texts (aide/agent.py 380-517), kept word for word: they are what the model reads
ROLE = "You are an expert ML researcher. "
DRAFT_INTRO = ROLE + "Your goal is to improve the ML algorithm to achieve better performance."
DRAFT_TASK = ("Propose a novel approach that differs from previous attempts (listed in Memory). Make targeted "
              "changes to improve the metric. Keep the changes minimal and focused on a single idea.")
IMPROVE_INTRO = ROLE + "You have a working solution and need to improve it further."
IMPROVE_TASK = ("Propose a single, specific improvement to the current solution. The change should be atomic so "
                "we can evaluate its effect. Do not repeat approaches that already appear in Memory.")
DEBUG_INTRO = ROLE + "Your previous solution had a bug. Fix the issue based on the error context provided."
DEBUG_TASK = ("Fix the bug while preserving the original intent of the code. Make minimal changes to resolve "
              "the error.")
ANALYSIS_SYSTEM = "You are an experienced AI researcher evaluating experiment results."
ANALYSIS_INTRO = ("You have written code for your research experiment and now need to evaluate the output of the "
                  "code execution. Analyze the execution output, determine if there were any bugs, and provide a "
                  "summary of the findings.")
ANALYSIS_TASK = ("If there is a bug, summarize the bug and propose a fix. Otherwise, provide a 2-3 sentence "
                 "summary of findings.")


class AideOptions(EditorOptions):
    editor: EditorMode = Field("port", description="variant=port only: "
                               + EditorOptions.model_fields["editor"].description)
    variant: Literal["port", "upstream"] = Field(
        "port", description="'port' = FML-bench's AIDE (its instructions through the shared editor, one call per "
        "step, an LLM analysis per run); 'upstream' = WecoAI aideml's prompts, re-asks and review")
    num_drafts: int = Field(5, ge=1, description="root solutions drafted before any debugging or improving")
    debug_prob: float = Field(0.5, ge=0, le=1, description="chance of debugging a buggy leaf after the drafts")
    max_debug_depth: int = Field(3, ge=0, description="a buggy leaf is debugged while its debug depth is at most this")
    max_stderr_output: int = Field(1500, ge=1, description="characters of a failed run's stderr shown: its head to "
                                   "a debug, its tail to the analysis (review)")
    max_output_tokens: int | None = Field(None, ge=16, description="reply length limit of the coding calls; "
                                          "none = no limit, as the port's editor (Anthropic: the model's maximum); "
                                          "the analysis calls (variant=port) ask for at most 8192, as the port's "
                                          "llm.py")
    edit_temperature: float | None = Field(None, ge=0, le=2, description="variant=port only: temperature of the "
                                           "editor calls; none = the provider's, as the port's editor")
    analysis_temperature: float | None = Field(0.75, ge=0, le=2, description="variant=port only: temperature of "
                                               "the analysis calls, the port's llm.py default")
    code_temperature: float | None = Field(0.5, ge=0, le=2, description="variant=upstream only: temperature of "
                                           "the coding calls (aideml: 0.5)")
    feedback_temperature: float | None = Field(0.5, ge=0, le=2, description="variant=upstream only: temperature "
                                               "of the review calls (aideml: 0.5)")
    reply_attempts: int = Field(3, ge=1, description="variant=upstream only: asks per step until a reply holds "
                                "code (aideml: 3)")
    review: bool = Field(True, description="variant=upstream only: LLM review of each run (summary + is_bug), "
                         "as aideml")


class AideAgent(Agent):
    """Tree search over whole solutions (draft, debug, improve) with an LLM analysis per run, as FML-bench's AIDE."""

    name = "aide"
    Options = AideOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("aide needs an LLM: session.llm is not set")
        search = _PortSearch if self.options.variant == "port" else _UpstreamSearch
        search(session, self.options).run()


class _Tree:
    """The search policy both variants share. Everything it knows is rebuilt from the journal and the
    recorded replies, so a resumed run takes the same decisions."""

    def __init__(self, session: Session, options: AideOptions):
        self.s = session
        self.o = options

    def run(self) -> None:
        while self.s.steps_left > 0:
            self.step()

    def step(self) -> None:  # pragma: no cover - each variant has its own
        raise NotImplementedError

    def buggy(self, node: StepRecord) -> bool:  # pragma: no cover - each variant has its own
        raise NotImplementedError

    def good_nodes(self) -> list[StepRecord]:
        return [n for n in self.s.journal if not self.buggy(n)]

    def best_good(self) -> StepRecord | None:
        # strictly better only: among equal metrics the earliest node stays, as max() keeps the first
        best = None
        for node in self.good_nodes():
            if best is None or self.s.journal.better(node.metric, best.metric):
                best = node
        return best

    def select(self) -> StepRecord | None:
        """The parent of the next node; None means draft a new root."""
        journal = self.s.journal
        if len(journal.draft_nodes) < self.o.num_drafts:
            return None
        if self.s.rng.random() < self.o.debug_prob:
            debuggable = [n for n in journal if self.buggy(n) and journal.is_leaf(n.step)
                          and journal.debug_depth(n.step) <= self.o.max_debug_depth]
            if debuggable:
                return self.s.rng.choice(debuggable)
        return self.best_good()

    def parent_and_code(self) -> tuple[str, StepRecord | None, dict[str, str]]:
        parent = self.select()
        if parent is None:
            return "draft", None, self.s.baseline_files
        return ("debug" if self.buggy(parent) else "improve"), parent, self.s.files_of(parent.step)


# -- variant=port ----------------------------------------------------------------------------------
class _PortSearch(_Tree):
    def __init__(self, session: Session, options: AideOptions):
        super().__init__(session, options)
        self.editor = CodeEditor(session, temperature=options.edit_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)

    def buggy(self, node: StepRecord) -> bool:
        return not node.success or node.metric is None

    def step(self) -> None:
        s = self.s
        action, parent, base = self.parent_and_code()
        restore(s, base)
        instruction = self.instruction(action, parent)
        error_context = (self.error_of(parent) or NO_ERROR) if action == "debug" else ""
        reply = self.editor.request(instruction, base, error_context=error_context, purpose=action)
        edit = self.editor.apply(reply)
        # a failed edit leaves the parent's code in place, and that code is what runs
        result = s.run_step(action, parent=parent.step if parent else None, plan=instruction[:PLAN_CHARS], edit=edit)
        node = s.journal.get(result.step)
        s.annotate(node.step, analysis=self.analyse(node),
                   extra={"aide_buggy": self.buggy(node), "debug_depth": s.journal.debug_depth(node.step)})

    def error_of(self, node: StepRecord) -> str:
        """A node's error as the port keeps it: the head of the failed run's stderr."""
        return run_error(node)[:self.o.max_stderr_output]

    # -- instructions ---------------------------------------------------------------------------
    def memory(self) -> str:
        good = self.good_nodes()
        if not good:
            return NO_SUCCESS
        key = self.s.task.metric.key
        return SEPARATOR.join(f"Plan: {n.plan}\nAnalysis: {n.analysis}\n{key}: {n.metric}" for n in good)

    def instruction(self, action: str, parent: StepRecord | None) -> str:
        if action == "draft":
            return (f"{DRAFT_INTRO}\n\n"
                    f"## Baseline results\n{metric_line(self.s, self.s.task.baseline.val, 'Baseline')}\n\n"
                    f"## Memory of previous attempts\n{self.memory()}\n\n"
                    f"## Instructions\n{DRAFT_TASK}")
        if action == "improve":
            analysis = f"\nAnalysis: {parent.analysis}\n" if parent.analysis else ""
            return (f"{IMPROVE_INTRO}\n\n"
                    f"## Last validation result\n{metric_line(self.s, parent.metric, 'Last validation result')}\n"
                    f"{analysis}\n"
                    f"## Memory of previous attempts\n{self.memory()}\n\n"
                    f"## Instructions\n{IMPROVE_TASK}")
        text = DEBUG_INTRO
        if parent.analysis:
            text += f"\n\n## Bug analysis\n{parent.analysis}"
        text += f"\n\n## Instructions\n{DEBUG_TASK}"
        chain = self.debug_chain(parent)
        if chain:
            text += "\n\n## Previous debug attempts\n" + "\n".join(chain)
        return text

    def debug_chain(self, parent: StepRecord) -> list[str]:
        """The debug nodes in a row ending at ``parent``, oldest first."""
        journal, earlier, node = self.s.journal, [], parent
        while node.parent is not None and node.action == "debug":
            earlier.append(f"- Attempt: {node.plan[:150]}\n  Error: {self.error_of(node)[:100]}")
            node = journal.get(node.parent)
        return earlier[::-1]

    # -- analysis (no step) ---------------------------------------------------------------------
    def analyse(self, node: StepRecord) -> str:
        error = tail(run_error(node), self.o.max_stderr_output)
        prompt = (f"{ANALYSIS_INTRO}\n\n"
                  f"## Task\n{task_context(self.s, self.o)}\n\n"
                  f"## Plan\n{node.plan[:500]}\n\n"
                  f"## Execution Result\nSuccess: {node.success}\n"
                  f"Primary Metric ({self.s.task.metric.key}): {node.metric}\n")
        if error:
            prompt += f"Error output:\n```\n{error}\n```\n\n"
        prompt += ANALYSIS_TASK
        messages = [{"role": "system", "content": ANALYSIS_SYSTEM}, {"role": "user", "content": prompt}]
        try:
            text = self.s.llm.complete(messages, temperature=self.o.analysis_temperature,
                                       max_output_tokens=port_llm_limit(self.o.max_output_tokens),
                                       seed=PORT_LLM_SEED,
                                       purpose="analysis").text
        except LLMCallError as exc:  # the port keeps the failure itself as the analysis, uncut
            return f"Analysis failed: {exc}"
        return text.strip()[:ANALYSIS_CHARS]


# -- variant=upstream ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Review:
    is_bug: bool
    summary: str


class _UpstreamSearch(_Tree):
    def __init__(self, session: Session, options: AideOptions):
        super().__init__(session, options)
        self.reviews: dict[int, Review] = {}

    def buggy(self, node: StepRecord) -> bool:
        review = self.reviews.get(node.step)
        return not node.success or not node.edit_applied or node.metric is None or bool(review and review.is_bug)

    def step(self) -> None:
        s = self.s
        action, parent, base = self.parent_and_code()
        messages = self.coding_prompt(action, parent, base)
        plan, edits, error, attempts = self.ask_for_code(messages, base, action)
        restore(s, base)
        edit = s.edit(edits) if edits else EditResult(applied=False, error=error)
        result = s.run_step(action, parent=parent.step if parent else None, plan=plan, edit=edit,
                            extra={"reply_attempts": attempts})
        node = s.journal.get(result.step)
        review = self.review(node)
        self.reviews[node.step] = review
        s.annotate(node.step, analysis=review.summary,
                   extra={"review_is_bug": review.is_bug, "aide_buggy": self.buggy(node)})

    def ask_for_code(self, messages: list[dict[str, str]], base: dict[str, str], action: str):
        """(plan, edits, error, attempts): re-asks, as aideml does, while a reply holds no code."""
        error = ""
        for attempt in range(1, self.o.reply_attempts + 1):
            try:
                reply = self.s.llm.complete(messages, temperature=self.o.code_temperature,
                                            max_output_tokens=self.o.max_output_tokens, purpose=action)
            except LLMCallError as exc:  # a provider that keeps failing would fail the re-asks too
                return "", [], f"LLM call failed: {exc}", attempt
            parsed = parse_reply(reply.text, base)
            if parsed.edits:
                return parsed.plan[:4000], parsed.edits, "", attempt
            error = "no usable code in the reply: " + parsed.error
            if reply.finish_reason in LENGTH_LIMIT_REASONS:
                error += " " + cut_off_note(self.o.max_output_tokens)
        return parsed.plan[:4000], [], error, self.o.reply_attempts

    # -- prompts --------------------------------------------------------------------------------
    def task_section(self) -> str:
        spec = self.s.task
        metric = spec.metric
        lines = [
            "# Task", spec.description.strip(), "",
            f"Metric: `{metric.key}` on the validation split; {metric.direction} is better. "
            "Baseline validation value: "
            + ("unmeasured." if spec.baseline.val is None else f"{spec.baseline.val:.6g}."),
        ]
        if spec.constraints:
            lines.append("Constraints (a run breaking one fails): "
                         + "; ".join(f"{c.name}: {c.description}" for c in spec.constraints))
        lines.append(f"Each validation run has a time limit of {spec.timeout_s:g} s.")
        return "\n".join(lines)

    def memory(self) -> str:
        entries = [f"Design: {n.plan}\nResults: {n.analysis}\nValidation metric: {n.metric:.6g}"
                   for n in self.good_nodes()]
        return SEPARATOR.join(entries)

    def coding_prompt(self, action: str, parent: StepRecord | None, base: dict[str, str]) -> list[dict[str, str]]:
        sections = [self.task_section()]
        if action == "draft":
            system = ("You are an expert machine-learning researcher taking part in a benchmark. Come up with "
                      "a good plan for a solution to the task below and implement it by changing the task's code.")
            guide = ("Start with a brief outline of the proposed solution in natural language (3-5 sentences), "
                     "then the code blocks, and nothing else. This first solution should stay fairly simple: no "
                     "ensembles, no hyper-parameter search. Take the Memory section into account: do not propose "
                     "a design that was already tried. Do not suggest exploratory data analysis.")
            code_title = "# Starting code (the task's baseline)"
        elif action == "improve":
            system = ("You are an expert machine-learning researcher taking part in a benchmark. You are given a "
                      "working solution; improve it so that it scores better on the held-out test data. Outline "
                      "the improvement briefly, then implement it.")
            guide = ("Start with a brief description (3-5 sentences) of one specific, actionable improvement. It "
                     "must be atomic, so that its effect can be measured on its own. Take the Memory section into "
                     "account. Then the code blocks, and nothing else. Do not suggest exploratory data analysis.")
            code_title = f"# Previous solution (step {parent.step}, validation {parent.metric:.6g})"
        else:
            system = ("You are an expert machine-learning researcher taking part in a benchmark. Your previous "
                      "solution has a bug or failed to run. Based on the information below, fix it.")
            guide = ("Start with a brief description (3-5 sentences) of how the problem can be fixed, then the "
                     "code blocks, and nothing else.")
            code_title = f"# Previous (buggy) solution (step {parent.step})"
        memory = self.memory() if action != "debug" else ""
        if memory:
            sections.append("# Memory\n" + memory)
        sections.append(code_title + "\n" + render_files(base))
        if action == "debug":
            sections.append("# Execution output\n```\n" + self.failure_report(parent) + "\n```")
        sections.append("# Instructions\n## Response format\n" + guide + "\n\n" + reply_format(base))
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(sections)}]

    def failure_report(self, node: StepRecord) -> str:
        parts = []
        if not node.edit_applied:
            parts.append(f"Your change could not be applied, so the previous code ran unchanged: {node.edit_error}")
        if not node.success:
            parts.append(run_error(node)[:self.o.max_stderr_output] or NO_ERROR)
        elif node.metric is not None:
            parts.append(f"The run finished: {self.s.task.metric.key} = {node.metric:.6g}")
        review = self.reviews.get(node.step)
        if review and review.is_bug and node.success and node.edit_applied:
            parts.append(f"The review found a bug: {review.summary}")
        return "\n".join(parts)

    # -- review (no step) -----------------------------------------------------------------------
    def review(self, node: StepRecord) -> Review:
        outcome = self.outcome_text(node)
        if not node.edit_applied:
            return Review(True, f"The change could not be applied: {node.edit_error}")
        if not self.o.review:
            return Review(not node.success, outcome)
        ran = self.s.files_of(node.step)
        changed = {p: c for p, c in ran.items() if c != self.s.baseline_files.get(p)}
        code = render_files(changed) if changed else "(the task's baseline code, unchanged)"
        user = "\n\n".join([
            self.task_section(),
            "# Plan\n" + (node.plan or "(none given)"),
            "# Code that ran (files changed from the baseline)\n" + code,
            "# Outcome of the validation run\n" + outcome,
            "# Response\nReply with one JSON object and nothing else: "
            '{"is_bug": true or false, "summary": "..."}. is_bug is true if the run failed or the output shows '
            "a bug. summary: if there is a bug, propose a fix; otherwise 2-3 sentences on the empirical findings.",
        ])
        system = ("You are an expert machine-learning researcher. You wrote code for the task below and it was run "
                  "on the validation split. Judge the outcome: was there a bug, and what did the run show?")
        try:
            text = self.s.llm.complete([{"role": "system", "content": system}, {"role": "user", "content": user}],
                                       temperature=self.o.feedback_temperature,
                                       max_output_tokens=self.o.max_output_tokens, purpose="review").text
        except LLMCallError as exc:  # no verdict from the model: "buggy" then comes from the run alone
            return Review(not node.success, f"Analysis failed: {exc}"[:2000])
        verdict = extract_json(text) or {}
        summary = str(verdict.get("summary") or text.strip() or outcome)[:2000]
        said_bug = verdict.get("is_bug")
        # the harness's verdict on a failed run stands, whatever the review says
        is_bug = (not node.success) or (said_bug is True or str(said_bug).lower() == "true")
        return Review(is_bug, summary)

    def outcome_text(self, node: StepRecord) -> str:
        if node.success:
            others = ", ".join(f"{k} = {v:.6g}" for k, v in sorted(node.metrics.items()))
            return (f"Succeeded: {self.s.task.metric.key} = {node.metric:.6g}"
                    + (f" ({others})" if others else ""))
        return "Failed:\n" + tail(run_error(node), self.o.max_stderr_output)
