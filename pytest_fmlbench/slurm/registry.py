"""Which Slurm job runs which run directory: ``<out>/slurm/jobs.json``, so a later command re-attaches."""

from __future__ import annotations

import json
import os
from pathlib import Path

from filelock import FileLock


class JobRegistry:
    def __init__(self, folder: Path):
        self.path = folder / "jobs.json"
        self.lock = FileLock(str(folder / "jobs.json.lock"))

    def load(self) -> dict[str, str]:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}

    def record(self, run_id: str, job_id: str) -> None:
        self.record_many({run_id: job_id})

    def record_many(self, run_jobs: dict[str, str]) -> None:
        """Run id -> job id (an array's task as ARRAY_TASK), written at once for a whole array."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock:
            jobs = self.load()
            jobs.update(run_jobs)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(jobs, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
