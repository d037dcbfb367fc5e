"""What the --slurm options settle on, shared by the options (which build it) and the controller (which
reads it): kept apart from both so neither has to import the other at module level."""

from __future__ import annotations

from dataclasses import dataclass, field

# the scheduler is everyone's on a shared cluster: the session's job states are asked for at most this often
DEFAULT_POLL_S = 30.0
MIN_POLL_S = 5.0

# fmlbench options the job needs to rebuild the run's settings; filled when the options are registered
FORWARDED: list[str] = []


@dataclass(frozen=True)
class SlurmConfig:
    partition: str | None
    time_min: int | None
    opts: dict[str, object] = field(default_factory=dict)
    detach: bool = False
    poll_s: float = 30.0  # seconds between two looks at the session's job states (--slurm-poll)

    @property
    def folder_name(self) -> str:
        return "slurm"
