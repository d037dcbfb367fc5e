"""Auditing one run directory: the cheap signals always, the judges when asked; the audit is saved in
the run record (``RunRecord.audit``) and returned."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..llm import LLMSettings, LLMSetupError, PriceTable, resolve
from ..record import RecordUnreadable, RunRecord, RunStore
from ..spec import TaskSpec
from . import evidence as evidence_module
from .judge import JudgeSpec, judge_run
from .records import Finding, JudgeOutcome, RunAudit
from .rubric import load_rubric
from .signals import Limits, signals

# the embedded model reads some 8k tokens: its judge is shown less of the run
LOCAL_EVIDENCE_BUDGET = 8_000


@dataclass(frozen=True)
class JudgeConfig:
    """Who judges and within which limits: ``base`` carries the LLM options shared by every judge (price
    table, timeouts, retries, ``max_cost_usd`` per run judged)."""

    judges: tuple[JudgeSpec, ...]
    base: LLMSettings = field(default_factory=LLMSettings)
    evidence_budget: int = evidence_module.DEFAULT_BUDGET

    def preflight(self) -> list[str]:
        """Each judge's provider:model; raises LLMSetupError with one line (no key, no price for a budget)."""
        names = []
        prices = PriceTable.load(self.base.price_table)
        for spec in self.judges:
            endpoint = resolve(spec.model, spec.provider, spec.base_url)
            if self.base.max_cost_usd is not None and prices.lookup(endpoint.provider.name, endpoint.model) is None:
                raise LLMSetupError(f"--max-cost-usd needs the price of judge {endpoint.model!r} "
                                    f"({endpoint.provider.name}), which the price table lacks; give it with --price-table FILE")
            names.append(f"{endpoint.provider.name}:{endpoint.model}")
        return names

    def budget_for(self, spec: JudgeSpec) -> int:
        try:
            local = resolve(spec.model, spec.provider, spec.base_url).provider.name == "local"
        except LLMSetupError:
            local = False
        return min(self.evidence_budget, LOCAL_EVIDENCE_BUDGET) if local else self.evidence_budget


def audit_run(run_dir: Path, spec: TaskSpec | None = None, judge: JudgeConfig | None = None,
              record: RunRecord | None = None) -> RunAudit:
    """Audit the run in ``run_dir`` (its record, or ``record`` when the caller holds it) and save the audit
    into its record."""
    store = RunStore(Path(run_dir))
    record = record if record is not None else store.load()
    unreadable = []
    try:
        steps = store.load_steps()
    except RecordUnreadable as exc:
        # the steps hold what the audit checks: a run whose steps cannot be read is flagged, never passed
        steps = []
        unreadable.append(Finding(source="signal", kind="unreadable_record", reason=str(exc)[:600]))
    audit = RunAudit(signals=unreadable + signals(record, steps, store.dir, Limits.of(spec.audit if spec else None)))
    if judge is not None and judge.judges:
        rubric = load_rubric()
        audit.rubric = rubric.id
        shown: dict[int, evidence_module.RunEvidence | str] = {}
        for one in judge.judges:
            budget = judge.budget_for(one)
            if budget not in shown:
                shown[budget] = _evidence(store.dir, record, steps, spec, budget)
            audit.judges.append(_judged(shown[budget], one, judge.base, store.dir, rubric))
    record.audit = audit
    store.save(record)
    return audit


def _judged(evidence: evidence_module.RunEvidence | str, spec: JudgeSpec, base: LLMSettings, run_dir: Path,
            rubric) -> JudgeOutcome:
    """One judge's outcome; a failure is its error line, and the other judges and runs go on."""
    if isinstance(evidence, str):
        return JudgeOutcome(judge=str(spec.model), errors=[evidence])
    try:
        return judge_run(evidence, spec, base, run_dir, rubric)
    except Exception as exc:
        return JudgeOutcome(judge=str(spec.model), errors=[f"the judge failed: {type(exc).__name__}: {exc}"[:300]])


def _evidence(run_dir: Path, record: RunRecord, steps: list, spec: TaskSpec | None,
              budget: int) -> evidence_module.RunEvidence | str:
    """What the judges are shown, or why it could not be built (one line: the judge reports it as its error)."""
    try:
        return evidence_module.build(run_dir, record, steps, spec, budget)
    except Exception as exc:  # built from what the run holds: one run's evidence must not end the audit
        return f"the evidence could not be built: {type(exc).__name__}: {exc}"[:300]
