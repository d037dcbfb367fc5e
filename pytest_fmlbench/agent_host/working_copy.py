"""An agent's working copy of the workspace, for a coding tool that edits files and runs a shell.

It is made from the run's search workspace (prepared, holding the files the run continues from) in a
temporary folder of its own: never inside the run directory or the task folder, which the agent's
sandbox hides. Inside the sandbox it sits at ``/workspace``: writable, with the task's protected files
and folders bound read-only over it. The harness never reads it back; the agent sends the editable files
through the protocol like any agent, so whatever else the tool changes there is ignored.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .. import scratch
from ..isolation import Bind, SandboxUnavailable
from ..workspace import protected_paths

WORKDIR_INSIDE = "/workspace"


class WorkingCopy:
    def __init__(self, root: Path, protected: list[Path]):
        self.root = root
        self.path = root / "workspace"
        self.protected = protected

    @classmethod
    def create(cls, source: Path, protected_globs: list[str], hidden: list[Path]) -> WorkingCopy:
        """A copy of ``source``; raises SandboxUnavailable where the temporary folder lies inside a hidden path."""
        where = Path(tempfile.gettempdir())
        inside = [h for h in hidden if _under(where, h)]
        if inside:  # checked before anything is made there
            raise SandboxUnavailable(f"the agent's working copy would be made in {where}, inside {inside[0]}, "
                                     "which its sandbox must hide; point TMPDIR elsewhere")
        root = Path(scratch.mkdtemp(prefix="workdir-"))
        try:
            shutil.copytree(source, root / "workspace", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
            protected = protected_paths(root / "workspace", list(protected_globs))
        except BaseException:
            scratch.remove_tree(root)
            raise
        return cls(root, protected)

    def binds(self) -> list[Bind]:
        """The copy at ``/workspace``, writable, then each protected path read-only over it."""
        binds = [Bind(self.path, WORKDIR_INSIDE, writable=True)]
        for path in self.protected:
            binds.append(Bind(path, f"{WORKDIR_INSIDE}/{path.relative_to(self.path).as_posix()}"))
        return binds

    def close(self) -> None:
        scratch.remove_tree(self.root)


def _under(path: Path, folder: Path) -> bool:
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")
