"""Tables printed whole: a log or a narrow terminal never gets a number cut to ``0.2…`` or dropped.

rich fits a table to the console's width by shrinking columns; a column that may not wrap (numbers,
task names) is then cut with an ellipsis, and a narrow one can shrink to nothing. A CI log has no
terminal to widen, so a table that does not fit is printed at the narrowest width at which nothing of it
is lost (wrapping columns still wrap), even if that is wider than the console.

Every string a table or a line holds may be an agent's (its name, its end reason, a judge quoting it), so
rich shows it as plain ``Text``: never read as markup (``[/]`` would raise, ``[link=...]`` would link),
never as emoji codes, with control characters spelt out (``LiteralTable``, ``literal``, ``print_whole``).
"""

from __future__ import annotations

import io
from collections import Counter

from rich.console import Console, RenderableType
from rich.table import Column, Table
from rich.text import Text

from ..safe_text import MAX_SHOWN_CHARS, printable

# wide enough for any table of ours at its natural width
LIMIT = 4000
# a cell that wraps (notes, an audit's reasons) shows this much of its text; a name shows MAX_SHOWN_CHARS
WRAPPED_CELL_CHARS = 2000


def literal(value: RenderableType | None, limit: int | None = MAX_SHOWN_CHARS) -> RenderableType | None:
    """A string as rich shows it literally (see the module's docstring); other renderables as they are."""
    return Text(printable(value, limit)) if isinstance(value, str) else value


def wrapped(value: str) -> Text:
    """A long text for a cell that wraps (notes, an audit's reasons): shown literally, its lines kept."""
    return Text(printable(value, WRAPPED_CELL_CHARS, keep="\n"))


class LiteralTable(Table):
    """A rich ``Table`` whose string title, headers and cells are shown literally, never as markup."""

    def __init__(self, *headers: Column | str, title: str | Text | None = None, **options) -> None:
        super().__init__(*(Column(literal(h)) if isinstance(h, str) else h for h in headers),
                         title=literal(title, LIMIT), **options)

    def add_column(self, header: RenderableType = "", footer: RenderableType = "", **options) -> None:
        super().add_column(literal(header), literal(footer), **options)

    def add_row(self, *renderables: RenderableType | None, **options) -> None:
        super().add_row(*(literal(cell) for cell in renderables), **options)


def _rendered(renderable: RenderableType, width: int) -> str:
    buffer = io.StringIO()
    Console(file=buffer, width=width, force_terminal=False, color_system=None).print(renderable)
    return buffer.getvalue()


def _content(text: str) -> Counter:
    """The characters a reader reads: wrapping moves them, cutting loses them (or adds '…'); spaces and box
    drawing (U+2500-U+257F, more of it when rows wrap) do not count."""
    return Counter(ch for ch in text if not ch.isspace() and not "\u2500" <= ch <= "\u257f")


def whole_width(renderable: RenderableType, width: int) -> int:
    """The narrowest width from ``width`` up at which rich loses nothing of ``renderable``."""
    if not isinstance(renderable, Table):
        return width
    whole = _content(_rendered(renderable, LIMIT))
    if _content(_rendered(renderable, width)) == whole:
        return width
    low, high = width, LIMIT  # lossy at low, whole at high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if _content(_rendered(renderable, middle)) == whole else (middle, high)
    return high


def print_whole(console: Console, renderable: RenderableType) -> None:
    """``console.print`` at the console's width, or wider where that width would lose part of a table; a
    string is printed whole as text, never as markup (its agent-given parts are cut by its caller)."""
    if isinstance(renderable, str):
        renderable = literal(renderable, None)
    width = whole_width(renderable, console.width)
    if width == console.width:
        console.print(renderable)
        return
    narrow = console.width  # console.print(width=) only narrows: widen the console for this one table
    console.width = width
    try:
        console.print(renderable)
    finally:
        console.width = narrow
