"""Auditing one run directory: the cheap signals always, the judges when asked; the audit is saved in
the run record (``RunRecord.audit``) and returned."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..llm import LLMSettings, LLMSetupError, PriceTable, resolve
from ..record import RunRecord, RunStore
from ..spec import TaskSpec
from . import evidence as evidence_module
from .judge import JudgeSpec, judge_run
from .records import RunAudit
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
    steps = store.load_steps()
    audit = RunAudit(signals=signals(record, steps, store.dir, Limits.of(spec.audit if spec else None)))
    if judge is not None and judge.judges:
        rubric = load_rubric()
        audit.rubric = rubric.id
        shown: dict[int, evidence_module.RunEvidence] = {}
        for one in judge.judges:
            budget = judge.budget_for(one)
            if budget not in shown:
                shown[budget] = evidence_module.build(store.dir, record, steps, spec, budget)
            audit.judges.append(judge_run(shown[budget], one, judge.base, store.dir, rubric))
    record.audit = audit
    store.save(record)
    return audit
