"""The audit as test properties (they reach JUnit XML, also under xdist)."""

from __future__ import annotations

from ..record import RunRecord


def audit_properties(record: RunRecord) -> dict[str, str | float]:
    audit = record.audit
    if audit is None:
        return {"suspect": "unknown", "suspect_reasons": "not audited"}
    props: dict[str, str | float] = {
        "suspect": str(audit.suspect).lower(),
        "suspect_reasons": " | ".join(audit.reasons) or "none",
    }
    if audit.judges:
        cost = audit.judge_cost_usd
        props["judges"] = ", ".join(audit.judge_names)
        props["judge_cost_usd"] = "unknown" if cost is None else round(cost, 6)
        for name, score in audit.research_means().items():
            props[f"review_{name}"] = round(score, 3)
        if audit.errors:
            props["judge_errors"] = " | ".join(audit.errors)
    return props
