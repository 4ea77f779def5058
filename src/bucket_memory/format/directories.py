"""The directories of a memory's paths, each with the number of files below it, as `State` keeps
them ("notes/": 3), counted from the paths or from a packed checkpoint's directory columns."""

from __future__ import annotations

import bisect
import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Sequence


def directory_counts(paths: Iterable[str]) -> dict[str, int]:
    """How many files lie below each directory, one parent at a time."""
    counts: dict[str, int] = {}
    parents = map(operator.itemgetter(0), map(str.rpartition, paths, itertools.repeat("/")))
    for parent, below in Counter(parents).items():
        for directory in parent_directories(f"{parent}/") if parent else ():
            counts[directory] = counts.get(directory, 0) + below
    return counts


def parent_directories(path: str) -> Iterable[str]:
    """The directories above a path, outermost first, each ending in "/"."""
    parts = path.split("/")[:-1]
    return ("/".join(parts[: index + 1]) + "/" for index in range(len(parts)))


def located(paths: Sequence[str], directories: Iterable[str]) -> tuple[list[int], list[int]]:
    """Each of `directories` (each ending in "/") as a packed checkpoint stores it: the row in
    `paths` (in order) of the first file below it, and the length of its name without the "/"."""
    rows, lengths = [], []
    for directory in sorted(directories):
        rows.append(bisect.bisect_left(paths, directory))
        lengths.append(len(directory) - 1)
    return rows, lengths


def counted(paths: Sequence[str], rows: Sequence[int], lengths: Sequence[int]) -> dict[str, int] | None:
    """`directory_counts` of `paths` (in order) from their directories as `located` gives them,
    a bisection a directory where counting splits every path (a third of a shallow memory's open);
    None unless they name each directory of the paths, once each, in order.

    A name is trusted to be a directory's if the path it is cut from has a "/" right after it (a
    path has no empty segment), and that path is the first below it. A file counts once below
    each directory above it, as many times as its path has slashes, so with none named twice, the
    counts add up to the slashes exactly when no directory is missing."""
    slashes = "\n".join(paths).count("/")
    if len(rows) != len(lengths) or len(rows) > slashes:
        return None
    below: dict[str, int] = {}
    previous = ""
    for row, length in zip(rows, lengths, strict=True):
        if not (0 <= row < len(paths) and 0 < length < len(paths[row]) and paths[row][length] == "/"):
            return None
        # Made one at a time and refused at the first out of order, so that forged columns naming
        # one deep directory over and over cost no more than the directories the paths have.
        directory = paths[row][: length + 1]
        if directory <= previous or (row > 0 and paths[row - 1] >= directory):
            return None
        # Those below "d/" are the paths from "d/" (the first at `row`) up to "d0", as "0" follows "/".
        below[directory] = bisect.bisect_left(paths, f"{directory[:-1]}0", row) - row
        previous = directory
    return below if sum(below.values()) == slashes else None


def names_a_file(paths: Sequence[str], name: str, row: int) -> bool:
    """Whether `paths` (in order) hold a file at `name`, a directory whose first path below is at
    `row`. Such a file sorts before that path, after only paths that begin with `name` and a
    character below "/", so it is looked for only when the path before begins with `name`."""
    return row > 0 and paths[row - 1].startswith(name) and row_of(paths, name) is not None


def row_of(paths: Sequence[str], path: object) -> int | None:
    """Where `path` is in `paths` (in order), or None."""
    if not isinstance(path, str):
        return None
    row = bisect.bisect_left(paths, path)
    return row if row < len(paths) and paths[row] == path else None
