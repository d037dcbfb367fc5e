"""Running a benchmark session across a Slurm cluster: one submitit array task per test item.

The controller (the pytest process on a login node) submits every selected item when collection ends, as
job arrays (one sbatch per group of items asking for the same resources, cut to MaxArraySize), and asks
for the states of its own arrays only, at most once per --slurm-poll;
each item then waits for its job and reports from the run record the job wrote under ``--fmlbench-out``
(which therefore lives on a filesystem the nodes share). Inside the job the ordinary runner runs, with
its isolation and its resume from step records.
"""

from .config import SlurmConfig
from .options import add_slurm_options, configure

__all__ = ["SlurmConfig", "add_slurm_options", "configure"]
