"""``fmlbench compare OLD NEW``: per-task paired deltas of NI, the signed improvement and the test value
between two sessions, with the smallest drop each comparison could detect (its seeds' spread, or the task's
declared noise) and, when the sessions ran on different machines, one line saying so."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ..options import DEFAULT_OUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for name, which in (("old", "earlier"), ("new", "later")):
        parser.add_argument(name, metavar=name.upper(), help=f"the {which} side: a folder of run records (ours or an "
                            "original FML-bench results folder), a saved session (last, last-N, a number, a name "
                            "from <fmlbench-out>/sessions/) or a session file")
    parser.add_argument("--fmlbench-out", type=Path, default=Path(DEFAULT_OUT), metavar="DIR",
                        help=f"the output folder whose sessions/ holds the saved sessions (default {DEFAULT_OUT})")
    parser.add_argument("--csv", type=Path, metavar="FILE", help="also write the comparison as CSV")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the comparison as JSON")
    parser.add_argument("--fail-on-regression", type=float, metavar="X",
                        help="exit with status 1, one line per task, when a task's NI or signed improvement (NI "
                        "without its clamp at 0) dropped by more than X and by more than the noise (or the noise is "
                        "unknown); a task where such a drop could go unseen is named 'cannot tell', with the seeds "
                        "it needs")
    parser.add_argument("--seeds-for", type=float, metavar="X",
                        help="show per task how many paired seeds a side a drop of X (NI) needs to be found with 80%% "
                        "power (default: the --fail-on-regression threshold)")
    parser.add_argument("--tasks", type=Path, action="append", default=[], metavar="DIR",
                        help="where to find the tasks' task.yaml, for their declared noise (repeatable; default: "
                        "./task_suites and the package's)")
    parser.add_argument("--width", type=int, default=160, help="table width in characters (default 160)")


def run(args: argparse.Namespace) -> int:
    from ..compare import CompareInputError, compare, side_for
    from ..compare.table import cannot_tell_line, gate_line, regression_line, render, write_csv, write_json

    threshold = args.fail_on_regression
    if threshold is not None and (math.isnan(threshold) or threshold < 0):
        print(f"fmlbench: --fail-on-regression must be 0 or more (a drop of NI or signed improvement), got "
              f"{threshold}", file=sys.stderr)
        return 2
    sessions_dir = args.fmlbench_out / "sessions"
    try:
        old, new = side_for(args.old, sessions_dir), side_for(args.new, sessions_dir)
    except CompareInputError as exc:
        print(f"fmlbench: {exc}", file=sys.stderr)
        return 2
    comparison = compare(old, new, noise=_declared_noise(args.tasks, old, new))
    print(render(comparison, width=args.width, threshold=threshold, seeds_for=args.seeds_for), end="")
    for path, write in ((args.csv, write_csv), (args.json, write_json)):
        if path:
            print(f"wrote {write(comparison, path, threshold if threshold is not None else args.seeds_for)}")
    if not comparison.tasks:
        print("fmlbench: no task is on both sides", file=sys.stderr)
    if threshold is not None:
        regressed = comparison.regressions(threshold)
        for task in regressed:
            print(regression_line(task, threshold))
        for task in comparison.cannot_tell(threshold):
            print(cannot_tell_line(task, threshold))
        print(gate_line(comparison, threshold))
        if regressed:
            return 1
    return 0


def _declared_noise(roots: list[Path], *sides) -> dict:
    """The compared tasks' declared noise (task.yaml's ``noise``, in NI), where their task folders are found."""
    from ..bundle.pack import default_task_roots, task_sources
    from ..compare.power import declared_noise

    wanted = {task for side in sides for task in side.runs["task"]}
    found = {task_id: declared_noise(task.spec) for task_id, task in
             task_sources(default_task_roots(roots), wanted).items()}
    return {task_id: noise for task_id, noise in found.items() if noise is not None}


COMMAND = ("compare", "per-task paired deltas of NI, signed improvement and test value between two sessions",
           add_arguments, run)
