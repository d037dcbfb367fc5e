"""What the --slurm options settle on, shared by the options (which build it) and the controller (which
reads it): kept apart from both so neither has to import the other at module level."""

from __future__ import annotations

from dataclasses import dataclass, field

# fmlbench options the job needs to rebuild the run's settings; filled when the options are registered
FORWARDED: list[str] = []


@dataclass(frozen=True)
class SlurmConfig:
    partition: str | None
    time_min: int | None
    opts: dict[str, object] = field(default_factory=dict)
    detach: bool = False

    @property
    def folder_name(self) -> str:
        return "slurm"
