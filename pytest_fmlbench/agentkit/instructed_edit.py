"""One coding call as FML-bench's shared code editor makes it: an instruction in, edited files out.

In the original, AI Scientist v1/v2, OpenEvolve (and the other ported agents) never write code in their
own prompts: each builds a natural-language *instruction*, and one editor call turns it into new file
contents. The editor's prompt holds the task description, the metric to optimise, the target files
(whole for small files, SEARCH/REPLACE for large ones), the previous run's error tail when there is
one, the instruction, a few implementation rules and the output format. One call, no retry: a reply
without usable code is a failed edit, and the unchanged code still runs and costs its step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..editor import Edit, EditResult, SearchReplace, WholeFile
from ..session import Session
from ..spec import TaskSpec
from ..agents.prompting import parse_reply, render_files, reply_format, tail

EDITOR_SYSTEM = (
    "You change existing machine-learning code so that it performs better.\n"
    "- You get the files you may change and the task they belong to.\n"
    "- Make the targeted, minimal changes the instruction asks for.\n"
    "- Keep imports, class structure and function signatures unless the change needs otherwise.\n"
    "- Small files are returned complete; large files are changed with SEARCH/REPLACE blocks."
)

_GUIDELINES = (
    "## Implementation guidelines\n"
    "- Write complete, self-contained code: no skipped sections, no placeholders.\n"
    "- Do not add command-line arguments.\n"
    "- The code must run without errors.\n"
    "- Change no file other than the target files above."
)


@dataclass(frozen=True)
class EditReply:
    """What one editor call produced. ``edits`` is empty when the reply held no usable code."""

    text: str
    plan: str
    edits: list[Edit] = field(default_factory=list)
    error: str = ""
    finish_reason: str | None = None


def metric_line(task: TaskSpec, value: float | None, label: str) -> str:
    """The one metric line every ported agent shows the model, so none sees more than another."""
    shown = "N/A" if value is None else f"{value:.6g}"
    return f"{label}: {task.metric.key} = {shown} ({task.metric.direction} is better)"


def task_context(task: TaskSpec) -> str:
    lines = [task.description.strip()]
    if task.constraints:
        lines.append("Constraints (a run breaking one fails): "
                     + "; ".join(f"{c.name}: {c.description}" for c in task.constraints))
    return "\n".join(lines)


def diff_format(files: dict[str, str]) -> str:
    """Instructions for replies that change every file with SEARCH/REPLACE blocks (OpenEvolve's diff mode)."""
    return (
        "Only these files can be changed: " + ", ".join(f"`{p}`" for p in sorted(files)) + ". "
        "Change them with SEARCH/REPLACE blocks inside a fence naming the path; each SEARCH part must copy "
        "lines of the file exactly and match once; give several blocks for several changes:\n"
        "```python path/to/file.py\n<<<<<<< SEARCH\n<exact existing lines>\n=======\n<replacement lines>\n"
        ">>>>>>> REPLACE\n```\n\nPython must parse and JSON must be valid, or the change is rejected."
    )


def editor_messages(task: TaskSpec, files: dict[str, str], instruction: str, error_context: str | None = None,
                    *, diff_only: bool = False) -> list[dict[str, str]]:
    parts = [
        "## Task context\n" + task_context(task),
        f"## Optimisation target\nMetric: {task.metric.key} ({task.metric.direction} is better)",
        "## Target files\n" + render_files(files),
    ]
    if error_context:
        parts.append("## Previous execution error\n```\n" + tail(error_context) + "\n```")
    parts.append("## Instruction\n" + instruction.strip())
    parts.append(_GUIDELINES)
    parts.append("## Output format\n" + (diff_format(files) if diff_only else reply_format(files)))
    return [{"role": "system", "content": EDITOR_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def instructed_edit(session: Session, instruction: str, files: dict[str, str], *, error_context: str | None = None,
                    temperature: float | None = None, max_output_tokens: int = 8192, purpose: str = "edit",
                    diff_only: bool = False) -> EditReply:
    """One editor call over ``files`` (the editable files, plus any agent-kept file such as notes)."""
    messages = editor_messages(session.task, files, instruction, error_context, diff_only=diff_only)
    reply = session.llm.complete(messages, temperature=temperature, max_output_tokens=max_output_tokens,
                                 purpose=purpose)
    parsed = parse_reply(reply.text, files)
    error = ""
    if not parsed.edits:
        error = "no usable code in the reply: " + parsed.error
        if reply.finish_reason == "length":
            error += f" (the reply was cut at {max_output_tokens} tokens)"
    return EditReply(reply.text, parsed.plan, parsed.edits, error, reply.finish_reason)


def split_edits(edits: list[Edit], path: str) -> tuple[list[Edit], list[Edit]]:
    """(edits of ``path``, the others): for a file the agent keeps itself, such as AI Scientist's notes."""
    mine = [e for e in edits if e.path == path]
    return mine, [e for e in edits if e.path != path]


def apply_to_text(text: str, edits: list[Edit]) -> str:
    """Apply edits of one agent-kept text file; a SEARCH block that does not match once is skipped."""
    for edit in edits:
        if isinstance(edit, WholeFile):
            text = edit.content
        elif isinstance(edit, SearchReplace) and edit.search and text.count(edit.search) == 1:
            text = text.replace(edit.search, edit.replace, 1)
    return text


def apply_edits(session: Session, reply: EditReply, edits: list[Edit] | None = None) -> EditResult:
    """Apply a reply's edits to the editable files (all or nothing); a reply without code is a failed edit."""
    edits = reply.edits if edits is None else edits
    if not edits:
        return EditResult(applied=False, error=reply.error or "the reply changes no editable file")
    return session.edit(edits)


def restore_files(session: Session, files: dict[str, str]) -> None:
    """Make the editable files ``files``, rewriting only those that differ."""
    current = session.files
    differing = {p: c for p, c in files.items() if current.get(p) != c}
    if differing:
        restored = session.set_files(differing)
        if not restored.applied:
            raise RuntimeError(f"cannot restore the code to start from: {restored.error}")
