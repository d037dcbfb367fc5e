"""Whole lines of our own on pytest's terminal.

pytest's ensure_newline() knows only of its own file prefixes; under xdist the progress letters and
"[100%]" leave the line open without one, and a line written then was glued to them.

A line may carry an agent's words: its control characters (escape sequences, carriage returns) are
spelt out here, whatever the caller did, so no line steers the terminal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .safe_text import printable


def write_whole_line(reporter, line: str, **markup: bool) -> None:
    """Writes ``line`` on a line of its own: never after what the terminal's line already holds."""
    reporter.ensure_newline()
    if reporter._tw.width_of_current_line:
        reporter._tw.line()
    reporter.write_line(printable(line, None), **markup)
    reporter.flush()


def line_writer(reporter) -> Callable[[str], None]:
    """``write_whole_line`` for one reporter, from any thread (the live display writes from its own)."""
    lock = threading.Lock()

    def write_line(line: str) -> None:
        with lock:
            write_whole_line(reporter, line)

    return write_line
