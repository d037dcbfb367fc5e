"""The ``fmlbench`` parser: one subcommand per ``(name, help, add_arguments, run)`` entry in ``COMMANDS``, each
from its own module in this package; a new command is a new module and one line here."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from . import agents, attach, baseline, bundle, compare, data, doctor, judge, report, score, verify


COMMANDS: list[tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = [
    score.COMMAND,
    report.COMMAND,
    agents.COMMAND,
    compare.COMMAND,
    data.COMMAND,
    judge.COMMAND,
    doctor.COMMAND,
    baseline.COMMAND,
    bundle.COMMAND,
    verify.COMMAND,
    attach.COMMAND,
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
  fmlbench doctor                                what this machine can run: sandbox, GPUs, data, tools, keys
  fmlbench baseline --measure -k privacy_opacus_full   a full task's baseline measured here (source: measured)
  fmlbench bundle last -o results.tar.zst        the last session, packed for anyone to verify offline
  fmlbench verify results.tar.zst                hashes, integrity chains, tables re-scored; --rerun RUN
  fmlbench attach privacy_opacus                 the shell of a human baseline run (pytest --agent=human)

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
