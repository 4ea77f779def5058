"""The directories of a memory's paths, each with the number of files below it, as `State` keeps
them ("notes/": 3), counted from the paths or from a packed checkpoint's directory column."""

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


def files_below(paths: Sequence[str], directories: Iterable[str]) -> dict[str, int]:
    """`directory_counts` of `paths` (in order), given their directories (without the final "/"):
    two bisections a directory, where counting splits every path (a cold open's largest cost).
    Names that are no directory of the paths count 0; `names_every_directory` tells."""
    return {
        f"{directory}/": bisect.bisect_left(paths, f"{directory}0") - bisect.bisect_left(paths, f"{directory}/")
        for directory in directories
    }


def names_every_directory(paths: Sequence[str], below: dict[str, int]) -> bool:
    """Whether `below` (from `files_below`) names each directory of `paths` and nothing else.

    A file counts once below each directory above it, as many times as its path has slashes. A
    name with a file below it is a directory of the paths (which have no empty segment), so with
    none at 0, the counts add up to the slashes exactly when no directory is missing."""
    return min(below.values(), default=1) > 0 and sum(below.values()) == "\n".join(paths).count("/")


def row_of(paths: Sequence[str], path: object) -> int | None:
    """Where `path` is in `paths` (in order), or None."""
    if not isinstance(path, str):
        return None
    row = bisect.bisect_left(paths, path)
    return row if row < len(paths) and paths[row] == path else None
