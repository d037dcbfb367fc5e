"""Autoresearch: greedy hill-climbing, after karpathy/autoresearch as FML-bench ports it.

Each step: one LLM call proposes an idea (from the task, the baseline and current best metric, the table
of experiments so far and the incumbent code), the shared editor turns it into an edit of the incumbent,
and the validation run decides: strictly better than the incumbent -> keep (the code becomes the new
incumbent); equal or worse -> discard (revert to the incumbent); a crash (failed run or no metric) ->
the next step is a debug retry (one editor call with the intended idea and the error, the last 1,500
characters of the run's stderr, shown in the instruction and as the editor's error context, as the
port does; no new idea), until ``max_debug_retries`` consecutive crashed runs, the idea's own included,
as the port counts them: with 3, an idea that crashes gets two fixes, then it is given up and the
incumbent restored.

As in the port, the incumbent starts as the baseline code at the task's recorded baseline validation
value (upstream's first run re-measures the baseline; here no step is spent on it), and a debug retry
edits the incumbent, told what was intended and how it crashed (``debug_from=incumbent``). Upstream
Autoresearch fixes the crashed code itself: ``debug_from=crashed``. The idea call costs no step (at
the port's temperature, 0.75, and at most 8,192 tokens, as its llm.py); a failed edit still runs (the
incumbent, unchanged) and costs its step.
An idea call that fails after its retries gives the port's stand-in idea (``FALLBACK_IDEA``); an edit
call that fails is a failed edit. An exception inside the loop ends it, and the run goes on to its final
test on the best code so far, as the port's ``except Exception`` does (recorded in the run's
``caught_errors``; ``loop_error=crash``: the run ends as an error).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import Field

from pytest_fmlbench.agentkit import (
    Agent, CodeEditor, EditorOptions, complete_or, metric_line, restore, run_error, tail, task_context,
)
from pytest_fmlbench.agentkit.editing import PORT_LLM_SEED, port_llm_limit
from pytest_fmlbench.agentkit.loop import LoopErrorOptions, caught_in_loop
from pytest_fmlbench.record import StepRecord
from pytest_fmlbench.session import Session

IDEA_SYSTEM = ("You are an autonomous ML researcher running experiments to improve an ML algorithm. You propose "
               "concise, specific experimental ideas. Be creative but practical. All else being equal, simpler "
               "is better.")
# what the port proposes when its idea call fails (autoresearch/agent.py 412-414)
FALLBACK_IDEA = "Try a small hyperparameter change to improve the metric."
IDEA_INSTRUCTIONS = (
    "## Instructions\n"
    "Propose ONE specific experimental idea to try next. Consider:\n"
    "- What has worked and what has not (see the experiment history)\n"
    "- The current code and its architecture\n"
    "- Architecture, optimiser, hyper-parameter and training-loop changes are all fair game\n"
    "- Keep changes focused and atomic so that their effect can be measured\n"
    "- If recent experiments were discarded or crashed, try a different direction\n"
    "- All else being equal, simpler is better\n\n"
    "Reply with a concise description (3-5 sentences) of what to change and why, specific enough to be "
    "implemented directly."
)


def current_code(files: dict[str, str], order: list[str]) -> str:
    """The incumbent's files as the port's idea prompt shows them (autoresearch/agent.py 513-524): in the
    task's order, each under its base name in a python fence, whatever its kind."""
    return "\n\n".join(f"### {PurePosixPath(path).name}\n```python\n{files[path]}\n```"
                       for path in order if path in files)


class AutoresearchOptions(EditorOptions, LoopErrorOptions):
    max_debug_retries: int = Field(3, ge=1, description="consecutive crashed runs of an idea (its own included) "
                                   "before it is given up, as the port counts them")
    max_stderr_output: int = Field(1500, ge=1, description="characters of a crashed run's stderr (its tail) a debug "
                                   "retry is shown")
    debug_from: Literal["incumbent", "crashed"] = Field(
        "incumbent", description="code a debug retry edits: the incumbent, as the port; 'crashed' as upstream")
    idea_temperature: float | None = Field(0.75, ge=0, le=2, description="temperature of the idea calls, the "
                                           "port's default (its llm.py); none = the provider's")
    edit_temperature: float | None = Field(None, ge=0, le=2, description="temperature of the edit calls; "
                                           "none = the provider's default, as the port")
    max_output_tokens: int | None = Field(None, ge=16, description="reply length limit of the editor calls; "
                                          "none = no limit, as the port's editor (Anthropic: the model's maximum); "
                                          "the idea calls ask for at most 8192, as the port's llm.py")


@dataclass
class Experiment:
    """One row of the experiment table (upstream's results.tsv)."""

    step: int
    metric: float | None
    status: str  # keep | discard | crash
    description: str


@dataclass
class Line:
    """A line of hill-climbing: its incumbent and what was tried from it."""

    files: dict[str, str]
    metric: float | None
    step: int | None = None  # None: the baseline
    history: list[Experiment] = field(default_factory=list)
    consecutive_crashes: int = 0
    pending_debug: bool = False
    last_idea: str = ""
    last_error: str = ""
    crashed_step: int | None = None

    def keeps_in(self, window: int) -> int:
        return sum(e.status == "keep" for e in self.history[-window:])


class Climber:
    """Autoresearch's step: (idea or debug) -> edit -> run -> keep / discard / crash. Shared with
    AdaptiveSearch, whose first phase is this loop and whose branches each climb a Line of their own."""

    def __init__(self, session: Session, options: AutoresearchOptions):
        self.s = session
        self.o = options
        self.editor = CodeEditor(session, temperature=options.edit_temperature,
                                 max_output_tokens=options.max_output_tokens, mode=options.editor,
                                 options=options)

    # -- the step -------------------------------------------------------------------------------
    def step(self, line: Line, idea_prompt, *, action: str, extra: dict[str, Any] | None = None,
             extra_key: str = "autoresearch") -> tuple[StepRecord, dict[str, Any]]:
        """One validation run on ``line``; ``idea_prompt()`` gives the (system, user) idea prompt when a new
        idea is due. Returns the step's record and the decision taken on it."""
        s = self.s
        if line.pending_debug:
            line.pending_debug = False
            crashed = s.files_of(line.crashed_step) if self.o.debug_from == "crashed" else line.files
            restore(s, crashed)
            idea = f"[debug retry] {line.last_idea}"
            reply = self.editor.request(self.debug_instruction(line), crashed, error_context=line.last_error,
                                        purpose="debug")
            action, parent = "debug", line.crashed_step
        else:
            system, user = idea_prompt()
            idea = complete_or(s, [{"role": "system", "content": system}, {"role": "user", "content": user}],
                               lambda exc: FALLBACK_IDEA, temperature=self.o.idea_temperature, purpose="idea",
                               max_output_tokens=port_llm_limit(self.o.max_output_tokens),
                               seed=PORT_LLM_SEED).strip()
            line.last_idea = idea
            restore(s, line.files)
            reply = self.editor.request(idea, line.files, purpose=action)
            parent = line.step
        edit = self.editor.apply(reply)
        state = {"incumbent_step": line.step, "incumbent_metric": line.metric,
                 "consecutive_crashes": line.consecutive_crashes}
        result = s.run_step(action, parent=parent, plan=reply.plan[:4000], idea=idea, edit=edit,
                            extra={extra_key: {**(extra or {}), **state}})
        record = s.journal.get(result.step)
        decision = self.judge(line, record, idea)
        s.annotate(record.step, extra={extra_key: {**record.extra.get(extra_key, {}), **decision}})
        return record, decision

    def judge(self, line: Line, record: StepRecord, idea: str) -> dict[str, Any]:
        if not record.success or record.metric is None:
            line.history.append(Experiment(record.step, None, "crash", idea))
            line.consecutive_crashes += 1
            if line.consecutive_crashes < self.o.max_debug_retries:
                line.pending_debug = True
                line.last_error = tail(run_error(record), self.o.max_stderr_output)
                line.crashed_step = record.step
                return {"decision": "crash", "next": "debug retry", "crashes_in_a_row": line.consecutive_crashes}
            restore(self.s, line.files)
            crashes, line.consecutive_crashes = line.consecutive_crashes, 0
            return {"decision": "crash", "next": "give up the idea, revert", "crashes_in_a_row": crashes}
        line.consecutive_crashes = 0
        if line.metric is None or self.s.journal.better(record.metric, line.metric):
            line.files, line.metric, line.step = self.s.files_of(record.step), record.metric, record.step
            line.history.append(Experiment(record.step, record.metric, "keep", idea))
            return {"decision": "keep"}
        restore(self.s, line.files)
        line.history.append(Experiment(record.step, record.metric, "discard", idea))
        return {"decision": "discard", "reverted_to": line.step}

    # -- prompts --------------------------------------------------------------------------------
    def debug_instruction(self, line: Line) -> str:
        return ("The previous experiment crashed. The intended change was:\n"
                f"{line.last_idea}\n\n"
                f"## Error\n```\n{line.last_error}\n```\n\n"
                "If this is a simple fix (typo, missing import, wrong variable name), fix it while keeping the "
                "intended change. If the approach is fundamentally broken, simplify it to something that runs "
                "correctly.")

    def history_table(self, history: list[Experiment], width: int = 60) -> str:
        if not history:
            return "(No experiments run yet.)"
        key = self.s.task.metric.key
        lines = [f"step | {key:>10s} | status  | description", "-" * 65]
        for e in history:
            shown = "   CRASH  " if e.metric is None else f"{e.metric:.6f}"
            lines.append(f"{e.step:4d} | {shown:>10s} | {e.status:<7s} | {e.description[:width]}")
        return "\n".join(lines)

    def idea_prompt(self, line: Line) -> tuple[str, str]:
        parts = ["You are an autonomous ML researcher. Your goal is to propose the next experimental idea to "
                 "improve the ML algorithm.\n",
                 "## Task Description\n" + task_context(self.s, self.o),
                 "\n## Baseline Results\n" + metric_line(self.s, self.s.task.baseline.val, "Baseline")]
        if line.metric is not None:
            parts.append("\n## Current Best Metric\n" + metric_line(self.s, line.metric, "Current Best"))
        parts += ["\n## Experiment History\n" + self.history_table(line.history),
                  "\n## Current Code\n" + current_code(line.files, self.s.task.editable), "\n" + IDEA_INSTRUCTIONS]
        return IDEA_SYSTEM, "\n".join(parts)


class AutoresearchAgent(Agent):
    """Greedy hill-climb: an LLM idea, one edit of the incumbent, keep only if strictly better, debug crashes."""

    name = "autoresearch"
    Options = AutoresearchOptions
    uses_llm = True

    def run(self, session: Session) -> None:
        if session.llm is None:
            raise RuntimeError("autoresearch needs an LLM: session.llm is not set")
        climber = Climber(session, self.options)
        # the port starts from the task's recorded baseline value instead of a baseline run
        line = Line(files=dict(session.baseline_files), metric=session.task.baseline.val)
        # the port's `except Exception` around its main loop: the run goes on to the final test
        with caught_in_loop(session, self.options.loop_error, "autoresearch main loop"):
            while session.steps_left > 0:
                action = "draft" if session.steps_used == 0 else "improve"
                climber.step(line, lambda: climber.idea_prompt(line), action=action)
