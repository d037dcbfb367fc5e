"""The data cache of the ``full`` profile: artefacts a task declares, fetched once, checked by SHA-256.

``fmlbench data fetch`` downloads each declared artefact (data sets, model weights, upstream
repositories at pinned commits) into ``$FMLBENCH_DATA`` (default ``~/.cache/fmlbench/data``); a run
never downloads. Before a full-profile run's first step, :func:`preflight.problem` checks that every
artefact is there and intact, and names the command that fixes it when it is not. The cache lies
outside everything an experiment's sandbox shows: the harness reads it, the agent's code never does.
"""

from .artifact import Artifact
from .cache import DataCache, default_root
from .preflight import problem

__all__ = ["Artifact", "DataCache", "default_root", "problem"]
