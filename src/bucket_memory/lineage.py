"""Which file each text of the retained log belongs to: what `erase` follows through moves and rewrites."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from .codec import Change, Commit, Delete, Edit, Erase, Move, Purge, Write
from .state import State


class Lineages:
    """The files of a memory's retained log, a file being what a write to a free path starts, a move
    carries to another path, and a delete, erasure or purge ends; fed commits in seq order from the
    state at `base`.

    It answers which files ever had a path, every name each had, which changes of the log carry
    their texts, and which file a path held at any seq from `base` on. Before `base` there is only
    the name: a path counts as the file's when it is one of its names.
    """

    def __init__(self, base: State) -> None:
        self.base = self.head = base.head
        self._ids = itertools.count()
        self._live: dict[str, int] = {path: next(self._ids) for path in sorted(base.files)}
        self._names: dict[int, set[str]] = {file: {path} for path, file in self._live.items()}
        # Per path, from which seq it held which file (None: none), in seq order.
        self._held: dict[str, list[tuple[int, int | None]]] = {
            path: [(base.head, file)] for path, file in self._live.items()
        }
        self._texts: list[tuple[int, int, int]] = []  # (seq, change index, file) of each text not yet erased
        self._erasures: dict[str, int] = {}  # path -> seq of its newest erasure
        self._ended: dict[int, dict[str, int]] = {}  # seq of an erasure -> the files it ended, by path

    def feed(self, commit: Commit) -> None:
        """Take in the next commit."""
        assert commit.seq == self.head + 1, "commits are fed in seq order"
        for index, change in enumerate(commit.changes):
            self._take(commit.seq, index, change)
        self.head = commit.seq

    def feed_all(self, commits: Iterable[Commit]) -> None:
        for commit in commits:
            self.feed(commit)

    def files_named(self, path: str) -> set[int]:
        """Every file that ever had `path` as its name."""
        return {file for file, names in self._names.items() if path in names}

    def names(self, files: set[int]) -> set[str]:
        return set().union(*(self._names[file] for file in files))

    def live(self, files: set[int]) -> set[str]:
        """The paths where those files are live at the head."""
        return {path for path, file in self._live.items() if file in files}

    def texts(self, files: set[int]) -> dict[int, set[int]]:
        """Per seq, the indexes of the changes that carry a text of those files (and were not erased)."""
        found: dict[int, set[int]] = {}
        for seq, index, file in self._texts:
            if file in files:
                found.setdefault(seq, set()).add(index)
        return found

    def ended_by(self, seq: int) -> dict[str, int]:
        """The files the erasure commit `seq` deleted, by path."""
        return dict(self._ended.get(seq, {}))

    def erasure(self, path: str, files: set[int]) -> int | None:
        """The newest erasure of `path`, if no text of those files came after it."""
        erased = self._erasures.get(path)
        if erased is None or self.live(files):
            return None
        return erased if all(seq < erased for seq, _, file in self._texts if file in files) else None

    def holds(self, path: str, seq: int, files: set[int], names: set[str]) -> bool:
        """Whether `path` held one of `files` as of commit `seq` (by name alone before `base`)."""
        if seq < self.base:
            return path in names
        held = self._held.get(path, [])
        at = bisect.bisect_right(held, seq, key=lambda entry: entry[0]) - 1
        return at >= 0 and held[at][1] in files

    def _take(self, seq: int, index: int, change: Change) -> None:
        match change:
            case Write(path) | Edit(path):
                file = self._live.get(path)
                if file is None:
                    file = self._start(path, seq)
                if not change.is_erased:
                    self._texts.append((seq, index, file))
            case Delete(path) | Erase(path):
                ended = self._end(path, seq)
                if isinstance(change, Erase):
                    self._erasures[path] = seq
                    if ended is not None:
                        self._ended.setdefault(seq, {})[path] = ended
            case Move(source, destination):
                file = self._end(source, seq)
                if file is not None:
                    self._hold(destination, seq, file)
            case Purge():
                for path in list(self._live):
                    self._end(path, seq)

    def _start(self, path: str, seq: int) -> int:
        file = next(self._ids)
        self._names[file] = set()
        self._hold(path, seq, file)
        return file

    def _hold(self, path: str, seq: int, file: int) -> None:
        self._live[path] = file
        self._names[file].add(path)
        self._held.setdefault(path, []).append((seq, file))

    def _end(self, path: str, seq: int) -> int | None:
        file = self._live.pop(path, None)
        if file is not None:
            self._held[path].append((seq, None))
        return file
