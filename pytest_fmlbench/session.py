"""What an agent sees of a run: the task, the editor, the journal, and ``run_step`` (one validation run).

Agents are policies over this object. It holds nothing that decides a score: every call is a message
to the harness (``agent_host.protocol``), which alone owns the workspace, the budget, the records, the
best snapshot and the LLM keys, and which may be in another process than the agent.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from typing import Any

from .editor import Edit, EditResult, SearchReplace, WholeFile
from .journal import Journal
from .record import StepRecord, Usage
from .spec import TaskSpec
# agents catch them as pytest_fmlbench.session's (or the package's) names
from .stops import BudgetExhausted, RunStopped  # noqa: F401


@dataclass(frozen=True)
class StepResult:
    step: int
    success: bool
    metric: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    error: str = ""
    is_best: bool = False
    replayed: bool = False


class Session:
    """A client of the harness: ``Session(transport, hello)``, built by whatever starts the agent."""

    def __init__(self, transport, hello: dict[str, Any]):
        self._transport = transport
        self.task = TaskSpec.model_validate(hello["task"])
        self.baseline_files: dict[str, str] = dict(hello["baseline_files"])
        self._steps_total = int(hello["steps_total"])
        self.rng = random.Random(hello["rng_seed"])
        # the agent's own copy of the search tree, kept in step with the harness's by each reply
        self.journal = Journal(self.task.metric.direction)
        llm = hello.get("llm")
        self.llm = RemoteLLM(transport, llm["model"], llm["provider"]) if llm else None
        # exceptions the agent's main loop raised and the agent went on from, as its port does
        # (``agentkit.loop``); they reach the run's record with the agent's last message
        self.caught: list[str] = []
        # what the harness lent an agent that declared it needs them (None otherwise): the working copy's
        # path, the recorded step whose files it started from (None: the baseline's), and the LLM gateway
        # ({"socket", "protocol", "model"}) its tool's model calls go through
        self.workdir: str | None = hello.get("workdir")
        self.workdir_step: int | None = hello.get("workdir_step")
        self.gateway: dict[str, Any] | None = hello.get("gateway")
        # the agent's own time budget in seconds (the harness's time on its requests not counted)
        self.time_budget_s: float | None = hello.get("time_budget_s")
        # the baseline code's validation run outside the budget, once ``run_baseline`` has answered
        self.baseline_run: StepRecord | None = None
        if hello.get("steps_kept"):
            # a resumed run that goes on after its recorded steps instead of replaying them
            for node in self._ask("journal")["nodes"]:
                self.journal.add(StepRecord.model_validate(node))

    def log(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def _ask(self, op: str, **args: Any) -> dict[str, Any]:
        return self._transport.request(op, args)

    # -- what the agent reads -------------------------------------------------------------------
    @property
    def steps_total(self) -> int:
        return self._steps_total

    @property
    def steps_used(self) -> int:
        return len(self.journal)

    @property
    def steps_left(self) -> int:
        return self.steps_total - self.steps_used

    @property
    def files(self) -> dict[str, str]:
        return self._ask("files")["files"]

    @property
    def best(self) -> StepRecord | None:
        return self.journal.best_node()

    def files_of(self, step: int) -> dict[str, str]:
        return self._ask("files_of", step=step)["files"]

    # -- what the agent does --------------------------------------------------------------------
    def edit(self, edits: list[Edit]) -> EditResult:
        return _edit_result(self._ask("edit", edits=[_edit_message(e) for e in edits]))

    def set_files(self, files: dict[str, str]) -> EditResult:
        return _edit_result(self._ask("set_files", files=files))

    def annotate(self, step: int, *, analysis: str | None = None, extra: dict[str, Any] | None = None) -> None:
        """Add what the agent learnt after a step ran (e.g. an LLM review) to its record; costs no step."""
        node = self._ask("annotate", step=step, analysis=analysis, extra=extra)["node"]
        self.journal.nodes[step - 1] = StepRecord.model_validate(node)

    def run_step(
        self,
        action: str,
        *,
        plan: str = "",
        parent: int | None = None,
        edit: EditResult | None = None,
        idea: str | None = None,
        analysis: str = "",
        extra: dict[str, Any] | None = None,
    ) -> StepResult:
        """Run validation on the current editable files: one step of the budget."""
        sent = None if edit is None else {"applied": edit.applied, "changed": list(edit.changed), "error": edit.error}
        reply = self._ask("run_step", action=action, plan=plan, parent=parent, edit=sent, idea=idea,
                          analysis=analysis, extra=extra or {})
        self.journal.add(StepRecord.model_validate(reply["node"]))
        # steps asked for from several threads may be answered in any order; the journal keeps the harness's
        self.journal.nodes.sort(key=lambda node: node.step)
        return StepResult(**reply["result"])


    def run_baseline(self) -> StepResult:
        """Run validation on the baseline code outside the step budget (as OpenEvolve's port measures its seed).

        Costs no step. Afterwards the editable files are the baseline's. The measured value competes for
        the final test: the baseline code is tested unless a step beats it strictly. Once per run: a second
        call, or the same call in a resumed run, answers with the recorded run (``replayed``); its record is
        ``session.baseline_run`` (step 0, action ``baseline``). Needs protocol version 2.
        """
        reply = self._ask("run_baseline")
        self.baseline_run = StepRecord.model_validate(reply["node"])
        return StepResult(**reply["result"])


class RemoteLLM:
    """``session.llm``: each call is made, priced, budgeted and recorded by the harness, with its keys."""

    def __init__(self, transport, model: str, provider: str):
        self._transport = transport
        self.model = model
        self.provider = provider

    def complete(self, messages, *, temperature: float | None = None, max_output_tokens: int | None = 4096,
                 seed: int | None = None, purpose: str = ""):
        from .llm.client import Reply

        reply = self._transport.request("llm.complete", {
            "messages": [dict(m) for m in messages], "temperature": temperature,
            "max_output_tokens": max_output_tokens, "seed": seed, "purpose": purpose,
        })
        return Reply(reply["text"], Usage.model_validate(reply["usage"]), reply["finish_reason"], reply["replayed"])


def _edit_message(edit: Edit) -> dict[str, str]:
    if isinstance(edit, WholeFile):
        return {"kind": "whole", "path": edit.path, "content": edit.content}
    if isinstance(edit, SearchReplace):
        return {"kind": "search_replace", "path": edit.path, "search": edit.search, "replace": edit.replace}
    raise TypeError(f"an edit is a WholeFile or a SearchReplace, not {type(edit).__name__}")


def _edit_result(reply: dict[str, Any]) -> EditResult:
    return EditResult(reply["applied"], tuple(reply["changed"]), reply["error"])
