"""The shared code editor: the only way an agent changes the workspace.

Two edit forms, as in the original: a whole-file rewrite, and SEARCH/REPLACE blocks for larger files.
Only the task's editable files can be written; Python must parse and JSON must load before anything is
written, and an edit touching several files applies all or nothing.
"""

from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .evalkit import read_untrusted

# The original rewrites files up to this many lines whole and asks for SEARCH/REPLACE beyond.
WHOLE_FILE_MAX_LINES = 500


@dataclass(frozen=True)
class WholeFile:
    path: str
    content: str


@dataclass(frozen=True)
class SearchReplace:
    path: str
    search: str
    replace: str


Edit = WholeFile | SearchReplace


@dataclass(frozen=True)
class EditResult:
    applied: bool
    changed: tuple[str, ...] = ()
    error: str = ""


class EditError(ValueError):
    """An edit that cannot be applied; the message says which file and why."""


MAX_EDITABLE_BYTES = 8 << 20


class Editor:
    def __init__(self, workspace: Path, editable: list[str]):
        self.workspace = workspace
        self.editable = tuple(editable)

    def read(self) -> dict[str, str]:
        """Current content of every editable file (a missing one reads as empty).

        The experiment can replace an editable file with a link: it is never followed (it would copy
        whatever it points to, a credential say, into snapshots and the next LLM prompt) and reads as empty.
        """
        files = {}
        for rel in self.editable:
            try:
                files[rel] = read_untrusted(self.workspace / rel, MAX_EDITABLE_BYTES).decode(errors="replace")
            except OSError:
                files[rel] = ""
        return files

    def _check_path(self, path: str) -> str:
        rel = PurePosixPath(path.strip()).as_posix()
        if rel not in self.editable:
            raise EditError(f"{path!r} is not editable; editable files: {', '.join(self.editable)}")
        return rel

    def apply(self, edits: list[Edit]) -> EditResult:
        """Apply edits atomically across files; never raises for a bad edit, reports it instead."""
        before = self.read()
        try:
            new_content = self._plan(edits)
        except EditError as exc:
            return EditResult(applied=False, error=str(exc))
        for rel, content in new_content.items():
            self._write(rel, content)
        return EditResult(applied=True, changed=tuple(sorted(r for r, c in new_content.items() if before[r] != c)))

    def set_files(self, files: dict[str, str]) -> EditResult:
        """Make the editable files exactly ``files`` (e.g. restoring a snapshot)."""
        return self.apply([WholeFile(path, content) for path, content in files.items()])

    def _plan(self, edits: list[Edit]) -> dict[str, str]:
        if not edits:
            raise EditError("the edit contains no file changes")
        staged = self.read()
        touched: dict[str, str] = {}
        for edit in edits:
            rel = self._check_path(edit.path)
            if isinstance(edit, WholeFile):
                staged[rel] = edit.content
            else:
                staged[rel] = _search_replace(rel, staged[rel], edit.search, edit.replace)
            touched[rel] = staged[rel]
        for rel, content in touched.items():
            _validate(rel, content)
        return touched

    def _write(self, rel: str, content: str) -> None:
        target = self.workspace / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # write a new inode and rename over the old entry: a link planted at this path is replaced,
        # never followed into a protected file
        tmp = target.with_name(f".{target.name}.fmlbench-edit")
        with open(tmp, "w") as fh:
            fh.write(content)
        os.replace(tmp, target)


def _search_replace(rel: str, text: str, search: str, replace: str) -> str:
    if not search:
        raise EditError(f"{rel}: empty SEARCH block")
    count = text.count(search)
    if count == 0:
        # tolerate trailing-whitespace differences the way LLM diffs usually drift
        stripped = "\n".join(line.rstrip() for line in search.splitlines())
        normalised = "\n".join(line.rstrip() for line in text.splitlines())
        if stripped and normalised.count(stripped) == 1:
            return normalised.replace(stripped, replace, 1) + ("\n" if text.endswith("\n") else "")
        raise EditError(f"{rel}: SEARCH block not found in the file")
    if count > 1:
        raise EditError(f"{rel}: SEARCH block matches {count} places; include more context")
    return text.replace(search, replace, 1)


def _validate(rel: str, content: str) -> None:
    if rel.endswith(".py"):
        try:
            ast.parse(content, filename=rel)
        except SyntaxError as exc:
            raise EditError(f"{rel}: does not parse: {exc.msg} (line {exc.lineno})") from None
    elif rel.endswith(".json"):
        try:
            json.loads(content)
        except json.JSONDecodeError as exc:
            raise EditError(f"{rel}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
