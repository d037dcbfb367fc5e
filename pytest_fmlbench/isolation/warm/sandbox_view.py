"""The guard's view: what an experiment's sandbox shows, so that a parent importing on the host reads
nothing the sandbox would have hidden (``parent/import_guard.py`` applies it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import mounts, package_data


@dataclass(frozen=True)
class SandboxTrees:
    """The paths an experiment's sandbox shows read-only (and the data hidden in them), for the guard."""

    read: tuple[str, ...]
    masked: tuple[str, ...]

    def guard(self) -> dict:
        ancestors = {str(parent) for tree in self.read for parent in Path(tree).parents}
        return {"read": list(self.read), "masked": list(self.masked), "ancestors": sorted(ancestors),
                "scratch": ["/tmp", "/var/tmp", "/dev/shm", mounts.SANDBOX_HOME]}


def sandbox_trees(hidden: list[Path], hide_data: tuple[str, ...], gpus: bool) -> SandboxTrees:
    """The system trees, the allowed files of /etc, the interpreter's trees (those the sandbox binds) and
    /proc; the masks of package data. The workspace and ``{out}`` are left out: importing never needs them."""
    hidden_real = [os.path.realpath(h) for h in hidden]

    def shown(real: str) -> bool:
        return not any(h == real or h.startswith(real.rstrip("/") + "/") for h in hidden_real)

    read = {t for t in mounts.SYSTEM_TREES if os.path.exists(t)}
    read |= {os.path.realpath(t) for t in read}
    read |= {f"/etc/{name}" for name in mounts.ETC_ALLOW if os.path.lexists(f"/etc/{name}")}
    read |= {p for p in mounts.python_paths() if shown(p)}
    read |= {spelt for spelt, real in mounts.python_aliases() if shown(real)}
    read |= {"/proc", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}
    # this package's install metadata beside a checkout (an editable install writes it there): the
    # sandbox binds the package folder alone, so it misses there; importing libraries that list the
    # installed distributions (pydantic looks for plugins) reads it. Names and entry points, no data.
    package = Path(__file__).resolve().parents[2]
    read |= {str(p) for p in package.parent.glob(f"{package.name}*.*-info") if p.suffix in (".egg-info", ".dist-info")}
    if gpus:
        read |= {"/sys"}
    masks = package_data.masks(hide_data)
    return SandboxTrees(tuple(sorted(read)), tuple(sorted((*masks.folders, *masks.files))))
