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


def write_run(root, steps, **fields):
    """A run directory as the runner leaves it: record.json, steps.jsonl, the steps' and the baseline's
    snapshots. ``steps``: (metric or None, editable files) per step."""
    from pathlib import Path

    from pytest_fmlbench.record import RunStore

    rec = record(**fields)
    run_dir = Path(root) / rec.task / f"{rec.agent}__{rec.model or 'none'}__seed{rec.seed}"
    store = RunStore(run_dir)
    baseline = {"algorithm.py": "def fit():\n    return 0\n", "config.json": '{"lr": 0.1}',
                "split_config.json": '{"val_ratio": 0.2}'}
    rec.baseline_snapshot = store.write_named_snapshot("baseline", baseline)
    good = [m for m, _ in steps if m is not None]
    rec.steps_used, rec.valid_steps = len(steps), len(good)
    if "best_val" not in fields:
        rec.best_val = (max(good) if rec.direction == "higher" else min(good)) if good else None
    store.save(rec)
    for n, (metric, files) in enumerate(steps, start=1):
        name, sha = store.write_snapshot(n, {**baseline, **files})
        s = step(n, metric)
        s.snapshot, s.snapshot_sha256 = name, sha
        store.append_step(s)
    return run_dir
