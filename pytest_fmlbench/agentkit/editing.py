"""The single-call code editor every FML-bench port shares: one instruction in, one LLM call, edits out.

The original replaced Aider with a thin editor so that no agent gets hidden help: the agent writes an
instruction; the editor shows the task, the optimisation target, the editable files (whole up to 500
newlines, to be changed with SEARCH/REPLACE blocks beyond), the error context the agent passes, the
instruction, fixed implementation guidelines and the reply format; the reply's blocks become the edit.
One call, no re-asks: a reply without usable code, or a call that fails after its retries, is an edit
that does not apply, and the step still runs (the unchanged code) and costs its step.

Two modes (``--agent-opt editor=...`` of every agent that uses it):

- ``port`` (the default), the port's editor (code_editor.py): its prompt sections in its order, no plan
  asked for ("nothing outside this format"); its reply format only (``### FILE:`` headers); each whole
  file or SEARCH/REPLACE block applied on its own, a failing one skipped; the first occurrence of a
  SEARCH part replaced; code calling a blocklisted function (file deletion, moves, copies, processes,
  dynamic imports, exec/eval) refused. The step records which blocks were skipped and why.
- ``strict``, this project's earlier editor: a plan first, then fenced blocks read leniently (the path in
  the fence, a comment or the line before); all edits applied or none; each SEARCH part must match
  exactly once (trailing whitespace forgiven); no blocklist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, field_validator

from ..editor import Edit, EditResult, WholeFile, apply_each
from ..llm.backends import LENGTH_LIMIT_REASONS
from ..llm.errors import LLMCallError
from ..llm.sampling import PORT_SEED
from ..record import StepRecord
from ..session import Session
from .base import AgentOptions
from .port_task_text import PortPrompt, load_port_prompts, port_prompt
from .prompting import (
    parse_port_reply, parse_reply, render_files, render_port_file, reply_format, tail, uses_search_replace,
)

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
# the port's editor sends no length limit (code_editor.py 147-155): neither do ours by default (the
# Messages API, which needs one, then gets the model's maximum)
DEFAULT_MAX_OUTPUT_TOKENS: int | None = None
# the ports' own calls (analysis, idea, memory) go through their llm.py, which asks for at most
# MAX_NUM_TOKENS = 8192 (llm.py 14), with seed 0 (sent to gpt and o-series models: llm.sampling)
PORT_LLM_MAX_OUTPUT_TOKENS = 8192
PORT_LLM_SEED = PORT_SEED


def cut_off_note(limit: int | None) -> str:
    """What a step's error adds when the reply ended on its length limit."""
    return (f"(the reply was cut off at {limit} tokens)" if limit is not None
            else "(the reply was cut off at the model's output limit)")


def port_llm_limit(editor_limit: int | None) -> int:
    """The length limit of a port llm.py call: 8,192, or an agent's editor limit when that is lower."""
    return PORT_LLM_MAX_OUTPUT_TOKENS if editor_limit is None else min(PORT_LLM_MAX_OUTPUT_TOKENS, editor_limit)

EditorMode = Literal["port", "strict"]


class EditorOptions(AgentOptions):
    """Options of every agent that edits through the shared editor."""

    editor: EditorMode = Field(
        "port", description="the shared editor: 'port' = FML-bench's (each file or SEARCH/REPLACE block on its "
        "own, bad ones skipped, first match replaced, blocklisted calls refused, no plan asked); 'strict' = all "
        "or nothing, each SEARCH matching once, no blocklist, a plan first")
    port_task_text: dict[str, PortPrompt] | None = Field(
        None, description="PATH of the original FML-bench's checkout (or its ml_tasks folder): on full-profile tasks "
        "the prompts show the original's prompt.json task_description instead of ours (AI Scientist v1's idea "
        "persona: its system line); none (the default) = our description and constraints, which describe the "
        "task as this harness runs it")

    _load_port_task_text = field_validator("port_task_text", mode="before")(load_port_prompts)


def port_value(value: float | None, missing: str = "None") -> str:
    """A metric as the ports print it into prompts: Python's own text of the float, every digit of it."""
    return missing if value is None else str(value)


def metric_line(session: Session, value: float | None, label: str = "Metric") -> str:
    """The one line every port uses to show a metric to the model, so no agent sees more than another."""
    metric = session.task.metric
    return f"{label}: {metric.key} = {port_value(value, 'N/A')} ({metric.direction} is better)"


def task_context(session: Session, options: AgentOptions | None = None) -> str:
    """The task every prompt shows: ours (the description and the constraints), or the original's
    prompt.json task_description when the agent's options give it for this task (``port_task_text``)."""
    original = port_prompt(session.task, getattr(options, "port_task_text", None))
    if original is not None:
        return original.task_description
    spec = session.task
    parts = [spec.description.strip()]
    if spec.constraints:
        parts.append("Constraints (a run breaking one fails): "
                     + "; ".join(f"{c.name}: {c.description}" for c in spec.constraints))
    return "\n".join(parts)


def run_error(record: StepRecord) -> str:
    """A step's error as the port's executor hands it to its agents: '' when the run succeeded; for a
    failed experiment its standard error (or "Timeout after N seconds"); for a failure after the
    experiment (evaluation, a constraint) and in records older than the ``stderr`` field, our message."""
    if record.success:
        return ""
    return record.stderr if record.stderr is not None else record.error


def complete_or(session: Session, messages: list[dict[str, str]], fallback: Callable[[LLMCallError], str],
                **kwargs) -> str:
    """One LLM call's text; when the call fails for good (after its retries), what ``fallback`` makes of
    the error, as the ports do around their analysis, idea and memory calls."""
    try:
        return session.llm.complete(messages, **kwargs).text
    except LLMCallError as exc:
        return fallback(exc)


@dataclass(frozen=True)
class EditReply:
    plan: str  # the prose before the code
    edits: list[Edit] = field(default_factory=list)
    error: str = ""  # why the reply yields no edit ('' when it does)
    finish_reason: str | None = None
    problems: tuple[str, ...] = ()  # blocks of the reply that are no edit (port mode: skipped at apply)
    text: str = ""  # the raw reply ('' when the call failed)
    call_failed: bool = False


class CodeEditor:
    def __init__(self, session: Session, *, temperature: float | None = None,
                 max_output_tokens: int | None = DEFAULT_MAX_OUTPUT_TOKENS, mode: EditorMode = "port",
                 options: AgentOptions | None = None):
        self.session = session
        self.temperature = temperature
        self.max_output_tokens = max_output_tokens
        self.mode = mode
        self.options = options  # the agent's: which task text the prompt shows (``task_context``)

    # -- the prompt -----------------------------------------------------------------------------
    def messages(self, instruction: str, files: dict[str, str], error_context: str = "") -> list[dict[str, str]]:
        if self.mode == "strict":
            return self._strict_messages(instruction, files, error_context)
        return self._port_messages(instruction, files, error_context)

    def _port_messages(self, instruction: str, files: dict[str, str], error_context: str) -> list[dict[str, str]]:
        """The port's sections in its order (code_editor.py 196-289), in our words."""
        metric = self.session.task.metric
        small = {p: c for p, c in files.items() if not uses_search_replace(c)}
        large = {p: c for p, c in files.items() if uses_search_replace(c)}
        parts = ["## Task context\n" + task_context(self.session, self.options),
                 f"## Optimisation target\nMetric: {metric.key} ({metric.direction} is better)"]
        if small:
            parts.append("## Files to change (reply with each changed file complete)")
            parts += [render_port_file(p, c) for p, c in small.items()]
        if large:
            parts.append("## Large files to change (reply with SEARCH/REPLACE blocks)")
            parts += [render_port_file(p, c) for p, c in large.items()]
        if error_context:
            parts.append(f"## Previous execution error\n```\n{error_context}\n```")
        parts += ["## Instruction\n" + instruction, GUIDELINES, port_reply_format(bool(small), bool(large))]
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]

    def _strict_messages(self, instruction: str, files: dict[str, str], error_context: str) -> list[dict[str, str]]:
        metric = self.session.task.metric
        parts = [
            "## Task\n" + task_context(self.session, self.options),
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

    # -- the call -------------------------------------------------------------------------------
    def request(self, instruction: str, files: dict[str, str] | None = None, *, error_context: str = "",
                purpose: str = "edit") -> EditReply:
        """One LLM call; ``files`` is what the model sees and edits (default: the current files). A call
        that fails after its retries is a reply without edits (the port's "LLM call failed")."""
        files = self.session.files if files is None else files
        try:
            reply = self.session.llm.complete(self.messages(instruction, files, error_context),
                                              temperature=self.temperature, max_output_tokens=self.max_output_tokens,
                                              purpose=purpose)
        except LLMCallError as exc:
            return EditReply("", [], f"LLM call failed: {exc}", None, call_failed=True)
        return self.read(reply.text, files, reply.finish_reason)

    def read(self, text: str, files: dict[str, str], finish_reason: str | None = None) -> EditReply:
        """A reply's edits of ``files``, read the way this editor's mode asks for them."""
        parsed = parse_reply(text, files) if self.mode == "strict" else parse_port_reply(text, files)
        error = "" if parsed.edits else "no usable code in the reply: " + parsed.error
        if error and finish_reason in LENGTH_LIMIT_REASONS:
            error += " " + cut_off_note(self.max_output_tokens)
        return EditReply(parsed.plan, parsed.edits, error, finish_reason, tuple(parsed.problems), text)

    # -- applying -------------------------------------------------------------------------------
    def apply(self, reply: EditReply) -> EditResult:
        """Apply the reply's edits to the workspace: the port's way (each on its own), or all or nothing."""
        if not reply.edits:
            return EditResult(applied=False, error=reply.error)
        return self.noting_cut_off(self.apply_edits(reply.edits, reply.problems), reply.finish_reason)

    def noting_cut_off(self, result: EditResult, finish_reason: str | None) -> EditResult:
        """``result``, its error saying so when the reply ended on its length limit: its last blocks may be
        lost, and the step's ``edit_error`` is where a reader of the record looks."""
        if finish_reason not in LENGTH_LIMIT_REASONS:
            return result
        note = cut_off_note(self.max_output_tokens).strip("()")
        return EditResult(result.applied, result.changed, "; ".join(p for p in (result.error, note) if p))

    def apply_edits(self, edits: list[Edit], problems: tuple[str, ...] = ()) -> EditResult:
        if not edits:
            return EditResult(applied=False, error="the edit contains no file changes")
        if self.mode == "strict":
            return self.session.edit(edits)
        done = apply_each(self.session.files, edits)
        skipped = [*problems, *done.skipped]
        if not done.written:
            return EditResult(applied=False, error="no block applied: " + "; ".join(skipped))
        result = self.session.edit([WholeFile(path, done.files[path]) for path in done.written])
        if not result.applied:
            return result
        note = f"applied in part; skipped: {'; '.join(skipped)}" if skipped else ""
        return EditResult(applied=True, changed=result.changed, error=note)


def port_reply_format(small: bool, large: bool) -> str:
    """The port's output-format section (code_editor.py 255-289): the forms for the files shown whole and
    for the large ones, then its three rules."""
    sections = ["## Reply format"]
    if small:
        sections.append("For a file shown whole, reply with the complete changed file in this form:\n"
                        "### FILE: <path>\n```python\n<the complete file>\n```")
    if large:
        sections.append("For a large file, reply with only the changed parts, as SEARCH/REPLACE blocks:\n"
                        "### FILE: <path>\n<<<<<<< SEARCH\n<the existing lines, copied exactly>\n=======\n"
                        "<their replacement>\n>>>>>>> REPLACE\n\nOne file may take several SEARCH/REPLACE blocks.")
    sections.append("Rules:\n- Write each path exactly as shown above.\n- All code must be valid Python.\n"
                    "- Write no explanations outside this format.")
    return "\n\n".join(sections)


def restore(session: Session, files: dict[str, str]) -> None:
    """Make the editable files ``files`` again, writing only those that differ."""
    current = session.files
    differing = {p: c for p, c in files.items() if current.get(p) != c}
    if differing:
        restored = session.set_files(differing)
        if not restored.applied:
            raise RuntimeError(f"cannot restore a recorded snapshot: {restored.error}")
