"""``fmlbench``: the command line next to the pytest plugin, one module per subcommand.

``fmlbench score DIR`` recomputes the tables offline from run records (ours) or from a results
directory written by the original FML-bench, or both; ``fmlbench report DIR... --html FILE`` writes them,
with every task's search and every step, as one static web page; ``fmlbench compare OLD NEW`` compares two
sessions (folders of runs or saved sessions), task by task; ``fmlbench agents``, ``fmlbench data`` and
``fmlbench judge`` list the agents, fetch the full profile's data and audit recorded runs.
``commands`` builds the parser from each module's ``COMMAND``.
"""

from .commands import COMMAND_NAMES, main

__all__ = ["COMMAND_NAMES", "main"]
