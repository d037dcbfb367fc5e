"""Where an agent crashed, in its own code: the frame a user opens first, found in the traceback it sent.

The traceback is the agent's text (its process formats it): it is parsed, never trusted, and every piece
shown is spelt out (``safe_text``). Frames in the harness, the standard library or an installed package
are passed over: the line that matters is the last one in the agent's own files.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..safe_text import printable

# a frame's header as the traceback module writes it; the next line, if indented code, is its source
_FRAME = re.compile(r'^  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_MARKERS = set("^~ ")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    source: str

    def __str__(self) -> str:
        where = printable(f"{self.file}:{self.line} in {self.function}", 300)
        return f"{where}: {printable(self.source, 200)}" if self.source else where


def _frames(traceback_text: str) -> list[Frame]:
    lines = traceback_text.splitlines()
    frames = []
    for index, line in enumerate(lines):
        found = _FRAME.match(line)
        if found is None:
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        source = following.strip() if following.startswith("    ") and not set(following) <= _MARKERS else ""
        frames.append(Frame(found["file"], int(found["line"]), found["function"], source))
    return frames


def _inside(path: str, code: str) -> bool:
    path, code = os.path.normpath(path), os.path.normpath(code)
    return path == code or path.startswith(code.rstrip(os.sep) + os.sep)


def agent_frame(traceback_text: str, code: tuple[str, ...] | list[str]) -> Frame | None:
    """The innermost frame of the traceback in the agent's own files and folders (``code``); None where none
    is (a crash in its imports before its code ran, or no code known)."""
    mine = [frame for frame in _frames(traceback_text) if any(_inside(frame.file, where) for where in code)]
    return mine[-1] if mine else None
