"""``fmlbench``: the command line next to the pytest plugin, one module per subcommand.

``fmlbench score DIR`` recomputes the tables offline from run records (ours) or from a results
directory written by the original FML-bench, or both; ``fmlbench report DIR... --html FILE`` writes them,
with every task's search and every step, as one static web page; ``fmlbench compare OLD NEW`` compares two
sessions (folders of runs or saved sessions), task by task; ``fmlbench agents``, ``fmlbench data`` and
``fmlbench judge`` list the agents, fetch the full profile's data and audit recorded runs.
``commands`` builds the parser from each module's ``COMMAND``.
"""

from .commands import COMMAND_NAMES, main

__all__ = ["COMMANDS", "COMMAND_NAMES", "main"]


def __getattr__(name: str):
    # every command's module, imported only when asked for (``main`` imports just the one it runs)
    if name == "COMMANDS":
        from .commands import all_commands

        return all_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
