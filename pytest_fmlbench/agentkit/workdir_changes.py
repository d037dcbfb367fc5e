"""What a coding tool changed in its working copy besides the editable files: ignored, and noted in the step.

Only the editable files are taken from the working copy. A change anywhere else (a protected file the
sandbox let through, a new helper module, a data file) does not reach the validation run, so each step
notes the paths that differ from the working copy as the tool got it: the tool's view then differed from
what was validated. Bytecode caches are left out, and the scan stops at ``MAX_ENTRIES`` entries, so that
a tool that makes a million files costs each step a bounded time.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_ENTRIES = 50_000
MAX_LISTED = 200
_SKIPPED_DIRS = frozenset({"__pycache__"})

State = dict[str, tuple]


def scan(root: Path | str, skip: set[str] | frozenset[str] = frozenset()) -> tuple[State, bool]:
    """(relative path -> what identifies its content, whether the scan stopped early). Links are not followed."""
    state: State = {}
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir)))
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            if len(state) >= MAX_ENTRIES:
                return state, True
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in _SKIPPED_DIRS:
                    stack.append(rel)
                continue
            if rel in skip:
                continue
            if stat.S_ISLNK(info.st_mode):
                try:
                    state[rel] = ("link", os.readlink(entry.path))
                except OSError:
                    state[rel] = ("link", None)
            else:
                state[rel] = ("file", info.st_size, info.st_mtime_ns, stat.S_IMODE(info.st_mode))
    return state, False


def changed(before: State, after: State) -> list[str]:
    """Paths added, removed or changed, sorted."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))


def listed(paths: list[str], truncated: bool) -> list[str]:
    """At most MAX_LISTED paths, with a last entry saying what was left out."""
    shown = paths[:MAX_LISTED]
    if len(paths) > MAX_LISTED:
        shown.append(f"[... and {len(paths) - MAX_LISTED} more]")
    if truncated:
        shown.append(f"[the working copy holds more than {MAX_ENTRIES} entries: the rest was not checked]")
    return shown
