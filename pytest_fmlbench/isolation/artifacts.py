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
    """Copy the regular files under ``out`` into ``dest`` (emptied first, or made); returns one line per
    thing refused."""
    emptied(dest)
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


def emptied(folder: Path) -> None:
    """``folder`` made empty (or made). An existing folder stays the same folder (the same inode): the
    sandbox of a step built ahead of its request binds ``{out}``, and a folder made and removed per step
    costs more than the files it holds. Links inside are removed, never followed."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    # the last experiment may have taken its own rights away (it owns ``{out}`` inside its sandbox)
    os.chmod(folder, stat.S_IMODE(folder.stat().st_mode) | stat.S_IRWXU)
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def _copy_one(src: Path, dst: Path, budget: int) -> tuple[int, str]:
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
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
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            while chunk := os.read(fd, min(1 << 20, budget - copied + 1)):
                copied += len(chunk)
                if copied > budget:
                    os.close(out)
                    out = -1
                    dst.unlink()
                    return 0, "grew past the artefact size budget while being read"
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view):]
        finally:
            if out >= 0:
                os.close(out)
        return copied, ""
    finally:
        os.close(fd)
