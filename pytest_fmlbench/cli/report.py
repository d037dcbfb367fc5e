"""``fmlbench report RUN_DIR... --html FILE``: the runs, with every task's search and every step, as one
static web page."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .encoder import add_encoder_arguments, encoder_choice
from .run_folders import runs_under


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="folders holding run records (record.json), e.g. reports/fmlbench/runs, or bundles "
                             "(fmlbench bundle; check one first with fmlbench verify)")
    parser.add_argument("--html", type=Path, required=True, metavar="FILE",
                        help="write the static HTML report here (opens from disk: no server, no network)")
    add_encoder_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..bundle import BundleError
    from ..bundle.archive import SUFFIXES, extract

    with tempfile.TemporaryDirectory(prefix="fmlbench-report-") as scratch:
        folders = []
        for index, folder in enumerate(args.run_dirs):
            if folder.is_file() and folder.name.endswith(SUFFIXES):
                try:
                    extract(folder, Path(scratch) / str(index))
                except BundleError as exc:
                    print(f"fmlbench: {exc}", file=sys.stderr)
                    return 2
                folder = Path(scratch) / str(index) / "runs"
            folders.append(folder)
        return _report(args, folders)


def _report(args: argparse.Namespace, folders: list[Path]) -> int:
    from ..reports.html import ReportUnavailable, write_html
    from ..scoring.aggregate import Scores
    from ..scoring.exploration import EncoderUnavailable

    runs = runs_under(folders)
    if runs is None:
        return 2
    try:
        choice = encoder_choice(args)
        scores = Scores.from_runs(runs, encoder=choice)
        path = write_html(runs, args.html, scores=scores)
    except (EncoderUnavailable, ReportUnavailable) as exc:
        print(f"fmlbench: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fmlbench: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({len(runs)} run(s){groups_line(scores)})")
    return 0


def groups_line(scores) -> str:
    """What the page holds beyond a count: its run groups (only seeds are averaged) and its smoke runs."""
    from ..scoring.groups import SMOKE_NOTE

    groups = scores.groups()
    smoke = sum(len(part.runs) for group, part in groups if group.smoke)
    text = f" in {len(groups)} group(s), each its own column" if len(groups) > 1 else ""
    return text + (f"; {smoke} smoke run(s): {SMOKE_NOTE}" if smoke else "")


COMMAND = ("report", "write a static HTML report of the runs under RUN_DIR...", add_arguments, run)
