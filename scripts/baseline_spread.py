"""How far each small task's baseline lands from its declared values when the CPU's kernels change.

A CPU's numeric kernels round differently from another's: MKL, oneDNN, ATen and numpy pick their code by
the instruction set they find (AVX2, AVX-512, AMX) and by the thread count, and training amplifies the last
bit into the last digits of a score. One machine can stand in for several by pinning those libraries to
other instruction sets. This runs every small task's baseline (one step, sandboxed as users run it) under
each such variant and prints, per task, the declared values, each variant's and the largest distance from
the declared ones; ``--write`` records a tolerance in each task.yaml that needs one (see docs/task-format.md).

    .venv/bin/python scripts/baseline_spread.py [-k EXPR] [--variants default,avx2,...] [--write [--widen]]

Another machine (another CPU vendor: an AMD EPYC's MKL and OpenBLAS kernels are not an Intel CPU's pinned
to AVX2) adds what it measured with ``--write --widen``, which only ever raises a tolerance.

Runs take about as long as the task suite's baseline sweep times the number of variants; run it on a quiet
machine, one variant after another.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_NO_AVX512 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"

# name -> (environment, xdist workers); two workers give each experiment one thread (as CI), one gives two
VARIANTS: dict[str, tuple[dict[str, str], int]] = {
    "default": ({}, 2),
    "two-threads": ({}, 1),
    "avx2": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
              "NPY_DISABLE_CPU_FEATURES": _NO_AVX512, "OPENBLAS_CORETYPE": "Haswell"}, 2),
    "mkl-compatible": ({"MKL_CBWR": "COMPATIBLE"}, 2),
    "avx2-mkl-compatible": ({"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE",
                             "ONEDNN_MAX_CPU_ISA": "AVX2"}, 2),
}

# a tolerance is the largest distance measured times this margin: the variants sample the machines a user
# may have, they do not bound them
MARGIN = 3.0


def run_variant(name: str, selection: str, workdir: Path) -> dict[str, tuple[float, float]]:
    """Each selected small task's (best_val, test_metric) from one baseline session under the variant."""
    env_extra, workers = VARIANTS[name]
    project = workdir / name
    shutil.copytree(REPO / "task_suites", project / "task_suites",
                    ignore=shutil.ignore_patterns("__pycache__", "full"))
    env = {**os.environ, **env_extra}
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "OMP_NUM_THREADS"):
        env.pop(var, None)
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--agent=baseline", "--steps=1",
               "-m", "small", "task_suites", "-n", str(workers)]
    if selection:
        command += ["-k", selection]
    done = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"variant {name}: the baseline session failed (exit {done.returncode}):\n{done.stdout[-3000:]}")
    values = {}
    for record in (project / "reports" / "fmlbench" / "runs").glob("*/*/record.json"):
        data = json.loads(record.read_text())
        values[data["task"]] = (data["best_val"], data["test_metric"])
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="pytest -k expression selecting tasks")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated: " + ", ".join(VARIANTS))
    parser.add_argument("--json", type=Path, help="write the measured values here")
    parser.add_argument("--load", type=Path, help="take the values an earlier --json wrote instead of running")
    parser.add_argument("--write", action="store_true", help="record the tolerances in the tasks' task.yaml")
    parser.add_argument("--widen", action="store_true",
                        help="with --write: only raise a declared tolerance, never lower it (measurements on "
                             "another machine add to those the declared one came from)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from pytest_fmlbench.spec import load_task

    measured: dict[str, dict[str, tuple[float, float]]] = {}
    if args.load:
        measured = json.loads(args.load.read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="fmlbench-spread-") as tmp:
            for name in args.variants.split(","):
                print(f"variant {name} ...", flush=True)
                for task, values in run_variant(name, args.k, Path(tmp)).items():
                    measured.setdefault(task, {})[name] = values
    if args.json:
        args.json.write_text(json.dumps(measured, indent=1))
    for task in sorted(measured):
        path = REPO / "task_suites" / task / "task.yaml"
        declared = load_task(path).spec.baseline
        runs = measured[task]
        far_val = max(abs(v - declared.val) for v, _ in runs.values())
        far_test = max(abs(t - declared.test) for _, t in runs.values())
        print(f"{task}: declared {declared.val!r} / {declared.test!r}; farthest {far_val:.3g} / {far_test:.3g}")
        for name, (val, test) in runs.items():
            print(f"    {name:22s} {val!r} / {test!r}")
        tolerance = new_tolerance(declared.tolerance, far_val, far_test, args.widen)
        if args.write and tolerance is not None:
            print(f"    tolerance -> {{val: {tolerance[0]:g}, test: {tolerance[1]:g}}}")
            write_tolerance(path, *tolerance)


def new_tolerance(declared, far_val: float, far_test: float, widen: bool) -> tuple[float, float] | None:
    """The (val, test) tolerance the measured distances call for, or None where the declared one stands.
    Widening keeps the larger of each: the declared one came from other machines' runs."""
    val, test = round_up(MARGIN * far_val), round_up(MARGIN * far_test)
    if not (val or test):
        return None  # every variant reproduced the declared values
    if declared is None:
        return val, test
    if widen:
        val, test = max(val, declared.val), max(test, declared.test)
    return None if (val, test) == (declared.val, declared.test) else (val, test)


def round_up(x: float) -> float:
    """Up to two significant digits."""
    if x == 0:
        return 0.0
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    # rounded first: 3 * 1.1e-5 is 3.3000000000000004e-05 in binary, which is 3.3e-05, not 3.4e-05
    return round(math.ceil(round(x / scale, 9)) * scale, 12)


def write_tolerance(path: Path, val: float, test: float) -> None:
    """Set the baseline's tolerance in task.yaml's one-line baseline mapping, keeping the rest of the file."""
    text = path.read_text()
    line = re.search(r"^baseline: \{(.*)\}$", text, re.MULTILINE)
    if not line:
        sys.exit(f"{path}: the baseline is not a one-line mapping; add its tolerance by hand: {{val: {val:g}, "
                 f"test: {test:g}}}")
    body = re.sub(r",\s*tolerance: \{[^}]*\}", "", line.group(1))
    text = text.replace(line.group(0), f"baseline: {{{body}, tolerance: {{val: {val:g}, test: {test:g}}}}}")
    path.write_text(text)


if __name__ == "__main__":
    main()
