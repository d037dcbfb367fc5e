"""Processes a step left on the host, found by a marker in their command line."""

from __future__ import annotations

import os
import time
from pathlib import Path


def host_processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def none_left_with(marker: str) -> bool:
    """Whether no process with ``marker`` is left. A step's processes are killed as it ends and die when next
    scheduled, which a busy machine delays; one that survived sleeps for 120 s, well past this wait."""
    deadline = time.monotonic() + 30
    while host_processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return host_processes_with(marker) == []
