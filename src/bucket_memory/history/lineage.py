"""Which file each text of the retained log belongs to: what `erase` follows through moves and
rewrites, and what `verify` holds erased texts to."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Mapping

from ..format.changes import Change, Delete, Edit, Erase, Move, Purge, Write
from ..format.codec import Commit
from ..state.state import State


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
        self._replay = base.copy()  # which commits are void, as every reader finds them
        self._ids = itertools.count()
        self._live: dict[str, int] = {path: next(self._ids) for path in sorted(base.files)}
        self._names: dict[int, set[str]] = {file: {path} for path, file in self._live.items()}
        # Per path, from which seq it held which file (None: none), in seq order.
        self._held: dict[str, list[tuple[int, int | None]]] = {
            path: [(base.head, file)] for path, file in self._live.items()
        }
        self._texts: list[tuple[int, int, int]] = []  # (seq, change index, file) of each text not yet erased
        self._ended: dict[int, dict[str, int]] = {}  # seq of an erasure -> the files it ended, by path
        self._erased_by: dict[int, set[str]] = {}  # seq of an erasure -> the paths it names
        # (seq, change index, file, path, erasure) of each change whose text was erased
        self._erased_texts: list[tuple[int, int, int, str, int]] = []
        self.voids: dict[int, str] = {}  # seq of a void commit -> why
        self._void_paths: dict[int, set[str]] = {}  # seq of a void commit -> the paths its changes name

    def feed(self, commit: Commit) -> None:
        """Take in the next commit; a void one (`State.apply`) changes no file, as for every reader."""
        assert commit.seq == self.head + 1, "commits are fed in seq order"
        self.head = commit.seq
        if (void := self._replay.apply(commit, "the retained log")) is not None:
            self.voids[commit.seq] = void.reason
            self._void_paths[commit.seq] = {path for change in commit.changes for path in named_paths(change)}
            return
        for index, change in enumerate(commit.changes):
            self._take(commit.seq, index, change)

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

    def unfounded_erasures(self, files: set[int] | None = None) -> list[tuple[int, int]]:
        """(seq, change index) of each erased text (of `files`, if given) whose `erased` names no
        erasure of one of its file's names (before `base`, of its path): a text hidden by hand, not
        erased, or one whose erasure `recover` re-applied at another seq (seed 3859)."""
        return [
            (seq, index)
            for seq, index, file, path, erasure in self._erased_texts
            if (files is None or file in files)
            and not (self._erased_by.get(erasure, set()) & (self._names[file] | {path}))
        ]

    def voids_naming(self, names: set[str]) -> dict[int, str]:
        """The void commits (seq -> why) whose changes name one of `names`: their verdict may rest on
        a text an erasure of those names removes, so the erasure records it in them."""
        return {seq: self.voids[seq] for seq, paths in self._void_paths.items() if paths & names}

    def base_names(self, path: str) -> set[str]:
        """`path` and every name of the file the base held there: a text a commit at or below the
        base wrote at `path` is that file's, which an erasure of any of its names erases (one moved
        away, its old name another file's now, is erased by its new name alone: seed 304 with moves)."""
        held = self._held.get(path, [])
        file = held[0][1] if held and held[0][0] == self.base else None
        return {path} if file is None else self._names[file] | {path}

    def changed_after(self, path: str, seq: int) -> bool:
        """Whether a commit after `seq` wrote, moved or deleted a file at `path`."""
        return any(at > seq for at, _ in self._held.get(path, ()))

    def erased_names(self, seq: int) -> set[str]:
        """The paths erasure commit `seq` of the retained log names (none: no such erasure)."""
        return set(self._erased_by.get(seq, set()))

    def ended_by(self, seq: int) -> dict[str, int]:
        """The files the erasure commit `seq` deleted, by path."""
        return dict(self._ended.get(seq, {}))

    def erasure(self, path: str, files: set[int]) -> int | None:
        """The newest erasure of `path`, if no text of those files came after it and each had the
        path before it (one moved there since, its texts all older, is not the erased file: seed
        2964 with moves)."""
        erased = max((seq for seq, paths in self._erased_by.items() if path in paths), default=None)
        if erased is None or self.live(files):
            return None
        if any(all(at >= erased for at, held in self._held.get(path, []) if held == file) for file in files):
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
                if change.erased is None:
                    self._texts.append((seq, index, file))
                else:
                    self._erased_texts.append((seq, index, file, path, change.erased))
            case Delete(path) | Erase(path):
                ended = self._end(path, seq)
                if isinstance(change, Erase):
                    self._erased_by.setdefault(seq, set()).add(path)
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


def named_paths(change: Change) -> tuple[str, ...]:
    """The paths `change` names (none for a purge, which names no path and ends every file)."""
    match change:
        case Move(source, destination):
            return (source, destination)
        case Purge():
            return ()
        case _:
            return (change.path,)


def erasures_in(commits: Iterable[Commit]) -> list[tuple[int, str]]:
    """Each path an erasure among `commits` names, with the erasure's seq (an erasure names every
    path its file had); an `erase` change no operator's record names is no erasure."""
    return [
        (commit.seq, change.path)
        for commit in commits
        if commit.erasure_authorized
        for change in commit.changes
        if isinstance(change, Erase)
    ]


def erasure_problems(base: State, commits: Mapping[int, Commit]) -> list[tuple[int, str]]:
    """(seq, what is wrong) for erased texts of the retained log `commits` (from the state `base`)
    that no erasure erased, and for commits of old formats whose hash no longer checks their content
    that no erasure vouches for: what someone with write access hiding or changing a change by hand
    would leave, and what an erase stopped part-way leaves until it is run again."""
    lineages = Lineages(base)
    lineages.feed_all(commits[seq] for seq in sorted(commits) if seq > lineages.base)
    unfounded = set(lineages.unfounded_erasures())
    erased = {seq: {c.path for c in commit.changes if isinstance(c, Erase)} for seq, commit in commits.items()}
    vouched: dict[int, str] = {}
    for seq in sorted(commits):  # a later erasure vouches for the commit as it then erased it
        vouched.update(pair for c in commits[seq].changes if isinstance(c, Erase) for pair in c.unchecked or ())
    found: list[tuple[int, str]] = []
    for seq in sorted(commits):
        commit = commits[seq]
        for index, change in enumerate(commit.changes):
            if not isinstance(change, Write | Edit) or change.erased is None:
                continue
            by_name = seq <= lineages.base and not erased.get(change.erased, set()) & lineages.base_names(change.path)
            if by_name or (seq, index) in unfounded:
                found.append((seq, f"its change {index + 1} is marked erased by a commit that erased no such file"))
        if not commit.checkable and vouched.get(seq) != commit.body_digest():
            found.append(
                (
                    seq,
                    "its texts were erased in an old format, so its hash no longer checks its content, and no "
                    "erasure vouches for what it holds (if an erase stopped part-way, run it again)",
                )
            )
    return found
