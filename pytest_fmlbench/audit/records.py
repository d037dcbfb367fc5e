"""The audit of one run, as typed data: kept in the run record (``RunRecord.audit``).

A run is ``suspect`` when a cheap signal fired or a judge reported a rule violation whose citation the
records confirm. Suspect is a flag for a reader, never a change of score.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


def _now() -> datetime:
    return datetime.now(timezone.utc)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Finding(_Strict):
    """One reason to look at a run closely."""

    source: Literal["signal", "judge"]
    # signals: val_test_gap, above_ceiling, literal_array, outside_path, split_sniffing, sandbox_blocked,
    # unreadable_record, audit_failed (see signals.py); judges: the rule broken
    kind: str
    reason: str = Field(description="one line")
    # the step the evidence is in; None for the final test
    step: int | None = None
    file: str | None = None
    # first and last line, 1-based, in ``file`` as that step ran it
    lines: tuple[int, int] | None = None
    # the cited text, as the records hold it
    excerpt: str = ""
    # the judge (provider:model) that reported it
    judge: str | None = None
    # whether the citation was found in the records; an unverified finding is shown but flags nothing
    verified: bool = True

    @property
    def where(self) -> str:
        step = "final test" if self.step is None else f"step {self.step}"
        if self.file and self.lines:
            first, last = self.lines
            return f"{step}, {self.file}:{first}" + (f"-{last}" if last != first else "")
        return step


class ResearchReview(_Strict):
    """One judge's scores on the rubric (1-10 per dimension), with its reasons."""

    scores: dict[str, float]
    justifications: dict[str, str] = {}
    confidence: float | None = None
    strengths: list[str] = []
    weaknesses: list[str] = []


class JudgeUsage(_Strict):
    calls: int = 0
    replayed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # None when a price is unknown; what the calls cost when they were made, replayed ones included
    cost_usd: float | None = 0.0
    # what this audit spent: replayed calls cost nothing
    new_cost_usd: float | None = 0.0


class JudgeOutcome(_Strict):
    judge: str = Field(description="provider:model")
    review: ResearchReview | None = None
    # None when the rule review gave no usable answer
    rules_clean: bool | None = None
    findings: list[Finding] = []
    # what went wrong, one line each (a reply that is not JSON, an empty reply, a budget stop)
    errors: list[str] = []
    usage: JudgeUsage = JudgeUsage()


class RunAudit(_Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    audited_at: datetime = Field(default_factory=_now)
    signals: list[Finding] = []
    judges: list[JudgeOutcome] = []
    rubric: str | None = None

    @property
    def flags(self) -> list[Finding]:
        """The findings that make the run suspect: every signal, and judges' findings the records confirm."""
        return [*self.signals, *(f for j in self.judges for f in j.findings if f.verified)]

    @property
    def suspect(self) -> bool:
        return bool(self.flags)

    @property
    def reasons(self) -> list[str]:
        return [f"{f.reason} ({f.where}{', judge ' + f.judge if f.judge else ''})" for f in self.flags]

    @property
    def judge_names(self) -> list[str]:
        return [j.judge for j in self.judges]

    @property
    def judge_cost_usd(self) -> float | None:
        costs = [j.usage.cost_usd for j in self.judges]
        return None if any(c is None for c in costs) else float(sum(costs))

    def research_means(self) -> dict[str, float]:
        """Each rubric dimension averaged over the judges that reviewed the run (MLR-Judge averages its
        reviewers)."""
        totals: dict[str, list[float]] = {}
        for outcome in self.judges:
            if outcome.review is not None:
                for name, score in outcome.review.scores.items():
                    totals.setdefault(name, []).append(score)
        return {name: sum(v) / len(v) for name, v in totals.items()}

    @property
    def errors(self) -> list[str]:
        return [f"judge {j.judge}: {e}" for j in self.judges for e in j.errors]
