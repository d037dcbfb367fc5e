"""A recorded run written directly (no experiment runs): 100 steps of a long-context agent, each step's
two calls sending the whole conversation so far, as such agents do. For checking that the HTML report's
transcript stays usable at that size, in seconds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pytest_fmlbench.llm.ledger import LEDGER_FILE
from pytest_fmlbench.record import RunRecord, RunStore, StepRecord, Usage

HOSTILE = '</pre><script>document.title="PWNED"</script><img src=x onerror="document.title=\'PWNED\'">'
NEEDLE_STEP = 57


def needle(step: int) -> str:
    return f"needle-of-step-{step}"


def _prose(step: int, what: str, size: int) -> str:
    line = f"step {step} {what}: we try a wider hidden layer and a cosine schedule, and look at the loss. "
    return (line * (size // len(line) + 1))[:size]


def write_long_run(root: Path, steps: int = 100, turn_chars: int = 2000) -> Path:
    run_dir = root / "runs" / "toy_task" / "long-context__m__seed0__000000000000"
    store = RunStore(run_dir)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    baseline = {"algorithm.py": "def fit(X, y, config):\n    return None\n", "config.json": '{"lr": 0.01}'}
    record = RunRecord(
        run_id="000000000000", task="toy_task", task_version=1, task_fingerprint="0" * 64, domain="toy",
        agent="long-context", model="m", provider="openai-compatible", seed=0, steps_budget=steps, status="finished",
        metric_key="accuracy", direction="higher", baseline_val=0.76, baseline_test=0.72, norm_best=1.0, norm_worst=0.0,
        steps_used=steps, valid_steps=steps, best_step=steps, best_val=0.80, final_val=0.80, test_metric=0.78,
        baseline_snapshot=store.write_named_snapshot("baseline", baseline), sandbox="bwrap", agent_process="bwrap",
        usage=Usage(input_tokens=1, output_tokens=1, calls=2 * steps, cost_usd=0.0))
    system = "You are a research agent. " + _prose(0, "system", 3000)
    history: list[dict[str, str]] = []
    calls = []
    step_records = []
    for k in range(1, steps + 1):
        at = start + timedelta(minutes=k)
        ask = {"role": "user", "content": _prose(k, "instruction", turn_chars) + (HOSTILE if k == 3 else "")}
        reply = _prose(k, "reply", turn_chars) + (f" {needle(k)}" if k == NEEDLE_STEP else "")
        for i, (purpose, text) in enumerate((("edit", reply), ("analysis", f"analysis of step {k}"))):
            messages = [{"role": "system", "content": system}, *history, ask]
            calls.append({"key": f"k{k}-{i}", "n": 0, "at": (at - timedelta(seconds=30 - i)).isoformat(),
                          "provider": "openai-compatible", "model": "m", "purpose": purpose, "latency_s": 1.0,
                          "usage": {"input_tokens": sum(len(m["content"]) for m in messages) // 4,
                                    "output_tokens": len(text) // 4, "cached_tokens": 0, "calls": 1, "cost_usd": 0.001},
                          "finish_reason": "stop", "text": text,
                          "request": {"messages": messages, "max_output_tokens": 4096, "temperature": None}})
        history += [ask, {"role": "assistant", "content": reply}]
        files = dict(baseline, **{"config.json": json.dumps({"lr": 0.01 + k / 1000})})
        snapshot, sha = store.write_snapshot(k, files)
        step_records.append(StepRecord(step=k, parent=k - 1 if k > 1 else None, action="improve", plan=f"plan {k}",
                                       success=True, metric=0.76 + k / 2500, started_at=at, snapshot=snapshot,
                                       snapshot_sha256=sha, usage=Usage(calls=2, cost_usd=0.002)))
    store.save(record)
    store.rewrite_steps(step_records)
    (run_dir / LEDGER_FILE).write_text("".join(json.dumps(c) + "\n" for c in calls))
    return run_dir


def naive_size(run_dir: Path) -> int:
    """What the calls would weigh written out one by one (every message of every call)."""
    total = 0
    for line in (run_dir / LEDGER_FILE).read_text().splitlines():
        entry = json.loads(line)
        total += sum(len(m["content"]) for m in entry["request"]["messages"]) + len(entry["text"])
    return total
