"""The shared code editor: the only way an agent changes the workspace.

Two edit forms, as in the original: a whole-file rewrite, and SEARCH/REPLACE blocks for larger files.
Only the task's editable files can be written; Python must parse and JSON must load before anything is
written. ``Editor.apply`` applies an edit touching several files all or nothing, each SEARCH part
matching exactly once; ``apply_each`` computes the FML-bench port's way (code_editor.py 305-352): each
file or block on its own, in order, a failing one skipped, the first match replaced, and code calling
one of the port's blocklisted functions refused.

An edit is an agent's data: whatever it holds, applying it never raises, and costs time and memory bounded
by the caps. A file is at most MAX_EDITABLE_BYTES at every point of an edit (a SEARCH/REPLACE block that
would grow it past the cap fails there). Python's parser needs several hundred bytes of memory per byte of
a dense source file (``x=1`` lines: 1.2 GB for 2 MB), so a file over PARSE_IN_PROCESS_CHARS is parsed in a
short-lived process of its own, within PARSE_MEMORY_BYTES and PARSE_TIMEOUT_S, never in the harness's.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .untrusted import read_untrusted
from .safe_text import code_points

# The original rewrites a file whole while it holds at most this many newlines (code_editor.py 218:
# ``count("\n") <= 500``), and asks for SEARCH/REPLACE blocks beyond.
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


# an editable file, in UTF-8: about ten times the largest any task starts from (DomainBed's algorithms.py, about
# 100 KB; the lite tasks' are under 9 KB), and more code than a model's context shows (about 250k tokens). It
# bounds the protocol's message (protocol.MAX_MESSAGE_BYTES). A larger file on disk reads as empty (read()).
MAX_EDITABLE_BYTES = 1 << 20
# Python's parser costs up to ~620 bytes per source byte: at most ~40 MB in the harness's process
PARSE_IN_PROCESS_CHARS = 64 << 10
# the separate parse of a larger file: the densest 1 MiB file needs about 650 MB and 4 s
PARSE_MEMORY_BYTES = 1536 << 20
PARSE_TIMEOUT_S = 60.0
# what no editable file holds: NUL (Python refuses it, no text file has it), lone surrogates (not Unicode)
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


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
        except (RecursionError, MemoryError) as exc:
            return EditResult(applied=False, error=f"the edit could not be checked: {type(exc).__name__}")
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
                _check_text(rel, edit.content)
                staged[rel] = edit.content
            else:
                _check_text(rel, edit.replace)
                staged[rel] = _search_replace(rel, staged[rel], edit.search, edit.replace)
            # before the next block searches it: each block's cost stays bounded by the cap
            _check_size(rel, staged[rel])
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
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(content)
        os.replace(tmp, target)


def _check_text(rel: str, content: str) -> None:
    bad = _NOT_TEXT.search(content)
    if bad is not None:
        what = "NUL" if bad.group() == "\0" else f"a lone surrogate (U+{ord(bad.group()):04X})"
        raise EditError(f"{rel}: holds {what}, which no source file holds")


def _check_size(rel: str, content: str) -> None:
    # a string of only ASCII (known without a scan) is its own length in UTF-8
    size = len(content) if len(content) > MAX_EDITABLE_BYTES or content.isascii() else len(content.encode())
    if size > MAX_EDITABLE_BYTES:
        raise EditError(f"{rel}: {size} bytes or more; an editable file holds at most {MAX_EDITABLE_BYTES}")


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


def _os_call(name: str) -> str:
    return rf"\bos\s*\.\s*{name}\s*\("


# The calls the port's editor refuses in generated code (code_editor.py 38-63): deleting, moving or
# copying files, running programs, dynamic imports. Each: (what the refusal names, pattern).
BLOCKED_CALLS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (label, re.compile(pattern)) for label, pattern in (
        *((f"os.{name}()", _os_call(name)) for name in ("remove", "unlink", "rmdir", "removedirs", "rename",
                                                         "replace", "system", "popen")),
        ("os.exec*()", _os_call(r"exec\w*")),
        ("os.spawn*()", _os_call(r"spawn\w*")),
        *((f"shutil.{name}()", rf"\bshutil\s*\.\s*{name}\s*\(") for name in ("rmtree", "move")),
        ("shutil.copy*()", r"\bshutil\s*\.\s*copy\w*\s*\("),
        ("subprocess.*()", r"\bsubprocess\s*\.\s*\w+\s*\("),
        ("__import__()", r"\b__import__\s*\("),
        (".unlink()", r"\.\s*unlink\s*\("),
        (".rmdir()", r"\.\s*rmdir\s*\("),
    )
)


def blocked_calls(code: str) -> list[str]:
    """The blocklisted calls ``code`` makes, as the port finds them: by pattern, plus exec() and eval()
    called by name (never a method such as model.eval()) when the code parses."""
    found = [label for label, pattern in BLOCKED_CALLS if pattern.search(code)]
    try:
        # in the agent's process (apply_each is the agent's side), within its own memory limit
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return found
    found += [f"{node.func.id}() [line {node.lineno}]" for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval")]
    return found


@dataclass(frozen=True)
class EachApplied:
    files: dict[str, str]  # every editable file after the edits that applied
    written: tuple[str, ...]  # files an applied edit wrote (also with unchanged content), first write first
    skipped: tuple[str, ...]  # one line per edit that did not apply: which file, and why


def apply_each(files: dict[str, str], edits: list[Edit]) -> EachApplied:
    """The port's application, on ``files`` (nothing is written): each edit in turn, on the content the
    edits before it left. A whole file must parse (by type: Python, JSON) and call nothing blocklisted; a
    SEARCH part must occur in the file (exactly, the first occurrence is replaced), the file must still
    parse afterwards, and the REPLACE part must call nothing blocklisted. An edit failing a check is
    skipped; the others still apply."""
    staged, written, skipped = dict(files), [], []
    for edit in edits:
        rel = edit.path
        if rel not in staged:
            skipped.append(f"{rel}: not an editable file")
            continue
        if isinstance(edit, WholeFile):
            new, added, what = edit.content, edit.content, "whole file"
        else:
            if edit.search not in staged[rel]:
                skipped.append(f"{rel}: SEARCH block not found in the file")
                continue
            new, added, what = staged[rel].replace(edit.search, edit.replace, 1), edit.replace, "REPLACE block"
        try:
            _check_text(rel, added)
            _check_size(rel, new)
            _validate(rel, new)
        except EditError as exc:
            skipped.append(f"{exc}{' after the SEARCH/REPLACE' if what == 'REPLACE block' else ''}")
            continue
        refused = blocked_calls(added)
        if refused:
            skipped.append(f"{rel}: {what} refused: it calls {', '.join(refused)}")
            continue
        staged[rel] = new
        if rel not in written:
            written.append(rel)
    return EachApplied(staged, tuple(written), tuple(skipped))


def _validate(rel: str, content: str) -> None:
    """Raises EditError, one line, for a Python file that does not parse or a JSON file that does not load."""
    if rel.endswith(".py"):
        problem = syntax_problem(rel, content)
        if problem:
            raise EditError(f"{rel}: does not parse: {problem}")
    elif rel.endswith(".json"):
        try:
            json.loads(content)
        except json.JSONDecodeError as exc:
            raise EditError(f"{rel}: invalid JSON: {exc.msg} (line {exc.lineno})") from None
        except (ValueError, RecursionError, MemoryError) as exc:
            # an integer of more digits than Python converts, nesting past the recursion limit
            raise EditError(f"{rel}: invalid JSON: {_first_line(exc)}") from None


def syntax_problem(rel: str, source: str) -> str | None:
    """Why ``source`` is not Python (one line), or None when it parses."""
    if len(source) > PARSE_IN_PROCESS_CHARS:
        return _syntax_problem_apart(rel, source)
    try:
        ast.parse(source, filename=rel)
    except SyntaxError as exc:
        return _first_line(exc.msg + (f" (line {exc.lineno})" if exc.lineno else ""))
    except (ValueError, RecursionError, MemoryError) as exc:
        return _first_line(exc)
    return None


# the separate parse: its limits first, the source from stdin, one line of answer (none: it parses)
_PARSE_APART = """
import ast, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
source = sys.stdin.buffer.read().decode()
try:
    ast.parse(source, filename=sys.argv[1])
except SyntaxError as exc:
    sys.stdout.buffer.write((exc.msg + (f" (line {exc.lineno})" if exc.lineno else "")).encode())
except MemoryError:
    sys.exit(3)
except (ValueError, RecursionError) as exc:
    sys.stdout.buffer.write(f"{type(exc).__name__}: {exc}".encode())
"""


def _syntax_problem_apart(rel: str, source: str) -> str | None:
    memory = f"{PARSE_MEMORY_BYTES >> 20} MB"
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _PARSE_APART, rel, str(PARSE_MEMORY_BYTES)],
                              input=source.encode(), capture_output=True, timeout=PARSE_TIMEOUT_S, env={})
    except subprocess.TimeoutExpired:
        return f"the harness could not parse it within {PARSE_TIMEOUT_S:g} s"
    if done.returncode != 0:
        return f"the harness could not parse it within {memory} of memory (its parser exited {done.returncode})"
    answer = done.stdout.decode(errors="replace").strip()
    return _first_line(answer) if answer else None


def _first_line(problem: object) -> str:
    """An exception or a parser's answer as one line: its first, cut, control characters spelt out."""
    lines = str(problem).strip().splitlines()
    line = lines[0][:300] if lines else type(problem).__name__
    return code_points(line)
