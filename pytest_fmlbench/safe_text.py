"""Text an agent chose, made safe for the place it is shown or stored.

An agent's words (its name, options, plans, end reasons, errors, actions) reach the terminal, rich tables,
CSV files and file names. The protocol checks them where they enter, but records written by older versions
or edited by hand can hold anything, so every sink passes them through one of these first:

- ``printable``: control characters (escape sequences, carriage returns, NUL), lone surrogates and
  other invisible characters (bidi overrides) spelt out as Python escapes, within a length a line can show;
- ``one_line``: the first line of a text, spelt out the same way;
- ``csv_cell``: a cell a spreadsheet would run as a formula starts with a quote (OWASP's rule);
- ``file_name``: one path component, the text itself where it is already a plain name.

Pure string functions: no import of the package or of rich, so any module may use them.
"""

from __future__ import annotations

import hashlib
import re

# as much of an agent's words as one terminal line or table cell shows (twice the protocol's label length)
MAX_SHOWN_CHARS = 400
CUT_MARK = " [...]"
# OWASP, CSV injection: a cell starting with one of these may be read as a formula by a spreadsheet
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._:+-]*")
_NOT_NAME = re.compile(r"[^A-Za-z0-9._:+-]+")
MAX_NAME_CHARS = 100


def spelt_out(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable as itself (control characters, lone
    surrogates, format characters such as bidi overrides) written as its Python escape, but those in
    ``keep`` (a cell that wraps keeps its newlines)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def code_points(text: str) -> str:
    """``text`` with each character that is not printable as itself written as its code point (``\\u001b``),
    the form the harness's one-line refusals quote an agent's words in."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def printable(text: object, limit: int | None = MAX_SHOWN_CHARS, keep: str = "") -> str:
    """``text`` spelt out (see ``spelt_out``) and cut to ``limit`` characters with a mark saying so."""
    text = str(text)
    if limit is None:
        return spelt_out(text, keep)
    # spelling out lengthens the text: only what can be shown is spelt out, so a huge text costs nothing
    shown = spelt_out(text[:limit + 1], keep)
    return shown if len(shown) <= limit and len(text) <= limit else shown[:limit] + CUT_MARK


def one_line(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """The first line, within a length a terminal line can show, control characters spelt out: an agent's
    words stay one line of output and cannot steer the terminal that shows them."""
    stripped = text.strip()
    return printable(stripped.splitlines()[0] if stripped else "", limit)


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs: a text starting like a formula gets a leading quote, control
    characters are spelt out (the file stays valid UTF-8); numbers, and texts that are plain numbers such
    as ``-0.5``, stay as they are."""
    if not isinstance(value, str):
        return value
    text = spelt_out(value)
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def file_name(text: str, limit: int = MAX_NAME_CHARS) -> str:
    """One path component for a text an agent chose: the text itself where it is a plain name (letters,
    digits and ``._:+-``, not starting with a dot or dash, at most ``limit`` characters), else its plain
    characters followed by a hash of the whole text, so two texts never share a name and none is ``..``,
    hidden, or too long for the file system."""
    if _NAME.fullmatch(text) and len(text) <= limit:
        return text
    plain = _NOT_NAME.sub("-", text).strip(".-")[:limit].rstrip(".-")
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{plain or 'name'}-{digest}"
