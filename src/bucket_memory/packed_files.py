"""The files of a state opened from a packed checkpoint, each made from the index's columns when
first asked for, so that a cold open of a large memory makes no object per file."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping, Sequence

from .live_file import LiveFile
from .packed import PackedCheckpoint


class PackedFiles(MutableMapping[str, LiveFile]):
    """A state's files: those of a packed checkpoint's index (by row), then those changed since.

    A file of the index is made on first access and kept, so that every access answers the same
    object (whose text, once read, is kept). Once every row is made, the checkpoint is let go.
    Reads may come from any thread: of two threads making one file at once, the first made is kept.
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

    def clear(self) -> None:
        self._rows.clear()
        self._made.clear()
        self._written.clear()
        self._checkpoint = self._offsets = None

    def copy(self) -> PackedFiles:
        """A copy of its own, sharing the checkpoint and every file made (files never change)."""
        copied = PackedFiles.__new__(PackedFiles)
        copied._rows, copied._made, copied._written = dict(self._rows), dict(self._made), dict(self._written)
        copied._checkpoint, copied._descriptions = self._checkpoint, self._descriptions
        copied._erasures, copied._offsets = self._erasures, self._offsets
        return copied

    def _let_go_when_made(self) -> None:
        """Drop the checkpoint once no row is left to make from it (its bytes may hold erased texts)."""
        if len(self._made) == len(self._rows):
            self._checkpoint = self._offsets = None

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
