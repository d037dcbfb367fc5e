"""``fmlbench baseline --measure -k TASK``: a full-profile task's unchanged baseline, run on the hardware at hand,
its values written beside task.yaml (``baseline_measured.yaml``) where the task's baseline is read from.

The run is the plugin's own: the baseline agent (one step: the task's code, unchanged, then the final val re-run
and the test), one seed, ``--fresh``. Its step's validation value and its test value become the task's baseline,
``source: measured``, with the hardware and the day; the values task.yaml declared (the paper's) stay beside
them in the tables. A smoke run is refused: it checks the code path on fixture data, and its values are no one's
baseline. The file changes the task's fingerprint, so runs recorded before it are not reused.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ..spec import MEASURED_BASELINE_FILE, MeasuredBaseline, Task
from . import data

STEPS = 1  # the baseline agent's one step, as the plugin's own baseline checks run it
SEED = 0
HEADER = ("# written by `fmlbench baseline --measure`: the unchanged baseline's values on this hardware; the tables\n"
          "# use them (source: measured) and show the values task.yaml declares beside them. Delete to go back.\n")


class MeasureError(Exception):
    """A measurement that cannot be written; the message is one line."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--measure", action="store_true", required=True,
                        help="run each selected full-profile task's unchanged baseline and write its values")
    parser.add_argument("-k", dest="keyword", metavar="EXPR", required=True,
                        help="select full-profile tasks as pytest's -k does (task ids, domains, markers)")
    parser.add_argument("--suite", type=Path, default=Path("task_suites"),
                        help="the task suite's folder (default: task_suites)")
    parser.add_argument("--out", type=Path, default=Path("reports") / "fmlbench" / "baseline-runs",
                        help="where the measuring runs' records and logs go (default reports/fmlbench/baseline-runs)")
    parser.add_argument("--scale", choices=["full", "smoke"], default="full",
                        help="only 'full' measures; 'smoke' is refused (fixture data is no baseline)")


def hardware(gpus: int) -> str:
    """The machine in one line: the GPUs and their driver where the task uses any, and the CPU."""
    cpu = _cpu_model() or platform.machine() or "unknown CPU"
    text = f"{cpu}, {os.cpu_count()} cores"
    smi = shutil.which("nvidia-smi")
    if gpus and smi:
        done = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=60)
        cards = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        if done.returncode == 0 and cards:
            text = f"{len(cards)} x {cards[0]} (name, memory, driver); {text}"
    elif gpus:
        text = f"no nvidia-smi (GPU unknown); {text}"
    return text


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def measure(task: Task, out: Path, hw: str) -> MeasuredBaseline:
    """Run the task's baseline in a child pytest and read its record; raise MeasureError where it gave no values."""
    out, root = out.absolute(), task.root.absolute()
    command = [sys.executable, "-m", "pytest", str(root), "-p", "no:cacheprovider", "-q", "--agent=baseline",
               f"--steps={STEPS}", "--seeds=1", "--fresh", "--scale=full", f"--fmlbench-out={out}"]
    # from the project's folder (the suite's parent): its pytest configuration applies, as to a user's run
    done = subprocess.run(command, cwd=root.parents[2], text=True)
    records = sorted((out / "runs" / task.id).glob("*/record.json"))
    if not records:
        raise MeasureError(f"{task.id}: the run left no record (pytest exit {done.returncode}); see the output above")
    record = json.loads(records[-1].read_text())
    val, test = record.get("best_val"), record.get("test_metric")
    if done.returncode != 0 or val is None or test is None or record.get("integrity") != "ok":
        raise MeasureError(f"{task.id}: the baseline gave no values to keep (status {record.get('status')}, val {val}, "
                           f"test {test}): nothing written; its logs are in {records[-1].parent / 'logs'}")
    return MeasuredBaseline(val=val, test=test, hardware=hw, measured_on=datetime.now(timezone.utc).date(),
                            steps=STEPS, seed=SEED, run=str(records[-1].parent))


def write(task: Task, measured: MeasuredBaseline) -> Path:
    path = task.root / MEASURED_BASELINE_FILE
    body = yaml.safe_dump(measured.model_dump(), sort_keys=False, allow_unicode=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(HEADER + body)
    tmp.replace(path)
    return path


def run(args: argparse.Namespace) -> int:
    if args.scale == "smoke":
        print("fmlbench baseline: --scale=smoke is refused: a smoke run checks the code path on fixture data, and its "
              "values are no baseline (measure at --scale=full, on the task's real data)", file=sys.stderr)
        return 2
    try:
        tasks = data.full_tasks(args.suite, args.keyword)
    except SystemExit as exc:
        print(str(exc).replace("fmlbench data:", "fmlbench baseline:", 1), file=sys.stderr)
        return 2
    failed = 0
    for task in tasks:
        declared = task.spec.baseline
        try:
            measured = measure(task, args.out, hardware(task.spec.resources.gpus))
        except MeasureError as exc:
            print(f"fmlbench baseline: {exc}", file=sys.stderr)
            failed += 1
            continue
        path = write(task, measured)
        before = ("unmeasured before" if declared.val is None
                  else f"{declared.source} before: val {declared.val:.6g}, test {declared.test:.6g}")
        print(f"{task.id}: measured val {measured.val:.6g}, test {measured.test:.6g} on {measured.hardware} "
              f"({before}); written to {path}")
    return 1 if failed else 0


COMMAND = ("baseline", "measure a full-profile task's unchanged baseline on this machine (--measure -k TASK) and "
           "write its values, the hardware and the date beside its task.yaml (source: measured)",
           add_arguments, run)
