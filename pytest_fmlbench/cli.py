"""``fmlbench score RUN_DIR``: recompute the three tables offline from run records."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import cli_agents
from .report import find_run_dirs, load_runs, render, write_csvs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fmlbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    score = sub.add_parser("score", help="print the three tables for every run found under RUN_DIR")
    score.add_argument("run_dir", type=Path)
    score.add_argument("--csv-dir", type=Path, help="also write the tables as CSV here")
    cli_agents.register(sub)
    args = parser.parse_args(argv)
    if hasattr(args, "run"):
        return args.run(args)

    runs = load_runs(find_run_dirs(args.run_dir))
    if not runs:
        print(f"fmlbench: no run records (record.json) found under {args.run_dir}", file=sys.stderr)
        return 2
    print(render(runs), end="")
    if args.csv_dir:
        for path in write_csvs(runs, args.csv_dir):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
