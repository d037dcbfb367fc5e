"""Optional bubblewrap sandbox for experiments (``--sandbox``): protection on top of detection.

Inside it, the task folder and the workspace's protected files are read-only; the harness (with the
hidden test seed), the harness-private folder and the verdicts are replaced by empty in-memory folders;
and there is no network. The hashes are still checked after every step; the sandbox makes tampering fail instead of
merely being caught.
"""

from __future__ import annotations

import shutil
from pathlib import Path

INSTALL_HINT = "apt-get install bubblewrap"


def available() -> bool:
    return shutil.which("bwrap") is not None


def wrap(argv: list[str], *, read_only: list[Path], hidden: list[Path]) -> list[str]:
    """``argv`` run under bwrap with ``read_only`` paths bound read-only and ``hidden`` ones emptied."""
    wrapped = ["bwrap", "--dev-bind", "/", "/"]
    for path in read_only:
        wrapped += ["--ro-bind", str(path), str(path)]
    for path in hidden:
        wrapped += ["--tmpfs", str(path)]
    return [*wrapped, "--unshare-net", "--die-with-parent", "--", *argv]
