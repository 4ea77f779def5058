"""The files of a state opened from a packed checkpoint, each made from the index's columns when
first asked for, so that a cold open of a large memory makes no object per file."""

from __future__ import annotations

import itertools
from collections.abc import ItemsView, Iterable, Iterator, MutableMapping, Sequence, ValuesView

from ..format.directories import row_of
from ..format.packed import PackedCheckpoint
from .live_file import LiveFile


class PackedFiles(MutableMapping[str, LiveFile]):
    """A state's files: those of a packed checkpoint's index (by row), then those changed since.

    A file of the index is made on first access and kept, so that every access answers the same
    object (whose text, once read, is kept); all are made at once for the whole (`items`, `values`)
    and before a copy, so that copies share them. Once every row is made, the checkpoint and its
    descriptions are let go (they may hold a text erased since). Changed on the event loop only,
    and read from other threads only while nothing changes it (a worker is handed a copy, or the
    files taken from it): of two threads making one file at once, the first made is kept.
    """

    __slots__ = ("_checkpoint", "_descriptions", "_erasures", "_made", "_offsets", "_paths", "_removed", "_written")

    def __init__(self, checkpoint: PackedCheckpoint, descriptions: Sequence[str | None]) -> None:
        # The index's paths are in order: a path's row is found by bisection, so that a cold open
        # neither hashes every path nor builds a dictionary of them.
        self._paths = checkpoint.index.paths
        self._removed: set[int] = set()  # rows deleted or set since
        self._made: dict[str, LiveFile] = {}  # files of rows not removed, made so far
        self._written: dict[str, LiveFile] = {}  # files set since, at paths of no row or a removed one
        self._checkpoint: PackedCheckpoint | None = checkpoint
        self._descriptions = descriptions
        self._erasures = dict(checkpoint.index.erased or ())
        self._offsets: list[int] | None = None  # where each text starts, found with the first file made

    def __getitem__(self, path: str) -> LiveFile:
        live = self._written.get(path) or self._made.get(path)
        if live is None:
            live = self._made.setdefault(path, self._file(path))
            self._let_go_when_made()
        return live

    def __contains__(self, path: object) -> bool:
        if path in self._written or path in self._made:
            return True
        return self._checkpoint is not None and self._row(path) is not None  # else every row is made

    def __setitem__(self, path: str, live: LiveFile) -> None:
        self._remove(path)
        self._written[path] = live
        self._let_go_when_made()

    def __delitem__(self, path: str) -> None:
        if self._written.pop(path, None) is None and not self._remove(path):
            raise KeyError(path)
        self._let_go_when_made()

    def __iter__(self) -> Iterator[str]:
        # A snapshot: reading a file may make it meanwhile.
        return iter([*self._rows(), *self._written])

    def __len__(self) -> int:
        return len(self._paths) - len(self._removed) + len(self._written)

    def items(self) -> ItemsView[str, LiveFile]:
        self._make_all()
        return {**self._made, **self._written}.items()

    def values(self) -> ValuesView[LiveFile]:
        self._make_all()
        return {**self._made, **self._written}.values()

    def clear(self) -> None:
        self._paths, self._removed = (), set()
        self._made.clear()
        self._written.clear()
        self._let_go_when_made()

    def copy(self) -> PackedFiles:
        """A copy of its own, sharing every file (files never change): each made first, so that
        reading their texts through the copy frees the checkpoint's bytes, as through this."""
        self._make_all()
        copied = PackedFiles.__new__(PackedFiles)
        copied._paths, copied._removed = self._paths, set(self._removed)
        copied._made, copied._written = dict(self._made), dict(self._written)
        copied._checkpoint, copied._descriptions = self._checkpoint, self._descriptions
        copied._erasures, copied._offsets = self._erasures, self._offsets
        return copied

    def _row(self, path: object) -> int | None:
        """The row of the index's file at `path`, unless removed since."""
        row = row_of(self._paths, path)
        return None if row is None or row in self._removed else row

    def _rows(self) -> Sequence[str]:
        """The paths of the rows not removed, in order."""
        if not self._removed:
            return self._paths
        return [path for row, path in enumerate(self._paths) if row not in self._removed]

    def _remove(self, path: str) -> bool:
        """Remove the row at `path`, if there is one: whether there was."""
        row = self._row(path)
        if row is None:
            return False
        self._removed.add(row)
        self._made.pop(path, None)
        return True

    def _let_go_when_made(self) -> None:
        """Drop the checkpoint once no row is left to make from it (its bytes may hold erased texts)."""
        if len(self._made) == len(self._paths) - len(self._removed):
            self._checkpoint = self._offsets = None
            self._descriptions = ()

    def _make_all(self) -> None:
        """Make every row not yet made, column by column: a file at a time costs five times more."""
        checkpoint = self._checkpoint
        if checkpoint is None:
            return
        index, offsets = checkpoint.index, self._offsets or checkpoint.offsets()
        rows = None
        # No row gone: all of them, in the index's order (those made before are kept, below).
        paths: Sequence[str] = self._paths
        if self._removed:
            rows = [row for row, path in enumerate(self._paths) if row not in self._removed and path not in self._made]
            paths = [self._paths[row] for row in rows]

        def column[T](values: Sequence[T]) -> Iterable[T]:
            return values if rows is None else map(values.__getitem__, rows)

        made = dict(
            zip(
                paths,
                map(
                    LiveFile,
                    itertools.repeat(None),
                    column(index.versions),
                    column(index.sizes),
                    column(index.stored),
                    column(self._descriptions),
                    itertools.repeat(None),
                    itertools.repeat(checkpoint.texts),
                    column(offsets),
                ),
                strict=True,
            )
        )
        for path in self._erasures.keys() & made.keys():
            made[path] = self._file(path)
        self._made = made | self._made  # a file made before stays the one served
        self._let_go_when_made()

    def _file(self, path: str) -> LiveFile:
        """The file of the row at `path`, made, or KeyError."""
        checkpoint = self._checkpoint
        if checkpoint is None:  # every row is made: this one by another thread, meanwhile
            return self._made[path]
        row = self._row(path)
        if row is None:
            raise KeyError(path)
        index = checkpoint.index
        if (erasure := self._erasures.get(path)) is not None:
            return LiveFile("", index.versions[row], 0, 0, None, erasure)
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = checkpoint.offsets()
        return LiveFile(
            None,
            index.versions[row],
            index.sizes[row],
            index.stored[row],
            self._descriptions[row],
            None,
            checkpoint.texts,
            offsets[row],
        )
