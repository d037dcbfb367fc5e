"""This process's folder of temporary files: removed at its exit, and by the user's next process where it
was killed first.

Every temporary folder the harness makes in the temporary directory (code-only copies of hidden data
folders, agents' working copies and scratch, the gateway's and the external agent's sockets) lies in one
folder per process. A process killed before its exit handlers used to leave all of them behind: a
cancelled Slurm job is one (submitit bypasses scancel's SIGTERM, then Slurm kills the job), so a shared
node's /tmp filled with one set per cancelled job.

The process holds a lock on a file in its folder for its whole life; a folder whose lock anyone can take
exclusively has lost its process, and the next process of the same user removes it. A lock rather than a
pid, because a pid means nothing across the PID namespaces of containers that share one /tmp. A folder
without that file (one being made) is left alone, and so is anything not owned by this user.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import signal
import tempfile
import threading

PREFIX = "fmlbench-scratch-"
OWNER_FILE = ".owner"
_owner_locks: list[int] = []  # held open, never read: closing one would free its lock
_folders: dict[str, str] = {}  # the temporary directory -> this process's scratch folder in it


def mkdtemp(prefix: str) -> str:
    """A new folder (mode 0700) in this process's scratch folder."""
    return tempfile.mkdtemp(prefix=prefix, dir=folder())


def folder() -> str:
    """This process's scratch folder in the temporary directory as it is now (``TMPDIR``), made on first use
    there, after removing those of killed processes."""
    where = tempfile.gettempdir()
    root = _folders.get(where)
    if root is None or not os.path.isdir(root):  # or a cleaner emptied the host's /tmp during a long session
        remove_left_behind()
        root = _folders[where] = tempfile.mkdtemp(prefix=PREFIX, dir=where)
        # locked before it takes its name: another process's sweep never finds it unlocked
        making = os.path.join(root, OWNER_FILE + ".making")
        owner = os.open(making, os.O_CREAT | os.O_RDONLY | os.O_CLOEXEC, 0o600)
        fcntl.flock(owner, fcntl.LOCK_SH)
        os.rename(making, os.path.join(root, OWNER_FILE))
        _owner_locks.append(owner)
        atexit.register(_remove_at_exit, root, os.getpid())
    return root


def remove_left_behind() -> None:
    """Removes the scratch folders of this user's processes that ended without their exit handlers."""
    try:
        entries = [e for e in os.scandir(tempfile.gettempdir()) if e.name.startswith(PREFIX)]
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_symlink() or not entry.is_dir() or entry.stat().st_uid != os.getuid():
                continue
            # O_NONBLOCK: never wait on an owner file that is not a regular file
            owner = os.open(os.path.join(entry.path, OWNER_FILE),
                            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: its process lives
                remove_tree(entry.path)
            finally:
                os.close(owner)


def _remove_at_exit(root: str, made_by: int) -> None:
    if os.getpid() != made_by:  # a forked child inherits the exit handler, not the folder
        return
    # a terminal's Ctrl-C reaches every process of its group, xdist's workers included: one that lands in
    # this removal would leave the folder behind (and print a traceback of the removal)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    remove_tree(root)


def remove_tree(root: str | os.PathLike) -> None:
    """Remove a folder a tool may have left unwritable (a chmod 000 folder, read-only files); links are
    removed, never followed."""

    def unlock(func, path, _exc) -> None:
        for target in (os.path.dirname(path), path):
            try:
                if not os.path.islink(target):
                    os.chmod(target, 0o700)
            except OSError:
                pass
        try:
            func(path)
        except OSError:
            pass

    shutil.rmtree(root, onerror=unlock)
