"""``fmlbench agents``: every built-in agent, what it does, its options (types, defaults), whether it needs an LLM."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command takes no arguments."""


def run(args: argparse.Namespace) -> int:
    from ..agentkit.catalog import catalog, render

    print(render(catalog()), end="")
    return 0


COMMAND = ("agents", "list the built-in agents, their options and whether they need an LLM", add_arguments, run)
