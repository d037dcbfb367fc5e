"""Hand-made run records and steps for the scoring tests."""

from datetime import datetime, timezone

from pytest_fmlbench.record import RunRecord, StepRecord


def record(**fields) -> RunRecord:
    """A finished one-step run on task 't': accuracy, higher is better, baseline val 0.5 / test 0.6, D = 1."""
    base = dict(run_id="r", task="t", task_version=1, task_fingerprint="f", domain="d", agent="a", seed=0,
                steps_budget=4, metric_key="acc", direction="higher", baseline_val=0.5, baseline_test=0.6,
                norm_best=1.0, norm_worst=0.0, status="finished", best_val=0.55, steps_used=1, valid_steps=1)
    base.update(fields)
    return RunRecord(**base)


def step(n: int, metric: float | None, success: bool | None = None, snapshot: str = "s") -> StepRecord:
    ok = metric is not None if success is None else success
    return StepRecord(step=n, action="improve", success=ok, metric=metric,
                      started_at=datetime.now(timezone.utc), snapshot=snapshot, snapshot_sha256=f"sha-{snapshot}")
