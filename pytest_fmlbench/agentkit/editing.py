"""The single-call code editor every FML-bench port shares: one instruction in, one LLM call, edits out.

The original replaced Aider with a thin editor so that no agent gets hidden help: the agent writes an
instruction; the editor shows the task, the optimisation target, the editable files (whole, or to be
changed with SEARCH/REPLACE blocks beyond 500 lines), the previous run's error tail when there is one,
the instruction and fixed implementation guidelines; the reply's code blocks become the edit. One call,
no re-asks: a reply without usable code is an edit that does not apply, and the step still runs (the
unchanged code) and costs its step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..editor import Edit, EditResult
from ..session import Session
from .prompting import parse_reply, render_files, reply_format, tail

SYSTEM = (
    "You change existing Python code to improve a machine-learning method.\n"
    "- You get the files you may change and the task for context.\n"
    "- Make targeted, minimal changes that carry out the instruction.\n"
    "- Keep imports, class structure and function signatures unless the change needs otherwise.\n"
    "- Small files: give the complete new file. Large files: give SEARCH/REPLACE blocks for the changed parts."
)
GUIDELINES = (
    "## Implementation guidelines\n"
    "- Write complete, self-contained code: no skipped sections, no placeholders.\n"
    "- Do not add command-line arguments.\n"
    "- Make sure the code runs without errors.\n"
    "- Change no file other than the ones shown above."
)
# the port leaves the reply length to the provider; its editor names 16384 as the completion budget
DEFAULT_MAX_OUTPUT_TOKENS = 16384


def metric_line(session: Session, value: float | None, label: str = "Metric") -> str:
    """The one line every port uses to show a metric to the model, so no agent sees more than another."""
    metric = session.task.metric
    shown = "N/A" if value is None else f"{value:.6g}"
    return f"{label}: {metric.key} = {shown} ({metric.direction} is better)"


def task_context(session: Session) -> str:
    spec = session.task
    parts = [spec.description.strip()]
    if spec.constraints:
        parts.append("Constraints (a run breaking one fails): "
                     + "; ".join(f"{c.name}: {c.description}" for c in spec.constraints))
    return "\n".join(parts)


@dataclass(frozen=True)
class EditReply:
    plan: str  # the prose before the code: the plan the instruction asked for
    edits: list[Edit] = field(default_factory=list)
    error: str = ""  # why the reply yields no edit ('' when it does)
    finish_reason: str | None = None


class CodeEditor:
    def __init__(self, session: Session, *, temperature: float | None = None,
                 max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS):
        self.session = session
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens

    def messages(self, instruction: str, files: dict[str, str], error_context: str = "") -> list[dict[str, str]]:
        metric = self.session.task.metric
        parts = [
            "## Task\n" + task_context(self.session),
            f"## Optimisation target\nMetric: {metric.key} ({metric.direction} is better)",
            "## Files you may change\n" + render_files(files),
        ]
        if error_context:
            parts.append("## Previous execution error\n```\n" + tail(error_context) + "\n```")
        parts += [
            "## Instruction\n" + instruction.strip(),
            GUIDELINES,
            "## Reply format\nStart with your plan in at most 5 sentences, then the code blocks, nothing else.\n\n"
            + reply_format(files),
        ]
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]

    def request(self, instruction: str, files: dict[str, str] | None = None, *, error_context: str = "",
                purpose: str = "edit") -> EditReply:
        """One LLM call; ``files`` is what the model sees and edits (default: the current files)."""
        files = self.session.files if files is None else files
        reply = self.session.llm.complete(self.messages(instruction, files, error_context),
                                          temperature=self.temperature, max_output_tokens=self.max_output_tokens,
                                          purpose=purpose)
        parsed = parse_reply(reply.text, files)
        error = "" if parsed.edits else "no usable code in the reply: " + parsed.error
        if error and reply.finish_reason == "length":
            error += f" (the reply was cut at {self.max_output_tokens} tokens)"
        return EditReply(parsed.plan, parsed.edits, error, reply.finish_reason)

    def apply(self, reply: EditReply) -> EditResult:
        """Apply the reply's edits to the workspace (all or nothing)."""
        if not reply.edits:
            return EditResult(applied=False, error=reply.error)
        return self.session.edit(reply.edits)


def restore(session: Session, files: dict[str, str]) -> None:
    """Make the editable files ``files`` again, writing only those that differ."""
    current = session.files
    differing = {p: c for p, c in files.items() if current.get(p) != c}
    if differing:
        restored = session.set_files(differing)
        if not restored.applied:
            raise RuntimeError(f"cannot restore a recorded snapshot: {restored.error}")
