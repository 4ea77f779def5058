"""Tables for people at a terminal: they fit its width, 80 columns and up, keep whole every value
that names something (a version, an id, a path), and show times as ages; with --wide, every value
whole and times exact, on lines as wide as they need. Written to a file or a pipe (with no COLUMNS
set), a table cuts nothing and pads no line's end."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

import typer
from rich.cells import cell_len
from rich.table import Table

from .base import out
from .visible import visible

Wide = Annotated[
    bool,
    typer.Option("--wide", help="Show every value whole and times exact, on lines as wide as they need."),
]
_PADDING = 2  # a space either side of each cell
_SMALLEST = 6  # a shortened column still shows this much
_AGES = ((86400, "d"), (3600, "h"), (60, "m"), (1, "s"))


@dataclass(frozen=True, slots=True)
class Column:
    """A column, and what it gives up when the terminal is too narrow for the table: "whole" never
    shortens (versions, ids, ages); "fold" wraps onto more lines, losing nothing (paths); "cut"
    keeps one line, ending in … (texts, principals, runs). The shortened columns share the width
    the whole ones leave, in proportion to `share`, none wider than its longest value."""

    header: str
    fit: Literal["whole", "fold", "cut"] = "whole"
    share: int = 1


def show(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, wide: bool) -> None:
    """Print `rows` under `columns` on stdout, fitted to the terminal, or whole with `wide`."""
    # Control characters shown, before the widths are measured; one line per row where values are
    # cut (a newline in one would start another).
    rows = [
        [
            visible(cell.replace("\n", " ") if column.fit == "cut" and not wide else cell)
            for column, cell in zip(columns, row, strict=True)
        ]
        for row in rows
    ]
    natural = [
        max([_width(column.header), *(_width(row[index]) for row in rows)]) for index, column in enumerate(columns)
    ]
    room = None if wide else _room()
    widths = natural if room is None else _fitted(columns, natural, room - _PADDING * len(columns))
    table = Table(box=None, width=sum(widths) + _PADDING * len(columns))  # may be wider than the terminal
    for column, width in zip(columns, widths, strict=True):
        table.add_column(
            column.header,
            width=width,
            no_wrap=room is None or column.fit != "fold",
            overflow="fold" if column.fit == "fold" else "ellipsis",
        )
    for row in rows:
        table.add_row(*row)
    if out.is_terminal:
        out.print(table)
        return
    with out.capture() as captured:  # for a file or a pipe: no padding at the ends of the lines
        out.print(table)
    out.file.write("".join(f"{line.rstrip()}\n" for line in captured.get().splitlines()))


def _room() -> int | None:
    """The width to fit a table in: the terminal's, or COLUMNS where it is set; None for a file or a
    pipe, whose lines are as wide as they need (a cut there would lose what a script reads)."""
    return out.width if out.is_terminal or os.environ.get("COLUMNS") else None


def _width(text: str) -> int:
    return max(cell_len(line) for line in text.split("\n"))


def _fitted(columns: Sequence[Column], natural: Sequence[int], room: int) -> list[int]:
    """Each column's width within `room`: whole columns at their natural widths, the room left
    shared out among the others by `share`, what a column does not need going to the rest."""
    widths = list(natural)
    open_ = [index for index, column in enumerate(columns) if column.fit != "whole"]
    left = room - sum(natural[index] for index, column in enumerate(columns) if column.fit == "whole")
    while open_:
        shares = sum(columns[index].share for index in open_)
        satisfied = [index for index in open_ if natural[index] * shares <= left * columns[index].share]
        if not satisfied:
            for index in open_:
                widths[index] = max(_SMALLEST, left * columns[index].share // shares)
            break
        for index in satisfied:
            open_.remove(index)
            left -= natural[index]
    return widths


def age(moment: str, now: datetime) -> str:
    """An ISO 8601 time as an age at `now`: 45s ago, 12m ago, 3h ago, 5d ago; the date past 30 days
    (in 2m for a writer's clock ahead of this one)."""
    then = datetime.fromisoformat(moment)
    seconds = int((now - then).total_seconds())
    if abs(seconds) >= 30 * 86400:
        return then.date().isoformat()
    span = abs(seconds)
    size, unit = next(((size, unit) for size, unit in _AGES if span >= size), (1, "s"))
    return f"{span // size}{unit} ago" if seconds >= 0 else f"in {span // size}{unit}"
