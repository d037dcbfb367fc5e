"""``fmlbench score DIR``: the tables recomputed offline from run records (ours) or from a results directory
written by the original FML-bench, or both; optionally as CSV and the JSON session summary."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..reports import summary
from ..reports.csv_files import write_csvs
from ..reports.runs import find_run_dirs, load_runs
from ..reports.tables import render
from .encoder import add_encoder_arguments, encoder_choice


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a folder holding run records (record.json) and/or an original "
                        "FML-bench results folder (<agent>/<Task>/<run>/summary.json)")
    parser.add_argument("--csv-dir", type=Path, help="also write the tables as CSV here, with the JSON session "
                        f"summary ({summary.FILE_NAME}) beside them")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the JSON session summary here")
    add_encoder_arguments(parser)
    parser.add_argument("--fmlbench-root", type=Path, metavar="DIR",
                        help="an original FML-bench checkout (ml_tasks/, workspace/ at baseline): its declared "
                        "baselines, and the baseline code the Reach metric needs")
    parser.add_argument("--tasks", type=Path, metavar="DIR",
                        help="folder of our task.yaml files, for original-layout folders named after our tasks "
                        "(its git commit goes into the JSON summary)")
    parser.add_argument("--width", type=int, default=160, help="table width in characters (default 160)")


def run(args: argparse.Namespace) -> int:
    from ..scoring.aggregate import Scores
    from ..scoring.exploration import EncoderUnavailable
    from ..scoring.original import OriginalLayoutError, find_runs
    from ..spec import TaskSpecError, load_task

    if not args.run_dir.is_dir():
        print(f"fmlbench: {args.run_dir} is not a directory", file=sys.stderr)
        return 2
    specs = {}
    if args.tasks:
        try:
            specs = {t.spec.id: t.spec for t in map(load_task, sorted(args.tasks.glob("*/task.yaml")))}
        except TaskSpecError as exc:
            print(f"fmlbench: {exc}", file=sys.stderr)
            return 2
    ours = find_run_dirs(args.run_dir)
    runs: list = load_runs(ours)
    try:
        runs += find_runs(args.run_dir, args.fmlbench_root, specs, exclude=set(ours))
    except OriginalLayoutError as exc:
        print(f"fmlbench: {exc}", file=sys.stderr)
        return 2
    if not runs:
        print(f"fmlbench: no run records (record.json) or original results (summary.json) under {args.run_dir}",
              file=sys.stderr)
        return 2
    try:
        choice = encoder_choice(args)
    except EncoderUnavailable as exc:
        print(f"fmlbench: {exc}", file=sys.stderr)
        return 2
    scores = Scores.from_runs(runs, encoder=choice)
    print(render(scores, width=args.width), end="")
    written = write_csvs(scores, args.csv_dir) if args.csv_dir else []
    json_paths = [p for p in (args.csv_dir / summary.FILE_NAME if args.csv_dir else None, args.json) if p]
    if json_paths:
        session = summary.build_summary(scores, source="fmlbench score", suite=args.tasks)
        written += [summary.write_summary(session, path) for path in json_paths]
    for path in written:
        print(f"wrote {path}")
    return 0


COMMAND = ("score", "print the tables for every run found under RUN_DIR", add_arguments, run)
