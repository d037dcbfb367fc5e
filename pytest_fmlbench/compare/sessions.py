"""Saved sessions: each benchmark session leaves ``<out>/sessions/NNNN_<UTC time>_<commit>.json``.

A saved session names the run directories it covered and the scores they had when it ended. The
scores are kept, not only the pointers, because a later ``--fresh`` session of the same run identity
rewrites the same run directory: a pointer alone would then compare the new runs with themselves.

References a user can give (``--fmlbench-compare``, ``fmlbench compare``): ``last``, ``last-N`` (N
sessions before the last), a number (``3`` or ``0003``), a saved session's name (its file name without
``.json``), or a path to a session file.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, ValidationError

from ..reports.disclosure import Hardware
from ..reports.provenance import run_git
from .sides import CompareInputError, Side

SESSIONS_DIR = "sessions"
NAME = re.compile(r"^(\d{4,})_")
LAST = re.compile(r"^last(?:-(\d+))?$")


class SavedRun(BaseModel):
    model_config = ConfigDict(extra="ignore")
    nodeid: str = ""
    run_dir: str
    scores: dict[str, Any]


class SavedSession(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int
    name: str
    created_at: datetime
    commit: str
    args: list[str] = []
    exitstatus: int | None = None
    # the machine it ran on (a comparison across machines counts the tasks' kernel spread as noise); None in
    # sessions saved before it was kept
    hardware: Hardware | None = None
    runs: list[SavedRun]

    def side(self) -> Side:
        return Side.from_rows(f"session {self.name}", [run.scores for run in self.runs], hardware=self.hardware)


def git_commit(cwd: Path) -> str:
    """Short commit of the checkout the session ran in ('nogit' outside one); '+' when it had changes."""
    head = run_git(cwd, "rev-parse", "--short", "HEAD")
    if not head:
        return "nogit"
    dirty = run_git(cwd, "status", "--porcelain", "--untracked-files=no")
    return head + ("+" if dirty else "")


def saved(sessions_dir: Path) -> list[Path]:
    """Saved session files, oldest (lowest number) first."""
    if not sessions_dir.is_dir():
        return []
    files = [p for p in sessions_dir.glob("*.json") if NAME.match(p.name)]
    return sorted(files, key=lambda p: (int(NAME.match(p.name).group(1)), p.name))


def save(sessions_dir: Path, runs: list[tuple[str, Path, dict[str, Any]]], *, commit: str, args: list[str],
         exitstatus: int | None, out_dir: Path | None = None, hardware: Hardware | None = None) -> Path:
    """Write the next numbered session file. ``runs``: (node id, run directory, score row). The number is
    taken under a file lock, so sessions sharing an output folder never take the same one."""
    sessions_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc)
    with FileLock(sessions_dir / ".lock"):
        existing = saved(sessions_dir)
        number = int(NAME.match(existing[-1].name).group(1)) + 1 if existing else 1
        name = f"{number:04d}_{stamp:%Y%m%dT%H%M%SZ}_{re.sub(r'[^A-Za-z0-9+]', '-', commit)}"
        session = SavedSession(
            number=number, name=name, created_at=stamp, commit=commit, args=args, exitstatus=exitstatus,
            hardware=hardware, runs=[SavedRun(nodeid=nodeid, run_dir=_relative(run_dir, out_dir), scores=_plain(row))
                  for nodeid, run_dir, row in runs])
        path = sessions_dir / f"{name}.json"
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(session.model_dump_json(indent=2))
        os.replace(tmp, path)
    return path


def load(path: Path) -> SavedSession:
    try:
        return SavedSession.model_validate_json(Path(path).read_text())
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise CompareInputError(f"{path} is not a readable saved session: {first}") from None


def resolve(ref: str, sessions_dir: Path) -> Path:
    """The session file a reference names; CompareInputError (one line) when it names none."""
    files = saved(sessions_dir)
    chosen: Path | None = None
    last = LAST.match(ref)
    if last:
        back = int(last.group(1) or 0)
        if back >= len(files):
            have = f"only {len(files)} saved" if files else "none saved yet"
            raise CompareInputError(f"no saved session {ref!r} in {sessions_dir} ({have})")
        chosen = files[-1 - back]
    elif ref.isdigit():
        chosen = next((p for p in files if int(NAME.match(p.name).group(1)) == int(ref)), None)
    else:
        chosen = next((p for p in files if p.stem == ref or p.name == ref), None)
    if chosen is None:
        names = ", ".join(p.stem for p in files[-3:]) or "none saved yet"
        raise CompareInputError(f"unknown saved session {ref!r} in {sessions_dir} (latest: {names}; or give a "
                                "folder of run records)")
    return chosen


def side_for(ref: str, sessions_dir: Path, base: Path | None = None) -> Side:
    """A side from a folder of runs, a session file, or a saved session's reference."""
    from .sides import from_folder

    path = Path(ref) if base is None or Path(ref).is_absolute() else Path(base) / ref
    if path.is_dir():
        return from_folder(path, label=ref)
    if path.is_file():
        return load(path).side()
    return load(resolve(ref, sessions_dir)).side()


def _relative(run_dir: Path, out_dir: Path | None) -> str:
    if out_dir is not None:
        try:
            return str(Path(run_dir).resolve().relative_to(Path(out_dir).resolve()))
        except ValueError:
            pass
    return str(run_dir)


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-safe: NaN becomes None (pydantic writes NaN as null anyway, and reads it back as None)."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, float) and value != value:
            value = None
        out[key] = value
    return out
