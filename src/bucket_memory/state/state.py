"""A memory as of one commit: its files, the change feed, and the one rule about files and directories."""

from __future__ import annotations

import itertools
import logging
import operator
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, describe

from ..format.changes import Change, Delete, Edit, Erase, Move, Purge, Write, text_bytes
from ..format.checkpoint_content import CheckpointContent
from ..format.codec import GENESIS_HASH, Commit, OffChain
from ..format.decoded import DECODED
from ..format.delta import spliced
from ..format.directories import parent_directories
from ..format.signed import CorruptObjectError
from ..format.wire_values import log_key, stored_size_of, time_text
from ..runtime.off_loop import off_loop
from .folds import FoldWindow
from .live_file import LiveFile
from .overlay import Overlay
from .packed_files import PackedFiles

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Void:
    """A commit no reader applies: at its seq, its changes (`reason`) broke a rule of the memory.
    The log goes on past it; `verify` names it."""

    seq: int
    reason: str


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


@dataclass(frozen=True, slots=True)
class CheckpointChanges:
    """The changes a cold open's checkpoint at `seq` holds (its files' versions and its tombstones),
    put in seq order only when first needed: an open that reads files, or asks for the changes
    after the checkpoint, never needs them."""

    seq: int
    paths: Sequence[str]
    versions: Sequence[int]
    deleted: Sequence[tuple[str, int]]

    def in_order(self) -> dict[str, int]:
        # A stable sort: within a seq, the files in path order, as the checkpoint holds them, then the tombstones.
        live = zip(self.paths, self.versions, strict=True)
        return dict(sorted(itertools.chain(live, self.deleted), key=operator.itemgetter(1)))


@dataclass(slots=True)
class State:
    """A memory as of commit `head`: its files, and what the change feed and policies need.

    `changed` maps every path changed above `floor` (live or deleted) to the seq of its last
    change, kept in seq order so the change feed reads only the tail; after a cold open, the
    changes its checkpoint holds wait in `unsorted` until `changes_in_order` puts them first.
    A cursor below `floor` (a purge, or tombstones dropped by a checkpoint) can only be answered
    with a full resync.
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
    unsorted: CheckpointChanges | None = None
    directories: MutableMapping[str, int] = field(default_factory=dict)
    live_bytes: int = 0
    stored_bytes: int = 0
    since_checkpoint: CheckpointCounts = field(default_factory=CheckpointCounts)
    head_time: float = 0.0  # when the head commit was made, if read since the last checkpoint
    folds: FoldWindow = field(default_factory=FoldWindow)  # the intents the last commits settled
    # Made anew by each load (a checkpoint read, a new memory) and kept by copies and commits
    # applied: a state of another lineage is another load, whose changes tell nothing of ours.
    lineage: object = field(default_factory=object, compare=False, repr=False)

    def apply(self, commit: Commit, location: str) -> Void | None:
        """Apply the next commit: None, or `Void` when its changes or the intents it settles break a
        rule of the memory as of the commit before (no store plans such a commit: a writer outside the
        store's rules made it). A void commit changes nothing, for every reader alike, and the head
        moves past it. `CorruptObjectError` if it does not follow the head."""
        key = log_key(commit.seq)
        if commit.seq != self.head + 1:
            raise CorruptObjectError(location, key, f"commit {self.head + 1} is missing before it")
        if commit.prev != self.head_hash:
            raise OffChain(location, key, f"it does not follow commit {self.head} in the hash chain")
        refusals = (self.folds.refusal(fold, commit.seq) for fold in commit.folded or ())
        reason = commit.void or unrecorded_erasure(commit) or next((r for r in refusals if r is not None), None)
        if reason is None:
            try:
                self._apply_changes(commit)
            except CorruptObjectError:
                raise  # a text of the checkpoint below, damaged: that object is the one to restore
            except MemoryStoreError as error:
                reason = str(error)
        self.advance(commit, void=reason is not None)
        if reason is None:
            if any(isinstance(change, Erase) for change in commit.changes):
                DECODED.clear()  # commits and runs held for the process may hold the erased texts
            return None
        logger.warning("%s: %s is void (%s): no reader applies it; `verify` names it", location, key, reason)
        return Void(commit.seq, reason)

    def _apply_changes(self, commit: Commit) -> None:
        """All of a commit's changes, or (refused) none of them."""
        if len(commit.changes) == 1:  # a change is refused before it changes anything
            self.apply_change(commit.changes[0], commit.seq)
            return
        layer = self.layered()
        for change in commit.changes:
            layer.apply_change(change, commit.seq)
        self.absorb(layer)

    def advance(self, commit: Commit, *, void: bool = False) -> None:
        """Make `commit`, whose changes are already applied (none when `void`), the head."""
        self.head, self.head_hash = commit.seq, commit.hash
        self.head_time = max(self.head_time, commit.moment.timestamp())
        if commit.seq == 1:
            self.genesis = commit.hash
        self.since_checkpoint.written += commit.size
        self.since_checkpoint.carried += text_bytes(commit.changes)
        self.folds = self.folds.after(commit.seq, () if void else commit.folded or ())

    def apply_change(self, change: Change, seq: int) -> None:
        """One change as commit `seq` makes it, refused (`invalid_path`, `not_found`) where it breaks a rule."""
        match change:
            case Write(path, text):
                self.check_room(path)
                self._remove(path, None)
                self._add(path, text or "", seq, erased=change.erased)
            case Edit(path):
                current = self.files.get(path)
                if current is None:  # an erased edit would otherwise place a file, unchecked for room
                    raise MemoryStoreError("not_found", f"it edits {path}, which does not exist")
                erased = change.erased or current.erased
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
                self._place(destination, moved.moved(seq))
            case Purge():
                self.files.clear()
                self.changed.clear()
                self.unsorted = None
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
        files = self.files.copy() if isinstance(self.files, PackedFiles) else dict(self.files)
        return replace(self, files=files, changed=dict(self.changed), directories=dict(self.directories))

    def layered(self) -> State:
        """A state to plan on whose changes this one sees only when it `absorb`s them, at a cost of
        what the plan changes, not of the memory's size. Its `changed` holds only the paths the plan
        changed: it is for `absorb`, not for a change feed."""
        whole = isinstance(self.files, dict | PackedFiles) and isinstance(self.directories, dict)
        assert whole, "layered on a whole state"
        return replace(
            self, files=Overlay(self.files), changed={}, unsorted=None, directories=Overlay(self.directories)
        )

    def absorb(self, layered: State) -> None:
        """Take in the changes of a state `layered` on this one (once its commit has landed)."""
        for layer, base in ((layered.files, self.files), (layered.directories, self.directories)):
            assert isinstance(layer, Overlay) and layer.base is base, "layered on this state"
            layer.merge()
        if layered.floor != self.floor:  # a purge: only a purge moves the floor while changes apply
            self.changed.clear()
            self.unsorted = None
        for path, seq in layered.changed.items():
            self.changed.pop(path, None)  # to the end: `changed` is kept in seq order
            self.changed[path] = seq
        self.head, self.head_hash, self.head_time = layered.head, layered.head_hash, layered.head_time
        self.floor, self.genesis, self.folds = layered.floor, layered.genesis, layered.folds
        self.live_bytes, self.stored_bytes = layered.live_bytes, layered.stored_bytes

    def changes_in_order(self) -> dict[str, int]:
        """`changed`, with the changes of the checkpoint a cold open left unsorted put before the rest."""
        if self.unsorted is not None:
            merged = self.unsorted.in_order()
            for path, seq in self.changed.items():  # all made after the checkpoint
                merged.pop(path, None)
                merged[path] = seq
            self.changed, self.unsorted = merged, None
        return self.changed

    def is_directory(self, path: str) -> bool:
        return f"{path}/" in self.directories

    def checkpoint_content(self, max_tombstones: int, *, at: float) -> CheckpointContent:
        """The whole state as a checkpoint made at `at` (by the server's clock) holds it, dropping
        the oldest tombstones past `max_tombstones`."""
        deleted = [(path, seq) for path, seq in self.changes_in_order().items() if path not in self.files]
        live = sorted(self.files.items())
        erased = [(path, file.erased) for path, file in live if file.erased is not None]
        floor = self.floor
        if len(deleted) > max_tombstones:
            dropped = deleted[: len(deleted) - max_tombstones]
            floor = max(floor, dropped[-1][1])
            deleted = deleted[len(dropped) :]
        return CheckpointContent(
            seq=self.head,
            head_hash=self.head_hash,
            floor=floor,
            time=time_text(at),
            files=[(path, file.text if file.erased is None else None, file.version) for path, file in live],
            deleted=deleted,
            genesis=self.genesis,
            descriptions=[file.description for _, file in live],
            described_with=describing(self.format),
            erased=erased or None,
            folds=self.folds.rows() or None,
        )

    def _add(self, path: str, text: str, seq: int, *, erased: int | None = None) -> None:
        """Make `path` live with `text`, described from its text; an erased file (`erased`: the
        erasure commit) has no text and no description."""
        data = text.encode()
        description = description_of(text, self.format) if erased is None else None
        self._place(path, LiveFile(text, seq, len(data), stored_size_of(data), description, erased))

    def _place(self, path: str, live: LiveFile) -> None:
        """Make `path` live as `live`, counting its bytes, its directories and its change."""
        self.files[path] = live
        self.live_bytes += live.size
        self.stored_bytes += live.stored
        self.changed.pop(path, None)
        self.changed[path] = live.version
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


def unrecorded_erasure(commit: Commit) -> str | None:
    """Why a commit that erases is no erasure: no operator's record names it (`erasure_record`).
    Such a change is what any writer with PutObject could forge, so it changes nothing at all."""
    authorized = commit.erasure_authorized
    if authorized is None:
        raise AssertionError(f"commit {commit.seq} erases, and was applied before its erasure record was looked for")
    if authorized:
        return None
    paths = ", ".join(sorted(change.path for change in commit.changes if isinstance(change, Erase)))
    return (
        f"it erases {paths} with no record of an operator's erasure under erasures/: an agent's forgery, which "
        "changes nothing (or an erasure made before erasure records: `bucket-memory erase` on the path records it)"
    )


async def texts_of(files: Iterable[tuple[str, LiveFile]], size: int) -> dict[str, str]:
    """The text of each of `files`, about `size` bytes in all, read apart from the event loop when
    large: the first read of a text from a packed checkpoint checks and decodes it. The files are
    taken on the loop first, since a state changes in place under later commits (a file never does)."""
    taken = list(files)
    return await off_loop(size, lambda: {path: live.text for path, live in taken})


def same_checkpoint(checkpoint: State, replayed: State, *, unerased: bool = False) -> bool:
    """Whether a checkpoint holds what the log replays to at its seq: the files, and the intents
    settled lately (on which it depends which later commits are void). `unerased`: a file the
    replay has erased may still hold a text in the checkpoint, at the same version (an erase
    stopped before it rewrote the checkpoint; running it again does)."""
    files = same_files(checkpoint, replayed, unerased=unerased)
    return files and dict(checkpoint.folds.settled) == dict(replayed.folds.settled)


def same_files(one: State, other: State, *, unerased: bool = False) -> bool:
    """The same files with the same versions and descriptions (a checkpoint's are taken on trust);
    `unerased`: or a file of `one` not erased where `other` holds it erased at its version."""
    mine = {path: (live.text, live.version, live.description, live.erased) for path, live in one.files.items()}
    theirs = {path: (live.text, live.version, live.description, live.erased) for path, live in other.files.items()}
    if unerased:
        for path, (_, version, _, erased) in mine.items():
            if erased is None and path in theirs and theirs[path][3] is not None and theirs[path][1] == version:
                mine[path] = theirs[path]
    return mine == theirs


def describing(fmt: FileFormat) -> tuple[int, int, int]:
    """The limits of a format that `describe` depends on."""
    return (fmt.max_file_bytes, fmt.frontmatter_bytes, fmt.description_chars)


def description_of(text: str, fmt: FileFormat) -> str | None:
    try:
        return describe(text, fmt)
    except MemoryStoreError:
        return None  # written under a looser format; listed without a description, as the harness does
