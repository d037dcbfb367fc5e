"""Definition of the synthetic benchmark, shared by prepare.py and evaluate.py (harness only).

Each dataset is one random Erdos-Renyi DAG with gCastle's nonlinear MLP structural equations
(IIDSimulation, sem_type="mlp": every node is a random 100-unit sigmoid MLP of its parents plus
unit Gaussian noise), observed through N_SAMPLES i.i.d. rows. The original FML-bench task uses
50 nodes; 15 nodes keep the NOTEARS-linear baseline at ~10 s per graph on 2 CPU cores.
The seeds below live only here: the experiment never learns them, so it cannot regenerate the
true graphs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Iterator

N_NODES = 15
N_EDGES = 30  # castle's ER generator: expected ~28 edges, i.e. average degree ~4
N_SAMPLES = 500
SEM_TYPE = "mlp"
NOISE_SCALE = 1.0
# graph seed per dataset; the data (noise and MLP weights) use graph seed + DATA_SEED_OFFSET.
# castle's generators are visible to the experiment, so the test seeds are drawn from the whole 32-bit
# range numpy's legacy seeding takes: trying seeds until the generated data matches the test data would
# take days, far beyond a step's timeout (small seeds could be found by brute force in seconds).
GRAPH_SEEDS = {
    "val": {"val_graph_0": 11, "val_graph_1": 12},
    "test": {"test_graph_0": 3178909775, "test_graph_1": 3647775810},
}
DATA_SEED_OFFSET = 100_000

MANIFEST = "datasets.json"


def input_name(dataset: str) -> str:
    """File holding a dataset's data matrix (visible to the experiment)."""
    return f"X_{dataset}.npy"


def output_name(dataset: str) -> str:
    """File the experiment writes its adjacency estimate into."""
    return f"adj_{dataset}.npy"


def truth_name(dataset: str) -> str:
    return f"truth_{dataset}.npy"


@contextlib.contextmanager
def quiet_castle(scratch_parent: Path) -> Iterator[None]:
    """Import-time hygiene for gCastle, to be entered before importing ``castle``.

    castle imports matplotlib (which writes a font cache under $HOME) and configures the root
    logger at INFO; keep the cache in a temporary folder we own and the logs at WARNING.
    """
    Path(scratch_parent).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch_parent, prefix=".mplconfig-") as tmp:
        os.environ["MPLCONFIGDIR"] = tmp
        os.environ.setdefault("CASTLE_BACKEND", "pytorch")
        logging.basicConfig(level=logging.WARNING)
        yield
