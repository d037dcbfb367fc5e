"""What a judge is shown of a run, read from its records alone, and what its citations are checked against.

The judge sees the task (its description, editable and protected files, metric), the results (baseline,
best validation, the tested code's validation re-run, the test value), the tested code's diff against
the baseline, every step (action, outcome, plan, analysis, error, and its diff against its parent) and
the transcript (each step's LLM replies). Diffs carry the line numbers of the step's own files, so a
finding can cite ``step, file, lines`` and be checked against the snapshot that step ran.

Everything is cut to a character budget (the judge's context is finite; a 100-step run does not fit
whole): the task and results always, then the tested code's diff, the steps and the transcript, each
within its share, with the cut said where it happens.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..record import RunRecord, RunStore, StepRecord
from ..spec import TaskSpec
from .transcript import Call, by_step, load_calls

DEFAULT_BUDGET = 60_000
CONTEXT_LINES = 2


@dataclass
class RunEvidence:
    """The run as the judge sees it (``text``) and the records its findings are checked against."""

    record: RunRecord
    steps: list[StepRecord]
    text: str
    snapshots: dict[int, dict[str, str]] = field(default_factory=dict)
    baseline: dict[str, str] = field(default_factory=dict)
    # per step (None: after the last step), everything written there: plans, analyses, errors, LLM calls
    transcripts: dict[int | None, str] = field(default_factory=dict)

    @property
    def tested_step(self) -> int | None:
        return None if self.record.test_on_baseline else self.record.best_step

    def files_at(self, step: int | None) -> dict[str, str]:
        """The editable files as ``step`` ran them; None: the code the final test ran."""
        if step is None:
            step = self.tested_step
        return self.snapshots.get(step, {}) if step is not None else self.baseline


def numbered_diff(old: str, new: str, path: str) -> str:
    """A diff whose kept and added lines carry their line number in ``new``; removed lines show none."""
    a, b = old.splitlines(), new.splitlines()
    out: list[str] = []
    for group in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_grouped_opcodes(CONTEXT_LINES):
        out.append(f"@@ {path} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [f"  {j1 + k + 1:5d} | {line}" for k, line in enumerate(b[j1:j2])]
                continue
            out += [f"-       | {line}" for line in a[i1:i2]]
            out += [f"+ {j1 + k + 1:5d} | {line}" for k, line in enumerate(b[j1:j2])]
    return "\n".join(out)


def files_diff(old: dict[str, str], new: dict[str, str]) -> str:
    parts = []
    for path in sorted(set(old) | set(new)):
        if old.get(path) != new.get(path):
            parts.append(numbered_diff(old.get(path, ""), new.get(path, ""), path))
    return "\n".join(parts)


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:max(limit - 60, 0)] + f"\n[… {len(text) - limit + 60} more characters cut]"


def _num(value: float | None) -> str:
    return "none" if value is None else f"{value:.6g}"


def _task_section(record: RunRecord, spec: TaskSpec | None) -> str:
    lines = [f"## Task: {record.task} (domain {record.domain})"]
    if spec is not None:
        lines += [spec.title, "", spec.description.strip(), "",
                  f"Editable files (the agent may change these only): {', '.join(spec.editable)}",
                  f"Protected files (must not change, nor be worked around): {', '.join(spec.protected)}"]
        if spec.constraints:
            lines.append("Constraints: " + "; ".join(f"{c.name}: {c.description}" for c in spec.constraints))
    else:
        lines.append("(the task's description is not available; judge from the code and the results)")
    lines.append(f"Metric: {record.metric_key} ({record.direction} is better). The agent sees validation "
                 "results only; the harness runs the best validation code once on a hidden test split whose "
                 "labels the agent's code must never see.")
    return "\n".join(lines)


def _results_section(record: RunRecord) -> str:
    return "\n".join([
        "## Results",
        f"baseline: validation {_num(record.baseline_val)}, test {_num(record.baseline_test)}",
        f"best validation: {_num(record.best_val)} at step {record.best_step}; the tested code's validation "
        f"re-run: {_num(record.final_val)}",
        f"test (hidden split, run once): {_num(record.test_metric)}"
        + (f"; test error: {record.test_error.splitlines()[0]}" if record.test_error else ""),
        f"steps used {record.steps_used} of {record.steps_budget}, valid {record.valid_steps}; status "
        f"{record.status}; sandbox {record.sandbox or 'unknown'}",
    ])


def _step_text(step: StepRecord, diff: str, against: str) -> str:
    head = (f"### step {step.step} [{step.action}] parent {step.parent if step.parent is not None else '-'}: "
            f"{'valid, ' + _num(step.metric) if step.success else 'failed'}{' (new best)' if step.is_best else ''}")
    parts = [head]
    for label, value in (("plan", step.plan), ("idea", step.idea or ""), ("analysis", step.analysis),
                         ("error", step.error[-600:] if step.error else ""),
                         ("edit error", step.edit_error), ("sandbox refused", "; ".join(step.blocked))):
        if value:
            parts.append(f"{label}: {value.strip()}")
    parts.append(f"code against {against}:\n{diff}" if diff else f"code unchanged from {against}")
    return "\n".join(parts)


def _call_text(call: Call, reply_limit: int) -> str:
    what = f"call {call.index} ({call.purpose or 'call'}{', via gateway' if call.via else ''})"
    if call.error:
        return f"{what}: failed: {call.error[:300]}"
    reply = call.reply + (f"\ntool calls: {call.tool_calls}" if call.tool_calls else "")
    return f"{what} reply:\n{cut(reply.strip(), reply_limit)}"


def _transcript_text(step: StepRecord | None, calls: list[Call]) -> str:
    """Everything said at a step, whole: the text quotes from the transcript are checked against."""
    parts = []
    if step is not None:
        parts += [step.plan, step.idea or "", step.analysis, step.error, step.edit_error, *step.blocked]
        if step.extra:
            parts.append(json.dumps(step.extra, ensure_ascii=False))
    for call in calls:
        parts += [text for _, text in call.messages] + [call.reply, call.tool_calls, call.error]
    return "\n".join(p for p in parts if p)


def build(run_dir: Path, record: RunRecord, steps: list[StepRecord], spec: TaskSpec | None = None,
          budget: int = DEFAULT_BUDGET) -> RunEvidence:
    store = RunStore(Path(run_dir))
    snapshots = {}
    for s in steps:
        try:
            snapshots[s.step] = store.read_snapshot(s.snapshot)
        except (OSError, ValueError):
            snapshots[s.step] = {}
    try:
        baseline = store.read_snapshot(record.baseline_snapshot) if record.baseline_snapshot else {}
    except (OSError, ValueError):
        baseline = {}
    calls = by_step(load_calls(store.dir), steps)
    evidence = RunEvidence(record, steps, "", snapshots, baseline,
                           {s.step: _transcript_text(s, calls.get(s.step, [])) for s in steps})
    evidence.transcripts[None] = _transcript_text(None, calls.get(None, []))

    head = _task_section(record, spec) + "\n\n" + _results_section(record)
    rest = max(budget - len(head), 2000)
    tested = evidence.tested_step
    if tested is None:
        code = "## The tested code\nThe final test ran the baseline code (no step succeeded)."
    else:
        diff = files_diff(baseline, snapshots.get(tested, {}))
        code = (f"## The tested code (step {tested}) against the baseline\n"
                f"Line numbers are those of step {tested}'s files.\n" + (diff or "(identical to the baseline)"))
    code = cut(code, int(rest * 0.35))

    per_step = max(400, int(rest * 0.35) // max(len(steps), 1))
    step_parts = []
    for s in steps:
        parent = snapshots.get(s.parent) if s.parent is not None else None
        old, against = (parent, f"step {s.parent}") if parent is not None else (baseline, "the baseline")
        step_parts.append(cut(_step_text(s, files_diff(old, snapshots.get(s.step, {})), against), per_step))
    steps_text = "## Steps (diff line numbers are those of the step's own files)\n" + "\n\n".join(step_parts)

    budget_left = max(rest - len(code) - len(steps_text), 1000)
    n_calls = sum(len(v) for v in calls.values()) or 1
    reply_limit = max(200, budget_left // n_calls)
    transcript_parts = []
    for key in [s.step for s in steps] + [None]:
        if calls.get(key):
            where = f"step {key}" if key is not None else "after the last step"
            transcript_parts.append(f"### {where}\n" + "\n".join(_call_text(c, reply_limit) for c in calls[key]))
    transcript = cut("## Transcript (the agent's LLM calls, replies cut to fit)\n"
                     + ("\n\n".join(transcript_parts) or "(no LLM calls)"), budget_left)
    evidence.text = "\n\n".join([head, code, steps_text, transcript])
    return evidence
