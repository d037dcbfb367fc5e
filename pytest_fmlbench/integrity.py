"""Protected-file manifests: hash before the first step, verify after every step and before the test."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
from dataclasses import dataclass
from pathlib import Path

# Files that Python would import or execute if they appeared in the experiment's working directory.
_IMPORTABLE_SUFFIXES = (".py", ".pyc", ".pyo", ".so", ".pyd", ".pth")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _walk_files(root: Path) -> list[Path]:
    """Every non-directory entry below root (links included, not followed)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        # a link to a directory shows up in dirnames; record it as an entry, do not descend
        for name in list(dirnames):
            if (base / name).is_symlink():
                found.append(base / name)
                dirnames.remove(name)
        found.extend(base / name for name in filenames)
    return found


def protected_files(workspace: Path, globs: list[str]) -> list[Path]:
    """Files matched by the task's protected globs; a matched directory protects everything below it."""
    found: set[Path] = set()
    for pattern in globs:
        for path in workspace.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                found.update(p for p in _walk_files(path) if not p.is_symlink())
            elif path.is_file() and not path.is_symlink():
                found.add(path)
    return sorted(found)


@dataclass(frozen=True)
class Manifest:
    """sha256 of every protected file, by label ('workspace/train.py', 'harness/evaluate.py')."""

    hashes: dict[str, str]
    # where each labelled tree lives for this manifest
    roots: dict[str, Path]
    # every path present in the workspace when the manifest was taken (to spot new files later)
    workspace_files: frozenset[str]
    editable: frozenset[str]

    @classmethod
    def take(cls, workspace: Path, protected_globs: list[str], harness: Path, editable: list[str]) -> Manifest:
        hashes: dict[str, str] = {}
        for path in protected_files(workspace, protected_globs):
            hashes[f"workspace/{path.relative_to(workspace).as_posix()}"] = sha256_file(path)
        for path in sorted(_walk_files(harness)):
            if "__pycache__" in path.parts:
                continue
            hashes[f"harness/{path.relative_to(harness).as_posix()}"] = sha256_file(path)
        present = frozenset(p.relative_to(workspace).as_posix() for p in _walk_files(workspace))
        return cls(hashes, {"workspace": workspace, "harness": harness}, present, frozenset(editable))

    def with_workspace(self, workspace: Path) -> Manifest:
        """The same expectations, checked against another (fresh) workspace copy."""
        present = frozenset(p.relative_to(workspace).as_posix() for p in _walk_files(workspace))
        return Manifest(self.hashes, {**self.roots, "workspace": workspace}, present | self.workspace_files,
                        self.editable)

    def _resolve(self, label: str) -> Path:
        tree, _, rel = label.partition("/")
        return self.roots[tree] / rel

    def verify(self) -> list[str]:
        """Return one message per violation; empty when everything protected is intact."""
        problems: list[str] = []
        for label, expected in self.hashes.items():
            path = self._resolve(label)
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                problems.append(f"protected file {label} was deleted")
                continue
            if stat.S_ISLNK(mode):
                problems.append(f"protected file {label} was replaced by a link to {os.readlink(path)}")
            elif not stat.S_ISREG(mode):
                problems.append(f"protected file {label} was replaced by a non-regular file")
            elif sha256_file(path) != expected:
                problems.append(f"protected file {label} was modified (sha256 differs)")
        problems.extend(self._new_modules())
        return problems

    def _new_modules(self) -> list[str]:
        """New importable files in the workspace could shadow protected code or installed libraries."""
        workspace = self.roots["workspace"]
        protected_modules = {
            Path(label).stem for label in self.hashes if label.startswith("workspace/") and label.endswith(".py")
        }
        problems = []
        for path in _walk_files(workspace):
            rel = path.relative_to(workspace).as_posix()
            if rel in self.workspace_files or rel in self.editable:
                continue
            if not rel.endswith(_IMPORTABLE_SUFFIXES):
                continue
            top = rel.split("/")[0].split(".")[0]
            if top in protected_modules:
                problems.append(f"new file {rel} shadows protected module {top!r}")
            elif top != "__pycache__" and _is_installed_module(top):
                problems.append(f"new file {rel} shadows installed module {top!r}")
            else:
                problems.append(f"new importable file {rel} is not among the task's editable files")
        return problems


def _is_installed_module(name: str) -> bool:
    if not name.isidentifier():
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
