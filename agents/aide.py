"""AIDE: tree search over solutions (draft, debug, improve), after WecoAI's aideml as FML-bench runs it.

Policy, as upstream: draft until ``num_drafts`` root nodes exist; then with probability ``debug_prob``
debug a random buggy leaf whose debug depth is at most ``max_debug_depth``; otherwise improve the best
good node with one atomic change; draft again while no node is good. Each validation run is one step
and one node (``parent`` links form the tree); after it, an LLM review summarises the run and may call
it buggy (costs no step). Memory in the draft and improve prompts = plan, review and metric of the
good nodes. A reply without usable code after ``reply_attempts`` tries, or whose edit does not apply,
still runs (the parent's code, unchanged) and costs its step, recorded with ``edit_applied`` false; the
node counts as buggy, and a later debug sees the edit error. A coding call that fails after its retries
is such a reply (no re-ask); a review call that fails leaves the run's own verdict and the port's
"Analysis failed: ..." as the summary.

Error context, as the port's AIDE: a debug sees the first 1,500 characters of the failed run's stderr,
the review the last 1,500. Temperatures, as the port: none for the coding calls (the port's editor sends
none), 0.75 for the reviews (its analysis calls); upstream aideml uses 0.5 for both.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from pytest_fmlbench.agentkit import (
    Agent, AgentOptions, extract_json, parse_reply, render_files, reply_format, run_error, tail,
)
from pytest_fmlbench.llm.errors import LLMCallError
from pytest_fmlbench.editor import EditResult
from pytest_fmlbench.record import StepRecord
from pytest_fmlbench.session import Session

_SEPARATOR = "\n-------------------------------\n"
ERROR_HEAD_CHARS = 1500  # the port's max_stderr_output: a debug sees this much of the stderr, from its start


class AideOptions(AgentOptions):
    num_drafts: int = Field(5, ge=1, description="root solutions drafted before any debugging or improving")
    debug_prob: float = Field(0.5, ge=0, le=1, description="chance of debugging a buggy leaf after the drafts")
    max_debug_depth: int = Field(3, ge=0, description="a buggy leaf is debugged while its debug depth is at most this")
    code_temperature: float | None = Field(None, ge=0, le=2, description="sampling temperature of the coding "
                                           "calls; none = the provider's, as the port's editor (upstream: 0.5)")
    feedback_temperature: float | None = Field(0.75, ge=0, le=2, description="sampling temperature of the "
                                               "review calls, the port's analysis default (upstream: 0.5)")
    max_output_tokens: int = Field(8192, ge=16, description="reply length limit of each LLM call")
    reply_attempts: int = Field(3, ge=1, description="asks per step until a reply holds code (upstream: 3)")
    review: bool = Field(True, description="LLM review of each run (summary + is_bug), as upstream")


@dataclass(frozen=True)
class Review:
    is_bug: bool
    summary: str


class AideAgent(Agent):
    """Tree search over whole solutions (draft, debug, improve) with an LLM review per run, after aideml."""

    name = "aide"
    Options = AideOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("aide needs an LLM: session.llm is not set")
        _Search(session, self.options).run()


class _Search:
    """One run's search state. Everything it knows is rebuilt from the journal and the review replies,
    so a resumed run takes the same decisions."""

    def __init__(self, session: Session, options: AideOptions):
        self.s = session
        self.o = options
        self.reviews: dict[int, Review] = {}

    def run(self) -> None:
        while self.s.steps_left > 0:
            self.step()

    # -- the tree, as AIDE sees it --------------------------------------------------------------
    def buggy(self, node: StepRecord) -> bool:
        review = self.reviews.get(node.step)
        return not node.success or not node.edit_applied or node.metric is None or bool(review and review.is_bug)

    def good_nodes(self) -> list[StepRecord]:
        return [n for n in self.s.journal if not self.buggy(n)]

    def best_good(self) -> StepRecord | None:
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

    # -- one step -------------------------------------------------------------------------------
    def step(self) -> None:
        s = self.s
        parent = self.select()
        if parent is None:
            action, base = "draft", s.baseline_files
        else:
            action = "debug" if self.buggy(parent) else "improve"
            base = s.files_of(parent.step)
        messages = self.coding_prompt(action, parent, base)
        plan, edits, error, attempts = self.ask_for_code(messages, base, action)
        # only what differs: an editable file the baseline lacks reads as "" and is not rewritten
        current = s.files
        differing = {p: c for p, c in base.items() if current.get(p) != c}
        if differing:
            restored = s.set_files(differing)
            if not restored.applied:
                raise RuntimeError(f"cannot restore the code of the parent node: {restored.error}")
        edit = s.edit(edits) if edits else EditResult(applied=False, error=error)
        result = s.run_step(action, parent=parent.step if parent else None, plan=plan, edit=edit,
                            extra={"reply_attempts": attempts})
        node = s.journal.get(result.step)
        review = self.review(node)
        self.reviews[node.step] = review
        s.annotate(node.step, analysis=review.summary,
                   extra={"review_is_bug": review.is_bug, "aide_buggy": self.buggy(node)})

    def ask_for_code(self, messages: list[dict[str, str]], base: dict[str, str], action: str):
        """(plan, edits, error, attempts): re-asks, as upstream does, while a reply holds no code."""
        error = ""
        for attempt in range(1, self.o.reply_attempts + 1):
            try:
                reply = self.s.llm.complete(messages, temperature=self.o.code_temperature,
                                            max_output_tokens=self.o.max_output_tokens, purpose=action)
            except LLMCallError as exc:  # a failed edit, as the port's editor makes of it: no re-ask
                return "", [], f"LLM call failed: {exc}", attempt
            parsed = parse_reply(reply.text, base)
            if parsed.edits:
                return parsed.plan[:4000], parsed.edits, "", attempt
            error = "no usable code in the reply: " + parsed.error
            if reply.finish_reason == "length":
                error += f" (the reply was cut at {self.o.max_output_tokens} tokens)"
        return parsed.plan[:4000], [], error, self.o.reply_attempts

    # -- prompts --------------------------------------------------------------------------------
    def task_section(self) -> str:
        spec = self.s.task
        metric = spec.metric
        lines = [
            "# Task", spec.description.strip(), "",
            f"Metric: `{metric.key}` on the validation split; {metric.direction} is better. "
            f"Baseline validation value: {spec.baseline.val:.6g}.",
        ]
        if spec.constraints:
            lines.append("Constraints (a run breaking one fails): "
                         + "; ".join(f"{c.name}: {c.description}" for c in spec.constraints))
        lines.append(f"Each validation run has a time limit of {spec.timeout_s:g} s.")
        return "\n".join(lines)

    def memory(self) -> str:
        entries = [f"Design: {n.plan}\nResults: {n.analysis}\nValidation metric: {n.metric:.6g}"
                   for n in self.good_nodes()]
        return _SEPARATOR.join(entries)

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
            parts.append(run_error(node)[:ERROR_HEAD_CHARS] or "(No error output captured.)")
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
        except LLMCallError as exc:  # the port's fallback; "buggy" then comes from the run alone
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
        return "Failed:\n" + tail(run_error(node))
