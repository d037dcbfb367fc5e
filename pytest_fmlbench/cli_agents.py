"""``fmlbench agents``: every built-in agent, what it does, its options (types, defaults), whether it needs an LLM."""

from __future__ import annotations

import argparse


def register(subcommands) -> None:
    parser = subcommands.add_parser("agents", help="list the built-in agents, their options and whether they need an LLM")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .agentkit.catalog import catalog, render

    print(render(catalog()), end="")
    return 0
