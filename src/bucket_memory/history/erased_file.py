"""The file an erase erases, as the retained log tells of it, and the current objects that may
hold one of its texts: each commit and checkpoint below the erasure found by the file's lineage,
with how to erase its texts from the bytes read (`Erasure` rewrites them, and asks which hold one
again after a recover)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..files.store import LogFileStore
from ..format.changes import Change
from ..format.checkpoint_content import CheckpointContent, redacted_content
from ..format.codec import SEALED_FORMAT, Commit
from ..format.packed import decode_checkpoint
from ..format.wire_values import log_key
from ..objects.retry import gather_bounded
from ..runtime.off_loop import off_loop
from .lineage import Lineages
from .rewriting import Redaction


@dataclass(slots=True)
class ErasedFile:
    """The file being erased, as the retained log and the erasure commit tell of it; `old` keeps
    the log's commits of formats 1 and 2, for which the erasure vouches (`Erase.unchecked`). Which
    changes, commits and checkpoints hold its texts is asked of it."""

    path: str
    lineages: Lineages
    files: set[int] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    old: dict[int, Commit] = field(default_factory=dict)

    def feed(self, commits: Iterable[Commit]) -> None:
        """Take in commits of the log in seq order (those at or below the lineages' base only kept)."""
        for commit in commits:
            if commit.format < SEALED_FORMAT:
                self.old[commit.seq] = commit
            if commit.seq > self.lineages.head:
                self.lineages.feed(commit)
        self.refresh()

    def vouches(self, erasure: int) -> tuple[tuple[int, str], ...]:
        """Each commit of formats 1 and 2 that erasure commit `erasure` will erase texts of, with the
        SHA-256 of its body once erased."""
        found = []
        for seq, commit in sorted(self.old.items()):
            redacted = commit.redacted(self.erases(seq), erasure)
            if redacted is not commit:
                found.append((seq, redacted.body_digest()))
        return tuple(found)

    def refresh(self) -> None:
        self.files = self.lineages.files_named(self.path)
        self.names = self.lineages.names(self.files) | {self.path}

    def erases(self, seq: int) -> Callable[[int, Change], bool]:
        """Which changes of commit `seq` carry one of the file's texts (of a void commit, which no
        file holds, every text written at one of its names)."""
        if seq <= self.lineages.base or seq in self.lineages.voids:
            return lambda _, change: getattr(change, "path", None) in self.names
        indexes = self.lineages.texts(self.files).get(seq, set())
        return lambda index, _: index in indexes

    @property
    def void_commits(self) -> set[str]:
        """The keys of the void commits that name the file: an erase records their verdicts first."""
        return {log_key(seq) for seq in self.lineages.voids_naming(self.names)}

    def stale_marks(self) -> dict[int, set[int]]:
        """Per seq, the indexes of the file's erased texts whose marks name no erasure of it: an
        erasure `recover` re-applied at a new seq left them naming the old one (seed 3859), or an
        agent hid the text by hand. The erasure of the file erases them all, so they come to name it."""
        found: dict[int, set[int]] = {}
        for seq, index in self.lineages.unfounded_erasures(self.files):
            found.setdefault(seq, set()).add(index)
        return found

    def checkpoint_paths(self, checkpoint: CheckpointContent) -> set[str]:
        return {
            path
            for path, text, _ in checkpoint.files
            if text is not None and self.lineages.holds(path, checkpoint.seq, self.files, self.names)
        }

    def stale_in(self, checkpoint: CheckpointContent) -> set[str]:
        """The paths where `checkpoint` holds the file erased by a commit of the retained log that
        erased none of its names (as `stale_marks`, for the state the log replays to)."""
        return {
            path
            for path, by in checkpoint.erased or ()
            if by > self.lineages.base
            and not self.lineages.erased_names(by) & self.names
            and self.lineages.holds(path, checkpoint.seq, self.files, self.names)
        }


async def candidates(
    store: LogFileStore, target: ErasedFile, erasure: int, looked_at: set[str]
) -> list[tuple[str, Redaction]]:
    """The current objects below the erasure that the lineages say may hold a text of the file
    and that were not looked at yet (`looked_at` collects them), newest first, each with how to
    erase it from the bytes read (None: nothing to erase). Listing only: nothing is read."""
    reader, lineages = store.reader, target.lineages
    texts = lineages.texts(target.files)
    found: list[tuple[int, int, str, Redaction]] = []
    voids, stale = lineages.voids_naming(target.names), target.stale_marks()
    for seq, info in await reader.list_log():
        if seq < erasure and (seq in texts or seq in voids or seq in stale or seq <= lineages.base):
            found.append(
                (seq, 1, info.key, functools.partial(_erased_commit, store.location, target, erasure, info.key))
            )
    for seq, info in await reader.list_checkpoints():
        if seq < erasure and any(lineages.holds(name, seq, target.files, target.names) for name in target.names):
            found.append(
                (seq, 0, info.key, functools.partial(_erased_checkpoint, store.location, target, erasure, info.key))
            )
    found = sorted(item for item in found if item[2] not in looked_at)
    found.reverse()
    looked_at.update(key for _, _, key, _ in found)
    return [(key, redact) for _, _, key, redact in found]


async def holding_now(store: LogFileStore, target: ErasedFile, erasure: int) -> list[str]:
    """The candidates that do hold a text of the file now (each read once), for a plan."""
    found = await candidates(store, target, erasure, set())

    async def dirty(item: tuple[str, Redaction]) -> bool:
        data = await store.reader.get(item[0])
        return data is not None and await off_loop(len(data), functools.partial(item[1], data)) is not None

    marks = await gather_bounded(found, dirty)
    return [key for (key, _), mark in zip(found, marks, strict=True) if mark]


def _erased_commit(location: str, target: ErasedFile, erasure: int, key: str, data: bytes) -> bytes | None:
    """The commit with the file's texts erased; a void one also keeps its verdict, which a
    replay over the erased texts could no longer reach (its edit checked against them, say)."""
    commit = Commit.decode(location, key, data)
    redacted = commit.redacted(target.erases(commit.seq), erasure, target.stale_marks().get(commit.seq, ()))
    if (void := target.lineages.voids_naming(target.names).get(commit.seq)) is not None:
        redacted = redacted.recorded_void(void)
    return None if redacted is commit else redacted.encode()


def _erased_checkpoint(location: str, target: ErasedFile, erasure: int, key: str, data: bytes) -> bytes | None:
    checkpoint = decode_checkpoint(location, key, data)
    content = checkpoint.content()
    redacted = redacted_content(content, target.checkpoint_paths(content), erasure, target.stale_in(content))
    # In the layout it was written in: a reader that could read it can read it still.
    return None if redacted is None else type(checkpoint).made(redacted).encode()
