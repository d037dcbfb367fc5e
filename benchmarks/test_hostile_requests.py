"""On-demand benchmark of what the worst request of each kind costs the harness: memory and time.

    .venv/bin/python -m pytest benchmarks/test_hostile_requests.py --benchmark-only -s

Target: whatever a request holds, the harness's process grows by a small multiple of the protocol's message
cap (``protocol.MAX_MESSAGE_BYTES``, 16 MiB) at most, and answers within seconds. Each case is one line,
the worst content of its kind within the caps (or just past one), handed to the real dispatcher on a real
``HarnessSession`` (the toy task) as ``serve`` hands it over, in a fresh process of its own: its peak
resident memory above what it held before (VmHWM, reset before the request) and the request's wall time.
``serve`` adds its receive buffer to a case's figure: the line and at most 1 MiB more. A large Python file
is parsed in a short-lived process of its own (``editor.PARSE_IN_PROCESS_CHARS``): its memory is that
process's, bounded by ``editor.PARSE_MEMORY_BYTES``, and counted in the time only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
TOY = REPO / "tests" / "data" / "toy_task"
MiB = 1 << 20
# the bounds the target sets: the harness's peak growth, in multiples of the message cap, and the time
MAX_GROWTH_CAPS = 8
MAX_SECONDS = 30.0


def _msg(op: str, **args) -> bytes:
    return json.dumps({"id": 1, "op": op, "args": args}, ensure_ascii=False).encode("utf-8", "surrogatepass")


def _whole(content: str, path: str = "algorithm.py") -> bytes:
    return _msg("edit", edits=[{"kind": "whole", "path": path, "content": content}])


def _extra(json_value: bytes) -> bytes:
    return b'{"id":1,"op":"annotate","args":{"step":1,"extra":{"v":' + json_value + b"}}}"


def _blocks(first: str, search: str, replace: str, count: int) -> bytes:
    return _msg("edit", edits=[{"kind": "whole", "path": "algorithm.py", "content": first}] + [
        {"kind": "search_replace", "path": "algorithm.py", "search": search, "replace": replace}] * count)


# each: (p, e) -> the line, from the protocol and editor modules' caps
CASES: dict[str, Callable[[Any, Any], bytes]] = {
    "edit: dense Python at the file cap": lambda p, e: _whole("x=1\n" * (e.MAX_EDITABLE_BYTES // 4)),
    "edit: one line at the file cap": lambda p, e: _whole("x = '" + "a" * (e.MAX_EDITABLE_BYTES - 8) + "'\n"),
    "edit: newlines at the file cap": lambda p, e: _whole("\n" * e.MAX_EDITABLE_BYTES),
    "edit: JSON of empty arrays at the cap": lambda p, e: _whole(
        "[" + "[]," * (e.MAX_EDITABLE_BYTES // 3 - 1) + "[]]", "config.json"),
    "edit: JSON nested 100000 deep": lambda p, e: _whole("[" * 100000 + "]" * 100000, "config.json"),
    "edit: a file twice the cap": lambda p, e: _whole("#" * (2 * e.MAX_EDITABLE_BYTES)),
    "edit: 1000 blocks growing the file": lambda p, e: _blocks("#x\n", "#x\n", "#x\n" + "#" * 2000 + "\n",
                                                               p.MAX_EDITS - 1),
    "edit: SEARCH matching 500000 places": lambda p, e: _blocks("#" + "ab" * (e.MAX_EDITABLE_BYTES // 2 - 2) + "\n",
                                                                "ab", "c", 1),
    "edit: SEARCH by trailing blanks, tiny lines": lambda p, e: _blocks("a \n" * (e.MAX_EDITABLE_BYTES // 3),
                                                                        "b", "c", 1),
    "set_files: every file at the cap": lambda p, e: _msg("set_files", files={
        "algorithm.py": "#" * (e.MAX_EDITABLE_BYTES - 2) + "\n",
        "config.json": '"' + "x" * (e.MAX_EDITABLE_BYTES - 2) + '"',
        "split_config.json": '"' + "\\n" * (e.MAX_EDITABLE_BYTES // 2 - 1) + '"'}),
    "run_step: texts to the message cap": lambda p, e: _msg(
        "run_step", action="a" * (p.MAX_MESSAGE_BYTES // 4), plan="p" * (p.MAX_MESSAGE_BYTES // 4),
        idea="i" * (p.MAX_MESSAGE_BYTES // 4), analysis="y" * (p.MAX_MESSAGE_BYTES // 4 - 200)),
    "run_step: a plan of astral characters": lambda p, e: _msg(
        "run_step", action="a", plan="\U0001F600" * (p.MAX_MESSAGE_BYTES // 4 - 20)),
    "run_step: extra at its cap": lambda p, e: _msg("run_step", action="a",
                                                    extra={"k": [0] * (p.MAX_EXTRA_BYTES // 3 - 10)}),
    "run_step: a lone surrogate at the end": lambda p, e: _msg(
        "run_step", action="a", plan="p" * (p.MAX_MESSAGE_BYTES - 100) + "\ud800"),
    "run_step: ESC at the end of a plan": lambda p, e: _msg(
        "run_step", action="a", plan="p" * (p.MAX_MESSAGE_BYTES - 100) + "\x1b"),
    # an array counts twice: its comma and its bracket
    "annotate: empty arrays to the value cap": lambda p, e: _extra(b"[" + b"[]," * (p.MAX_JSON_VALUES // 2 - 100)
                                                                   + b"[]]"),
    "annotate: empty objects to the value cap": lambda p, e: _extra(b"[" + b"{}," * (p.MAX_JSON_VALUES // 2 - 100)
                                                                    + b"{}]"),
    "annotate: small keys to the value cap": lambda p, e: _msg(
        "annotate", step=1, extra={f"k{i}": 0 for i in range(p.MAX_JSON_VALUES // 2 - 100)}),
    "annotate: past the value cap": lambda p, e: _extra(b"[" + b"{}," * p.MAX_JSON_VALUES + b"{}]"),
    "annotate: nested 33 deep": lambda p, e: _extra(b"[" * 33 + b"]" * 33),
    "annotate: nested 100000 deep": lambda p, e: _extra(b"[" * 100000 + b"]" * 100000),
    "annotate: a 4300-digit integer": lambda p, e: _extra(b"9" * 4300),
    "annotate: 10**100000": lambda p, e: _extra(b"1" + b"0" * 100000),
    "annotate: NaN": lambda p, e: _extra(b"NaN"),
    "annotate: 1e999": lambda p, e: _extra(b"1e999"),
    "llm.complete: a prompt at the message cap": lambda p, e: _msg(
        "llm.complete", messages=[{"role": "user", "content": "w" * (p.MAX_MESSAGE_BYTES - 200)}]),
    "any: a line over the message cap": lambda p, e: _msg("steps") + b" " * p.MAX_MESSAGE_BYTES,
    # not bound by the message cap: a reply holds what the run's steps keep (JOURNAL_STEPS at their caps)
    "journal: after steps that keep the most": lambda p, e: _msg("journal"),
}
JOURNAL_STEPS = 20


def _measure_one(case: str, scratch: Path) -> dict:
    """In this process: build the toy run, the case's line, then hand the line to the dispatcher."""
    sys.path.insert(0, str(REPO))
    from pytest_fmlbench import editor as e
    from pytest_fmlbench.agent_host import protocol as p
    from pytest_fmlbench.agent_host.server import Dispatcher
    from pytest_fmlbench.executor import scrubbed_env
    from pytest_fmlbench.harness_session import HarnessSession
    from pytest_fmlbench.record import RunRecord, RunStore
    from pytest_fmlbench.spec import load_task
    from pytest_fmlbench.workspace import Workspace

    shutil.copytree(TOY, scratch / "toy_task")
    task = load_task(scratch / "toy_task" / "task.yaml")
    store, spec = RunStore(scratch / "run"), task.spec
    record = RunRecord(run_id="r", task=task.id, task_version=spec.version, task_fingerprint="f", domain=spec.domain,
                       agent="hostile", seed=0, steps_budget=3, metric_key=spec.metric.key,
                       direction=spec.metric.direction, baseline_val=spec.baseline.val,
                       baseline_test=spec.baseline.test, norm_best=spec.normalization.best,
                       norm_worst=spec.normalization.worst)
    workspace = Workspace.create(task, store.dir / "search", scrubbed_env(), store.logs, sandboxed=False)
    dispatcher = Dispatcher(HarnessSession(spec, workspace, store, record, workspace.take_manifest()))
    dispatcher.handle_line(p.encode({"id": 0, "op": "hello", "args": {"version": 2}}))
    if case.startswith("annotate"):
        dispatcher.handle_line(p.encode({"id": 0, "op": "run_step", "args": {"action": "first"}}))
    if case.startswith("journal"):
        _keep_the_most(dispatcher.session, p)
    line = bytearray(CASES[case](p, e))
    if len(line) <= p.MAX_MESSAGE_BYTES + MiB:
        # the receive buffer stops at the cap and a chunk: a longer line never reaches the dispatcher
        line = line.rstrip(b"\n")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM to the current resident size
    before = _status("VmRSS")
    started = time.perf_counter()
    try:
        if len(line) > p.MAX_MESSAGE_BYTES:
            raise p.ProtocolViolation("over the cap: serve refuses it from its buffer")
        reply = json.loads(dispatcher.handle_line(line))
        answer = "ok" if reply["ok"] else f"{reply['error']['type']}: {reply['error']['message']}"
        if reply["ok"] and "applied" in reply["result"]:
            answer = "applied" if reply["result"]["applied"] else f"failed edit: {reply['result']['error']}"
    except p.ProtocolViolation as exc:
        answer = f"violation: {exc}"
    seconds = time.perf_counter() - started
    return {"case": case, "line_mib": len(line) / MiB, "growth_mib": (_status("VmHWM") - before) / 1024,
            "seconds": seconds, "answer": answer, "fatal": dispatcher.fatal is not None}


def _keep_the_most(session, p) -> None:
    """JOURNAL_STEPS steps in the run's journal, each with the most an agent's words keep (not run: the
    journal reply's cost is what is measured)."""
    from datetime import datetime, timezone

    from pytest_fmlbench.record import StepRecord

    text = "w" * p.MAX_TEXT_CHARS
    for step in range(1, JOURNAL_STEPS + 1):
        session.journal.add(StepRecord(
            step=step, action="a" * p.MAX_LABEL_CHARS, plan=text, idea=text, analysis=text, edit_error=text,
            success=True, metric=0.5, started_at=datetime.now(timezone.utc), snapshot="s", snapshot_sha256="0",
            extra={"k": "x" * (p.MAX_EXTRA_BYTES - 20)}))


def _status(field: str) -> int:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith(field + ":"):
            return int(row.split()[1])
    raise KeyError(field)


def _measure(case: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="fmlbench-hostile-") as scratch:
        done = subprocess.run([sys.executable, __file__, case, scratch], capture_output=True, text=True, cwd=REPO,
                              timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc/self/clear_refs")
def test_worst_request_per_kind(benchmark):
    from pytest_fmlbench.agent_host.protocol import MAX_MESSAGE_BYTES

    results: list[dict] = []
    benchmark.pedantic(lambda: results.extend(_measure(name) for name in CASES), rounds=1, iterations=1)
    cap_mib = MAX_MESSAGE_BYTES / MiB
    print(f"\n[the worst request of each kind; message cap {cap_mib:g} MiB; load average {os.getloadavg()[0]:.1f}]")
    print(f"{'request':45s}{'line MiB':>9s}{'peak +MiB':>10s}{'seconds':>9s}  answer")
    for r in results:
        print(f"{r['case']:45s}{r['line_mib']:9.2f}{r['growth_mib']:10.1f}{r['seconds']:9.2f}  {r['answer'][:70]}")
    benchmark.extra_info["requests"] = results
    worst = max(results, key=lambda r: r["growth_mib"])
    print(f"worst: {worst['case']}, {worst['growth_mib']:.0f} MiB = {worst['growth_mib'] / cap_mib:.1f} x the cap")
    assert not any(r["fatal"] for r in results)
    assert worst["growth_mib"] <= MAX_GROWTH_CAPS * cap_mib
    assert max(r["seconds"] for r in results) <= MAX_SECONDS


if __name__ == "__main__":
    print(json.dumps(_measure_one(sys.argv[1], Path(sys.argv[2]))))
