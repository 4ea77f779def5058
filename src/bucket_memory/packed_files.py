"""The files of a state opened from a packed checkpoint, each made from the index's columns when
first asked for, so that a cold open of a large memory makes no object per file."""

from __future__ import annotations

import itertools
from collections.abc import ItemsView, Iterable, Iterator, MutableMapping, Sequence, ValuesView

from .live_file import LiveFile
from .packed import PackedCheckpoint


class PackedFiles(MutableMapping[str, LiveFile]):
    """A state's files: those of a packed checkpoint's index (by row), then those changed since.

    A file of the index is made on first access and kept, so that every access answers the same
    object (whose text, once read, is kept); all are made at once for the whole (`items`, `values`)
    and before a copy, so that copies share them. Once every row is made, the checkpoint and its
    descriptions are let go (they may hold a text erased since). Reads may come from any thread:
    of two threads making one file at once, the first made is kept.
    """

    __slots__ = ("_checkpoint", "_descriptions", "_erasures", "_made", "_offsets", "_rows", "_written")

    def __init__(self, checkpoint: PackedCheckpoint, descriptions: Sequence[str | None]) -> None:
        paths = checkpoint.index.paths
        self._rows = dict(zip(paths, range(len(paths)), strict=True))  # the index's files, unchanged since
        self._made: dict[str, LiveFile] = {}  # those of `_rows` made so far
        self._written: dict[str, LiveFile] = {}  # files set since, at paths no longer in `_rows`
        self._checkpoint: PackedCheckpoint | None = checkpoint
        self._descriptions = descriptions
        self._erasures = dict(checkpoint.index.erased or ())
        self._offsets: list[int] | None = None  # where each text starts, found with the first file made

    def __getitem__(self, path: str) -> LiveFile:
        live = self._written.get(path) or self._made.get(path)
        if live is None:
            live = self._made.setdefault(path, self._file(path, self._rows[path]))
            self._let_go_when_made()
        return live

    def __contains__(self, path: object) -> bool:
        return path in self._written or path in self._rows

    def __setitem__(self, path: str, live: LiveFile) -> None:
        self._rows.pop(path, None)
        self._made.pop(path, None)
        self._written[path] = live
        self._let_go_when_made()

    def __delitem__(self, path: str) -> None:
        if self._written.pop(path, None) is None:
            del self._rows[path]
            self._made.pop(path, None)
            self._let_go_when_made()

    def __iter__(self) -> Iterator[str]:
        return iter([*self._rows, *self._written])  # a snapshot: reading a file may make it meanwhile

    def __len__(self) -> int:
        return len(self._rows) + len(self._written)

    def items(self) -> ItemsView[str, LiveFile]:
        self._make_all()
        return {**self._made, **self._written}.items()

    def values(self) -> ValuesView[LiveFile]:
        self._make_all()
        return {**self._made, **self._written}.values()

    def clear(self) -> None:
        self._rows.clear()
        self._made.clear()
        self._written.clear()
        self._let_go_when_made()

    def copy(self) -> PackedFiles:
        """A copy of its own, sharing every file (files never change): each made first, so that
        reading their texts through the copy frees the checkpoint's bytes, as through this."""
        self._make_all()
        copied = PackedFiles.__new__(PackedFiles)
        copied._rows, copied._made, copied._written = dict(self._rows), dict(self._made), dict(self._written)
        copied._checkpoint, copied._descriptions = self._checkpoint, self._descriptions
        copied._erasures, copied._offsets = self._erasures, self._offsets
        return copied

    def _let_go_when_made(self) -> None:
        """Drop the checkpoint once no row is left to make from it (its bytes may hold erased texts)."""
        if len(self._made) == len(self._rows):
            self._checkpoint = self._offsets = None
            self._descriptions = ()

    def _make_all(self) -> None:
        """Make every row not yet made, column by column: a file at a time costs five times more."""
        checkpoint = self._checkpoint
        if checkpoint is None:
            return
        index, offsets = checkpoint.index, self._offsets or checkpoint.offsets()
        whole = len(self._rows) == len(index.paths)  # no row gone: all of them, in the index's order
        paths = index.paths if whole else [path for path in self._rows if path not in self._made]
        rows = None if whole else list(map(self._rows.__getitem__, paths))

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
            made[path] = self._file(path, self._rows[path])
        self._made = made | self._made  # a file made before stays the one served
        self._let_go_when_made()

    def _file(self, path: str, row: int) -> LiveFile:
        checkpoint = self._checkpoint
        if checkpoint is None:  # every row is made: this one by another thread, meanwhile
            return self._made[path]
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
