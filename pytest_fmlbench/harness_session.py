"""The harness's side of a run's session: the workspace, the budget, the journal, the records.

Agents never hold this object. They hold a ``pytest_fmlbench.session.Session``, a client whose every
call is a message served here (``agent_host.server``), in whichever process the agent runs.
"""

from __future__ import annotations

import threading

from collections.abc import Callable
from typing import Any

from .editor import Edit, EditResult
from .journal import Journal
from .progress import failure_reason
from .record import RunRecord, RunStore, StepRecord, Usage, files_sha256, now
from .session import BudgetExhausted, StepResult
from .integrity import Manifest
from .spec import TaskSpec
from .workspace import Workspace


class HarnessSession:
    def __init__(
        self,
        spec: TaskSpec,
        workspace: Workspace,
        store: RunStore,
        record: RunRecord,
        manifest: Manifest,
        *,
        prior_steps: list[StepRecord] = (),
        prior_baseline_run: StepRecord | None = None,
        llm: Any = None,
        log: Callable[[str], None] = lambda msg: None,
        progress: Callable[..., None] = lambda **fields: None,
    ):
        self.task = spec
        self._workspace = workspace
        self._store = store
        self._record = record
        self._manifest = manifest
        self._prior = list(prior_steps)
        self._prior_baseline_run = prior_baseline_run
        self.resumed_after = len(self._prior)
        self.llm = llm
        # an LLM client charges each call's usage here, so it lands in the next step's record
        if llm is not None and callable(getattr(llm, "bind_usage", None)):
            llm.bind_usage(self.add_usage)
        self.log = log
        # live progress for the controller's display (see progress.py); never part of the record
        self._progress = progress
        self.journal = Journal(spec.metric.direction)
        # the agent's own RNG is seeded from this, on its side of the protocol
        self.rng_seed = f"{record.seed}:{record.task}:{record.agent}"
        self.baseline_files = workspace.editor.read()
        self._pending_usage = Usage()
        # usage also arrives from the LLM gateway's threads (a coding tool's calls) while a step runs
        self._usage_lock = threading.Lock()
        self.replayed_steps = 0

    # -- what the agent reads (through the protocol) ---------------------------------------------
    @property
    def steps_total(self) -> int:
        return self._record.steps_budget

    @property
    def steps_used(self) -> int:
        return len(self.journal)

    @property
    def steps_left(self) -> int:
        return self.steps_total - self.steps_used

    @property
    def files(self) -> dict[str, str]:
        return self._workspace.editor.read()

    @property
    def best(self) -> StepRecord | None:
        return self.journal.best_node()

    def files_of(self, step: int) -> dict[str, str]:
        return self._store.read_snapshot(self.journal.get(step).snapshot)

    @property
    def workspace_dir(self):
        """The search workspace: what an agent's working copy is copied from."""
        return self._workspace.path

    def keep_recorded_steps(self) -> int:
        """On a resumed run, take the recorded steps as they are, without replaying them; returns how many.

        For an agent that cannot replay its decisions (a coding tool starts a new session on a resumed run,
        told what the recorded steps did): its next step comes after them.
        """
        kept = self._prior[len(self.journal):]
        for node in kept:
            self.journal.add(node)
        self.replayed_steps += len(kept)
        if kept:
            self._take_usage()
            spent = sum((node.usage for node in kept), Usage())
            # their model calls are not replayed: without this, a resumed run's budgets would start from zero
            if self.llm is not None and callable(getattr(self.llm, "count_spent", None)):
                self.llm.count_spent(spent)
            self._refresh_record()
            self._report_progress(kept[-1])
        return len(self.journal)

    # -- what the agent does (through the protocol) ----------------------------------------------
    def edit(self, edits: list[Edit]) -> EditResult:
        return self._workspace.editor.apply(edits)

    def set_files(self, files: dict[str, str]) -> EditResult:
        return self._workspace.editor.set_files(files)

    def add_usage(self, usage: Usage) -> None:
        """LLM usage spent since the last step; it is charged to the next step's record."""
        with self._usage_lock:
            self._pending_usage = self._pending_usage + usage

    def _take_usage(self) -> Usage:
        with self._usage_lock:
            taken, self._pending_usage = self._pending_usage, Usage()
        return taken

    def annotate(self, step: int, *, analysis: str | None = None, extra: dict[str, Any] | None = None) -> None:
        """Add what the agent learnt after a step ran (e.g. an LLM review) to its record; costs no step."""
        node = self.journal.get(step)
        changed = False
        if analysis is not None and node.analysis != analysis:
            node.analysis = analysis
            changed = True
        if extra and any(node.extra.get(k) != v for k, v in extra.items()):
            node.extra = {**node.extra, **extra}
            changed = True
        if changed:
            # recorded steps not yet replayed stay in the file: a crash during a resume loses nothing
            self._store.rewrite_steps(self.journal.nodes + self._prior[len(self.journal):])

    def settle_usage(self) -> None:
        """Usage spent after the last step (its review, a call that crossed a budget) joins the run total."""
        pending = self._take_usage()
        if pending.calls:
            self._record.usage = self._record.usage + pending
            self._store.save(self._record)

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
        if self.steps_left <= 0:
            raise BudgetExhausted(f"all {self.steps_total} steps used")
        number = self.steps_used + 1
        files = self.files
        replay = self._replayable(number, files, action)
        if replay is not None:
            self.journal.add(replay)
            self.replayed_steps += 1
            self._take_usage()  # its calls were answered from the ledger: its record holds their usage already
            self._refresh_record()
            self._report_progress(replay)
            return self._result(replay, replayed=True)

        self._progress(step=number, action=action)
        started = now()
        outcome = self._workspace.run_split("val", f"step_{number:04d}", manifest=self._manifest)
        snapshot, sha = self._store.write_snapshot(number, files)
        best_before = self.best
        node = StepRecord(
            step=number, parent=parent, action=action, plan=plan, idea=idea,
            edit_applied=edit.applied if edit else True, edit_error=edit.error if edit else "",
            success=outcome.success, metric=outcome.metric if outcome.success else None,
            metrics=outcome.metrics, constraints=outcome.constraints, error=outcome.error, stderr=outcome.stderr,
            analysis=analysis, duration_s=outcome.duration_s, cpu_s=outcome.cpu_s, started_at=started,
            usage=self._take_usage(), snapshot=snapshot, snapshot_sha256=sha, extra=extra or {},
            blocked=outcome.blocked,
        )
        node.is_best = node.success and node.metric is not None and (
            best_before is None or self.journal.better(node.metric, best_before.metric)
        )
        self.journal.add(node)
        self._store.append_step(node)
        self._refresh_record()
        self._report_progress(node)
        verdict = f"{node.metric:.6g}" if node.success else "failed"
        self.log(f"{self.task.id} step {number}/{self.steps_total} [{action}] -> {verdict}{' (best)' if node.is_best else ''}")
        return self._result(node)

    def run_baseline(self) -> tuple[StepRecord, bool]:
        """The baseline code's validation run, outside the step budget: (its record, whether it was replayed).

        OpenEvolve's FML-bench port evaluates its seed program so before its first step (its
        ``_seed_population``): no step is spent, the workspace holds the baseline's files afterwards, and
        the measured value competes for the final test. Run at most once: a second call, and a resumed run
        whose record holds it, get the recorded one.
        """
        if self._record.baseline_run is not None:
            return self._record.baseline_run, True
        files = self.baseline_files
        restored = self._workspace.editor.set_files(files)
        if not restored.applied:
            raise RuntimeError(f"could not restore the baseline's files: {restored.error}")
        prior = self._prior_baseline_run
        if prior is not None and prior.snapshot_sha256 == files_sha256(files):
            self._record.baseline_run = prior
            self._store.save(self._record)
            return prior, True
        self._progress(action="baseline run")
        started = now()
        outcome = self._workspace.run_split("val", "baseline_run", manifest=self._manifest)
        snapshot = self._store.write_named_snapshot("baseline", files)
        node = StepRecord(
            step=0, action="baseline", plan="the baseline code, run outside the step budget",
            success=outcome.success, metric=outcome.metric if outcome.success else None, metrics=outcome.metrics,
            constraints=outcome.constraints, error=outcome.error, stderr=outcome.stderr,
            duration_s=outcome.duration_s, cpu_s=outcome.cpu_s, started_at=started, snapshot=snapshot,
            snapshot_sha256=files_sha256(files),
            blocked=outcome.blocked,
        )
        self._record.baseline_run = node
        self._store.save(self._record)
        verdict = f"{node.metric:.6g}" if node.success else "failed"
        self.log(f"{self.task.id} baseline run (outside the step budget) -> {verdict}")
        return node, False

    # -- internals ------------------------------------------------------------------------------
    def _report_progress(self, node: StepRecord) -> None:
        rec = self._record
        self._progress(
            step=node.step, done=node.step, action=node.action, best_val=rec.best_val,
            failed=rec.steps_used - rec.valid_steps, tokens=rec.usage.total_tokens, cost_usd=rec.usage.cost_usd,
            last={"action": node.action, "success": node.success, "metric": node.metric,
                  "reason": "" if node.success else failure_reason(node.error)},
        )

    def _replayable(self, number: int, files: dict[str, str], action: str) -> StepRecord | None:
        """On resume, a recorded step whose code and action match is reused instead of re-run."""
        if number > len(self._prior):
            return None
        recorded = self._prior[number - 1]
        if recorded.snapshot_sha256 == files_sha256(files) and recorded.action == action:
            return recorded
        # the agent diverged from the record: what follows in it no longer describes this run
        self._prior = self._prior[: number - 1]
        self._store.rewrite_steps(self._prior)
        return None

    def _result(self, node: StepRecord, replayed: bool = False) -> StepResult:
        return StepResult(node.step, node.success, node.metric, node.metrics, node.error, node.is_best, replayed)

    def _refresh_record(self) -> None:
        rec = self._record
        rec.steps_used = len(self.journal)
        rec.valid_steps = len(self.journal.good_nodes)
        best = self.best
        rec.best_step = best.step if best else None
        rec.best_val = best.metric if best else None
        total = Usage()
        for node in self.journal:
            total = total + node.usage
        rec.usage = total
        self._store.save(rec)
