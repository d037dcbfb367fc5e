"""The terminal's tables as plain rows, so the HTML page shows exactly the cells the terminal prints.

The tables are built once, by :mod:`.tables` (rich tables); this only reads them back.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

from ..scoring.aggregate import Scores
from .runs import as_scores
from .tables import summary_items


@dataclass(frozen=True)
class PlainTable:
    title: str
    header: list[str]
    rows: list[list[str]]
    # indices of rows that start a new section (the "Mean" rows)
    section_starts: frozenset[int]


@dataclass(frozen=True)
class Caption:
    text: str


def plain(table: Table) -> PlainTable:
    columns = [[str(cell) for cell in column.cells] for column in table.columns]
    rows = [list(cells) for cells in zip(*columns)] if columns else []
    starts = frozenset(i + 1 for i, row in enumerate(table.rows) if row.end_section and i + 1 < len(rows))
    return PlainTable(str(table.title or ""), [str(c.header) for c in table.columns], rows, starts)


def session_tables(scores: Scores) -> list[PlainTable | Caption]:
    """The items the terminal summary prints, in its order: tables and the lines between them."""
    return [plain(item) if isinstance(item, Table) else Caption(str(item)) for item in summary_items(as_scores(scores))]
