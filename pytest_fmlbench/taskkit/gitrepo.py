"""A small git repository written from a folder of files, with one deterministic commit: the smoke-scale
stand-in of a git artefact (an upstream project's repository, checked out at its pinned commit), its large
files kept in Git LFS where asked, as a Hugging Face repository keeps its weights."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from ..datacache.lfs import pointer_text

# fixed identity and dates: the same files give the same commit id on every machine
_GIT_ENV = {"GIT_AUTHOR_NAME": "fmlbench fixtures", "GIT_AUTHOR_EMAIL": "fixtures@localhost",
            "GIT_COMMITTER_NAME": "fmlbench fixtures", "GIT_COMMITTER_EMAIL": "fixtures@localhost",
            "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def write_repository(path: Path, files: Path, message: str, lfs: tuple[str, ...] = ()) -> None:
    """``path`` becomes a repository whose single commit holds the tree under ``files``. Files matching an
    ``lfs`` glob are committed as Git LFS pointers, their objects kept in ``.git/lfs/objects/`` (where
    git-lfs keeps them, and a ``file://`` fetch finds them) and their content in the work tree: a checkout
    whose LFS files are in place."""
    if path.exists():
        shutil.rmtree(path)
    shutil.copytree(files, path, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {**os.environ, **_GIT_ENV}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    large = sorted({p for pattern in lfs for p in path.glob(pattern) if p.is_file()})
    if large:
        (path / ".gitattributes").write_text("".join(f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
                                                     for pattern in lfs))
    contents = {}
    for file in large:
        content = file.read_bytes()
        oid = hashlib.sha256(content).hexdigest()
        store = path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4]
        store.mkdir(parents=True, exist_ok=True)
        (store / oid).write_bytes(content)
        file.write_text(pointer_text(oid, len(content)))
        contents[file] = content
    git("add", "-A")
    git("commit", "-q", "-m", message)
    for file, content in contents.items():
        file.write_bytes(content)
