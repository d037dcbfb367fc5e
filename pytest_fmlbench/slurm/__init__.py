"""Running a benchmark session across a Slurm cluster: one submitit job per test item.

The controller (the pytest process on a login node) submits every selected item when collection ends;
each item then waits for its job and reports from the run record the job wrote under ``--fmlbench-out``
(which therefore lives on a filesystem the nodes share). Inside the job the ordinary runner runs, with
its isolation and its resume from step records.
"""

from .config import SlurmConfig
from .options import add_slurm_options, configure

__all__ = ["SlurmConfig", "add_slurm_options", "configure"]
