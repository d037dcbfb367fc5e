"""The task prompt a coding tool starts from: the task, where it works, ``fmlbench-validate``, and on a
resumed run what the recorded steps did.

It is the same for every tool (the adapters only pass it on), and says what the other agents' prompts
say about the task (``task_context``, ``metric_line``), so no agent learns more than another. It neither
urges the tool to spend its whole budget nor to save it: how much of it a tool uses is measured.
"""

from __future__ import annotations

from ..record import StepRecord
from ..session import Session
from .editing import metric_line, run_error, task_context
from .validate_server import COMMAND

MAX_SUMMARISED_STEPS = 100
MAX_NOTE_CHARS = 200


def build_prompt(session: Session, workdir: str, system_prompt: str = "") -> str:
    parts = [
        "You are working on a machine-learning research task in a benchmark run. Improve the task's metric by "
        f"changing the code, and measure each attempt with the `{COMMAND}` command.",
        "## The task\n" + task_context(session),
        "## Where you work\n" + _workdir_text(session, workdir),
        "## Measuring: " + COMMAND + "\n" + _validate_text(session),
    ]
    if len(session.journal):
        parts.append("## What this run did before\n" + summarise_steps(session))
    if system_prompt.strip():
        parts.append(system_prompt.strip())
    return "\n\n".join(parts) + "\n"


def _workdir_text(session: Session, workdir: str) -> str:
    spec = session.task
    start = ("the task's baseline files" if session.workdir_step is None
             else f"the files of step {session.workdir_step}, the last step recorded before this session")
    return (
        f"Your working directory, {workdir}, is a copy of the task's workspace holding {start}. You have a "
        "shell there; there is no network.\n"
        f"Files you may edit: {', '.join(spec.editable)}. Only these are taken from the working directory when "
        "you validate; changes to any other file are ignored (and noted).\n"
        f"Protected, read-only: {', '.join(spec.protected)}."
    )


def _validate_text(session: Session) -> str:
    spec = session.task
    left = session.steps_left
    return (
        f"`{COMMAND} [NOTE]` runs the validation experiment on the editable files as they are now, in the "
        "benchmark's own sandbox, and prints the metric (or the end of the error), the best result so far and "
        f"the steps left. Each call is one step of the run's budget of {session.steps_total} steps "
        f"({left} left now); once the budget is spent the command says so and runs nothing. NOTE, optional, is "
        "recorded with the step: say what you tried. Exit status: 0 the step succeeded, 1 it failed, 2 nothing "
        "was run.\n"
        f"{metric_line(session, spec.baseline.val, label='The baseline validation result')}.\n"
        "When the run ends, the benchmark tests the code of your best validated step on a hidden test split; you "
        "never see test results. End your session when you are done."
    )


def summarise_steps(session: Session) -> str:
    """One line per recorded step (the latest MAX_SUMMARISED_STEPS), then the best: a new session's memory."""
    nodes = list(session.journal)
    lines = ["This is a new session of a run that was interrupted; these steps are recorded (they count "
             "against the budget):"]
    if len(nodes) > MAX_SUMMARISED_STEPS:
        lines.append(f"- ({len(nodes) - MAX_SUMMARISED_STEPS} earlier steps not shown)")
    for node in nodes[-MAX_SUMMARISED_STEPS:]:
        lines.append("- " + _step_line(session, node))
    best = session.best
    if best is not None:
        lines.append(f"Best so far: step {best.step}, {metric_line(session, best.metric, label='validation')}.")
    else:
        lines.append("No step has succeeded yet.")
    return "\n".join(lines)


def _step_line(session: Session, node: StepRecord) -> str:
    if node.success:
        outcome = f"{session.task.metric.key} = {node.metric:.6g}"
    else:
        error = run_error(node).strip().splitlines()
        outcome = "failed" + (f": {error[-1][:MAX_NOTE_CHARS]}" if error else "")
    note = " ".join(node.plan.split())[:MAX_NOTE_CHARS]
    return f"step {node.step}: {outcome}" + (f" (note: {note})" if note else "")
