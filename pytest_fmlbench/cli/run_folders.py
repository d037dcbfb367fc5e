"""The run records under the folders a command was given (``fmlbench report``, ``fmlbench judge``), read as
every reader reads them (``reports.runs.load_runs``)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..reports.runs import find_run_dirs, load_runs


def runs_under(folders: list[Path]) -> list[tuple] | None:
    """(record, steps, run_dir) for every run under the folders; None, after one error line, when a folder is
    missing or holds no run."""
    for folder in folders:
        if not folder.is_dir():
            print(f"fmlbench: {folder} is not a directory", file=sys.stderr)
            return None
    found = sorted({d for folder in folders for d in find_run_dirs(folder)})
    # a record that cannot be read is left out with one line naming its file and line (load_runs)
    runs = load_runs(found)
    if not runs:
        what = "no readable run records" if found else "no run records"
        print(f"fmlbench: {what} (record.json) under {', '.join(map(str, folders))}", file=sys.stderr)
        return None
    return runs
