"""A small git repository written from a folder of files, with one deterministic commit: the smoke-scale
stand-in of a git artefact (an upstream project's repository, checked out at its pinned commit)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# fixed identity and dates: the same files give the same commit id on every machine
_GIT_ENV = {"GIT_AUTHOR_NAME": "fmlbench fixtures", "GIT_AUTHOR_EMAIL": "fixtures@localhost",
            "GIT_COMMITTER_NAME": "fmlbench fixtures", "GIT_COMMITTER_EMAIL": "fixtures@localhost",
            "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
            "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def write_repository(path: Path, files: Path, message: str) -> None:
    """``path`` becomes a repository whose single commit holds the tree under ``files``."""
    if path.exists():
        shutil.rmtree(path)
    shutil.copytree(files, path, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = {**os.environ, **_GIT_ENV}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", message)
