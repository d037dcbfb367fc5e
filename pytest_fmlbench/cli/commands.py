"""The ``fmlbench`` parser: one subcommand per ``(name, help, add_arguments, run)`` ``COMMAND``, each in its own
module of this package, named as the command; a new command is a new module and one name here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib import import_module

Command = tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]

# in the order ``fmlbench --help`` lists them
COMMAND_NAMES = ("score", "report", "agents", "compare", "data", "judge", "doctor", "baseline", "bundle", "verify",
                 "attach")


def command(name: str) -> Command:
    return import_module(f".{name}", __package__).COMMAND


def all_commands() -> list[Command]:
    return [command(name) for name in COMMAND_NAMES]


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
    argv = sys.argv[1:] if argv is None else argv
    # only the command asked for is imported: some load pandas and the plugin's options, which would cost every
    # `fmlbench data` (run for each task's fixtures) twice its own start-up; --help and a mistake get them all
    chosen = [command(argv[0])] if argv and argv[0] in COMMAND_NAMES else all_commands()
    parser = argparse.ArgumentParser(prog="fmlbench", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text, add_arguments, run in chosen:
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(command_parser)
        command_parser.set_defaults(run=run)
    args = parser.parse_args(argv)
    return args.run(args)
