"""A memory as of one commit: its files, the change feed, and the one rule about files and directories."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field, replace

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, describe

from .codec import (
    GENESIS_HASH,
    Change,
    Checkpoint,
    Commit,
    CorruptObjectError,
    Delete,
    Edit,
    Erase,
    Move,
    Purge,
    Write,
    off_loop,
    text_bytes,
)
from .delta import spliced
from .overlay import Overlay
from .wire_values import checkpoint_key, log_key, stored_size_of, time_text


@dataclass(slots=True)
class LiveFile:
    """A file as of one commit. `erased` is the erasure commit of a file whose text was erased
    (its text is then empty): only past states hold one, since the erasure deletes the file."""

    text: str
    version: int
    size: int  # of the UTF-8 text
    stored: int  # in commits and checkpoints, which the quota counts
    description: str | None
    erased: int | None = None


@dataclass(slots=True)
class CheckpointCounts:
    """What was committed since the newest checkpoint a process knows of (`seq`): bytes of the
    texts written, edited files counted whole (`written`), and of the text the commits carried
    (`carried`, edits as their inserted text). One object is shared by a state and its copies, so
    that a checkpoint written while a copy was planned on counts for the state that copy becomes
    (each copy counting from its own numbers rewrote the checkpoint every few commits)."""

    seq: int = 0
    written: int = 0
    carried: int = 0


@dataclass(slots=True)
class State:
    """A memory as of commit `head`: its files, and what the change feed and policies need.

    `changed` maps every path changed above `floor` (live or deleted) to the seq of its last
    change, kept in seq order so the change feed reads only the tail. A cursor below `floor`
    (a purge, or tombstones dropped by a checkpoint) can only be answered with a full resync.
    `genesis`, the hash of commit 1, names the memory in its cursors (None: not known, for a
    memory whose first-release checkpoint lacks it and whose commit 1 was compacted).
    """

    format: FileFormat
    head: int = 0
    head_hash: str = GENESIS_HASH
    floor: int = 0
    genesis: str | None = None
    files: MutableMapping[str, LiveFile] = field(default_factory=dict)
    changed: dict[str, int] = field(default_factory=dict)
    directories: MutableMapping[str, int] = field(default_factory=dict)
    live_bytes: int = 0
    stored_bytes: int = 0
    since_checkpoint: CheckpointCounts = field(default_factory=CheckpointCounts)
    head_time: float = 0.0  # when the head commit was made, if read since the last checkpoint

    def apply(self, commit: Commit, location: str) -> None:
        """Apply the next commit, or `CorruptObjectError` if it does not follow or breaks a rule."""
        key = log_key(commit.seq)
        if commit.seq != self.head + 1:
            raise CorruptObjectError(location, key, f"commit {self.head + 1} is missing before it")
        if commit.prev != self.head_hash:
            raise CorruptObjectError(location, key, f"it does not follow commit {self.head} in the hash chain")
        try:
            for change in commit.changes:
                self.apply_change(change, commit.seq)
        except MemoryStoreError as error:
            raise CorruptObjectError(location, key, str(error)) from None
        self.advance(commit)

    def advance(self, commit: Commit) -> None:
        """Make `commit`, whose changes are already applied, the head."""
        self.head, self.head_hash = commit.seq, commit.hash
        self.head_time = max(self.head_time, commit.moment.timestamp())
        if commit.seq == 1:
            self.genesis = commit.hash
        self.since_checkpoint.written += commit.size
        self.since_checkpoint.carried += text_bytes(commit.changes)

    def apply_change(self, change: Change, seq: int) -> None:
        """One change as commit `seq` makes it, refused (`invalid_path`, `not_found`) where it breaks a rule."""
        match change:
            case Write(path, text):
                self.check_room(path)
                self._remove(path, None)
                self._add(path, text or "", seq, erased=change.erased)
            case Edit(path):
                current = self.files.get(path)
                erased = change.erased or (current.erased if current is not None else None)
                text = self.edited(change) if erased is None else ""
                self._remove(path, None)
                self._add(path, text, seq, erased=erased)
            case Delete(path) | Erase(path):
                self._remove(path, seq)
            case Move(source, destination):
                if source not in self.files:
                    raise MemoryStoreError("not_found", f"it moves {source}, which does not exist")
                if destination in self.files:
                    raise MemoryStoreError("already_exists", f"it moves {source} onto {destination}, which exists")
                self.check_room(destination, leaving=source)
                moved = self.files[source]
                self._remove(source, seq)
                self._add(destination, moved.text, seq, moved.description, described=True, erased=moved.erased)
            case Purge():
                self.files.clear()
                self.changed.clear()
                self.directories.clear()
                self.live_bytes = self.stored_bytes = 0
                self.floor = seq

    def edited(self, edit: Edit) -> str:
        """The text of the edited file once `edit` is applied, or `invalid_text` when the edit was
        not made against that file's text."""
        current = self.files.get(edit.path)
        text = (
            spliced(current.text, edit.at, edit.removed, edit.inserted)
            if current is not None and edit.removed is not None and edit.inserted is not None
            else None
        )
        if text is None or len(text.encode()) != edit.size:
            raise MemoryStoreError("invalid_text", f"its edit of {edit.path} does not fit the text it applies to")
        return text

    def check_room(self, path: str, *, leaving: str | None = None) -> None:
        """A file cannot share its path with a directory, as on a file system (and in an export).

        `leaving` is a file that goes in the same step (the source of a move).
        """
        files_below = self.directories.get(f"{path}/", 0)
        if leaving is not None and leaving.startswith(f"{path}/"):
            files_below -= 1
        if files_below > 0 or any(
            directory[:-1] in self.files and directory[:-1] != leaving for directory in parent_directories(path)
        ):
            raise MemoryStoreError(
                "invalid_path", f"{path} conflicts with an existing file or directory of the same name."
            )

    def copy(self) -> State:
        """A copy of its own; files are never changed in place, so sharing them is safe."""
        return replace(self, files=dict(self.files), changed=dict(self.changed), directories=dict(self.directories))

    def layered(self) -> State:
        """A state to plan on whose changes this one sees only when it `absorb`s them, at a cost of
        what the plan changes, not of the memory's size. Its `changed` holds only the paths the plan
        changed: it is for `absorb`, not for a change feed."""
        assert isinstance(self.files, dict) and isinstance(self.directories, dict), "layered on a whole state"
        return replace(self, files=Overlay(self.files), changed={}, directories=Overlay(self.directories))

    def absorb(self, layered: State) -> None:
        """Take in the changes of a state `layered` on this one (once its commit has landed)."""
        for layer, base in ((layered.files, self.files), (layered.directories, self.directories)):
            assert isinstance(layer, Overlay) and layer.base is base, "layered on this state"
            layer.merge()
        if layered.floor != self.floor:  # a purge: only a purge moves the floor while changes apply
            self.changed.clear()
        for path, seq in layered.changed.items():
            self.changed.pop(path, None)  # to the end: `changed` is kept in seq order
            self.changed[path] = seq
        self.head, self.head_hash, self.head_time = layered.head, layered.head_hash, layered.head_time
        self.floor, self.genesis = layered.floor, layered.genesis
        self.live_bytes, self.stored_bytes = layered.live_bytes, layered.stored_bytes

    def is_directory(self, path: str) -> bool:
        return f"{path}/" in self.directories

    def to_checkpoint(self, max_tombstones: int, *, at: float) -> Checkpoint:
        """The whole state as a checkpoint made at `at` (by the server's clock), dropping the oldest
        tombstones past `max_tombstones`."""
        deleted = [(path, seq) for path, seq in self.changed.items() if path not in self.files]
        erased = [(path, live.erased) for path, live in sorted(self.files.items()) if live.erased is not None]
        floor = self.floor
        if len(deleted) > max_tombstones:
            dropped = deleted[: len(deleted) - max_tombstones]
            floor = max(floor, dropped[-1][1])
            deleted = deleted[len(dropped) :]
        return Checkpoint.signed(
            seq=self.head,
            head_hash=self.head_hash,
            floor=floor,
            time=time_text(at),
            files=[
                (path, live.text if live.erased is None else None, live.version)
                for path, live in sorted(self.files.items())
            ],
            deleted=deleted,
            genesis=self.genesis,
            descriptions=[live.description for _, live in sorted(self.files.items())],
            described_with=_describing(self.format),
            erased=erased or None,
            format=2 if erased else 1,
        )

    @classmethod
    async def read_checkpoint(
        cls, location: str, key: str, data: bytes, fmt: FileFormat, *, served: bool = False
    ) -> State:
        """The state a stored checkpoint holds, built in a worker thread when it is large
        (`served`: as `Checkpoint.decode` takes it)."""

        def build() -> State:
            return cls.from_checkpoint(Checkpoint.decode(location, key, data, served=served), fmt, location)

        return await off_loop(len(data), build)

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint, fmt: FileFormat, location: str) -> State:
        state = cls(
            format=fmt,
            head=checkpoint.seq,
            head_hash=checkpoint.head_hash,
            floor=checkpoint.floor,
            genesis=checkpoint.genesis,
        )
        changes: list[tuple[int, str]] = []
        # Descriptions made under other limits than this store's are made again.
        described = (
            checkpoint.descriptions
            if checkpoint.described_with == _describing(fmt)
            and checkpoint.descriptions is not None
            and len(checkpoint.descriptions) == len(checkpoint.files)
            and all(len(text or "") <= fmt.description_chars for text in checkpoint.descriptions)
            else None
        )
        corrupt = functools.partial(CorruptObjectError, location, checkpoint_key(checkpoint.seq))
        erasures = dict(checkpoint.erased or ())
        files = state.files
        # What `_add` does file by file, done for the whole: a cold open of a large memory is mostly this loop.
        for index, (path, text, version) in enumerate(checkpoint.files):
            if version > checkpoint.seq or path in files:
                raise corrupt(f"{path} is listed twice or with a future version")
            if text is None:
                files[path] = LiveFile("", version, 0, 0, None, erasures[path])
            else:
                data = text.encode()
                description = described[index] if described is not None else _description(text, fmt)
                files[path] = LiveFile(text, version, len(data), stored_size_of(data), description)
        state.live_bytes = sum(live.size for live in files.values())
        state.stored_bytes = sum(live.stored for live in files.values())
        state.directories = _directory_counts(files)
        changes = [(version, path) for path, _, version in checkpoint.files]
        # `check_room` once for the whole: a file conflicts exactly when files lie below its path.
        if conflicting := next((path for path in state.files if f"{path}/" in state.directories), None):
            raise corrupt(f"{conflicting} conflicts with an existing file or directory of the same name.")
        changes.extend((seq, path) for path, seq in checkpoint.deleted if path not in state.files)
        state.changed = {path: seq for seq, path in sorted(changes)}
        state.since_checkpoint = CheckpointCounts(seq=state.head)
        return state

    def _add(
        self,
        path: str,
        text: str,
        seq: int,
        description: str | None = None,
        *,
        described: bool = False,
        erased: int | None = None,
    ) -> None:
        """Make `path` live with `text`; its description is made from the text unless `described`.
        An erased file (`erased`: the erasure commit) has no text and no description."""
        data = text.encode()
        size, stored = len(data), stored_size_of(data)
        if erased is None and not described:
            description = _description(text, self.format)
        self.files[path] = LiveFile(text, seq, size, stored, description if erased is None else None, erased)
        self.live_bytes += size
        self.stored_bytes += stored
        self.changed.pop(path, None)
        self.changed[path] = seq
        for directory in parent_directories(path):
            self.directories[directory] = self.directories.get(directory, 0) + 1

    def _remove(self, path: str, seq: int | None) -> None:
        """Drop a live file; `seq` records a deletion in the change feed, None a file about to be rewritten."""
        removed = self.files.pop(path, None)
        if removed is not None:
            self.live_bytes -= removed.size
            self.stored_bytes -= removed.stored
            for directory in parent_directories(path):
                if self.directories[directory] == 1:
                    del self.directories[directory]
                else:
                    self.directories[directory] -= 1
        if seq is not None:
            self.changed.pop(path, None)
            self.changed[path] = seq


def same_files(one: State, other: State) -> bool:
    """The same files with the same versions and descriptions (a checkpoint's are taken on trust)."""
    return {path: (live.text, live.version, live.description, live.erased) for path, live in one.files.items()} == {
        path: (live.text, live.version, live.description, live.erased) for path, live in other.files.items()
    }


def _directory_counts(paths: Iterable[str]) -> dict[str, int]:
    """How many files lie below each directory, counted as `_add` counts them, one parent at a time."""
    counts: dict[str, int] = {}
    for parent, below in Counter(path.rpartition("/")[0] for path in paths).items():
        for directory in parent_directories(f"{parent}/") if parent else ():
            counts[directory] = counts.get(directory, 0) + below
    return counts


def parent_directories(path: str) -> Iterable[str]:
    """The directories above a path, outermost first, each ending in "/"."""
    parts = path.split("/")[:-1]
    return ("/".join(parts[: index + 1]) + "/" for index in range(len(parts)))


def _describing(fmt: FileFormat) -> tuple[int, int, int]:
    """The limits of a format that `describe` depends on."""
    return (fmt.max_file_bytes, fmt.frontmatter_bytes, fmt.description_chars)


def _description(text: str, fmt: FileFormat) -> str | None:
    try:
        return describe(text, fmt)
    except MemoryStoreError:
        return None  # written under a looser format; listed without a description, as the harness does
