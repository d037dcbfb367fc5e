"""Hand an experiment's ``{out}`` to the evaluator without letting it become a confused deputy.

The evaluator runs outside the sandbox, next to private data. A link planted in ``{out}`` could make it
read (and echo into an error message) a file the experiment could never see, a hard link could alias
a file elsewhere, and a FIFO or a huge file could hang it or exhaust memory. So the harness copies
only regular, singly linked files, opened without following links and read within a size budget,
into a folder the evaluator owns, and the evaluator reads that copy.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

DEFAULT_MAX_BYTES = 2 << 30


def collect(out: Path, dest: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """Copy the regular files under ``out`` into ``dest``; returns one line per thing refused."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    refused: list[str] = []
    budget = max_bytes
    for dirpath, dirnames, filenames in os.walk(out, followlinks=False):
        base = Path(dirpath)
        rel_base = base.relative_to(out)
        for name in list(dirnames):
            if (base / name).is_symlink():
                refused.append(f"{(rel_base / name).as_posix()}: a symbolic link")
                dirnames.remove(name)
            else:
                (dest / rel_base / name).mkdir()
        for name in filenames:
            rel = (rel_base / name).as_posix()
            copied, why = _copy_one(base / name, dest / rel_base / name, budget)
            if why:
                refused.append(f"{rel}: {why}")
            budget -= copied
    return refused


def _copy_one(src: Path, dst: Path, budget: int) -> tuple[int, str]:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return 0, "a symbolic link" if os.path.islink(src) else f"unreadable ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return 0, "not a regular file"
        if info.st_nlink != 1:
            return 0, "a hard link to another file"
        if info.st_size > budget:
            return 0, f"over the artefact size budget ({info.st_size} bytes, {max(0, budget)} left)"
        copied = 0
        with os.fdopen(os.dup(fd), "rb") as reader, open(dst, "wb") as writer:
            while chunk := reader.read(min(1 << 20, budget - copied + 1)):
                copied += len(chunk)
                if copied > budget:
                    writer.close()
                    dst.unlink()
                    return 0, "grew past the artefact size budget while being read"
                writer.write(chunk)
        return copied, ""
    finally:
        os.close(fd)
