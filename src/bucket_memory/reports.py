"""What operator work reports (`admin.MemoryAdmin`): a file's revisions (and who made them, as a
narrow column shows it), a memory at a glance, the changes a bulk write would make, what recovery did."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from a13n_harness.providers.memory import Origin

from .format.changes import Change, Delete, Edit, Erase, Move, Purge, Write
from .format.codec import Commit
from .history.recovery import Restoration

type RevisionAction = Literal["write", "delete", "moved-in", "moved-out", "purge", "erase"]


@dataclass(frozen=True, slots=True)
class Revision:
    """One change to one file in the retained history: the version it made, when, by whom, and what.

    `action` is write, delete, moved-in (from `other`), moved-out (to `other`), purge (path ""), or
    erase (the commit that erased every text of the file). A write whose text was erased since names
    that erasure commit in `erased` (its commit's origin and time say who and when).
    """

    path: str
    version: str
    time: str
    origin: Origin
    action: RevisionAction
    other: str | None = None
    size: int | None = None
    erased: int | None = None


@dataclass(frozen=True, slots=True)
class Stats:
    """A memory at a glance: live files and their stored bytes (which `max_bytes` caps), the head, the
    retained log and the newest checkpoint."""

    files: int
    bytes: int
    max_bytes: int
    head: int
    commits: int
    history_floor: int | None
    checkpoints: int
    checkpoint: int | None
    checkpoint_age: float | None


@dataclass(frozen=True, slots=True)
class Changeset:
    """What a bulk change would do to the memory as of head `seq`: paths written and deleted."""

    seq: int
    written: tuple[str, ...]
    deleted: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Recovered:
    """What `recover` did: the restoration, the commit that made the memory what it was at the moment
    asked for (None: none asked, or it already was), and the bucket's versioning now."""

    restoration: Restoration
    as_of_commit: int | None
    versioning: str


def revisions_of(commit: Commit, change: Change) -> list[Revision]:
    """The revisions one change of `commit` makes: two for a move (in and out), one otherwise."""

    def made(
        path: str, action: RevisionAction, other: str | None = None, size: int | None = None, erased: int | None = None
    ) -> Revision:
        return Revision(path, str(commit.seq), commit.time, change.origin or commit.origin, action, other, size, erased)

    match change:
        case Write(path, text):
            return [made(path, "write", size=len(text.encode()) if text is not None else None, erased=change.erased)]
        case Edit(path):
            return [made(path, "write", size=change.size, erased=change.erased)]
        case Erase(path):
            return [made(path, "erase")]
        case Delete(path):
            return [made(path, "delete")]
        case Move(source, destination):
            return [made(destination, "moved-in", source), made(source, "moved-out", destination)]
        case Purge():
            return [made("", "purge")]
    raise AssertionError("every kind of change is matched")


def short_principal(principal: str | None) -> str:
    """A principal as a narrow column shows it: an ARN by the name in its resource (agent/i-0ab for
    arn:aws:sts::123456789012:assumed-role/agent/i-0ab, alice for ...:user/alice), which tells the
    callers of one account apart."""
    if principal is None or not principal.startswith("arn:"):
        return principal or ""
    resource = principal.rpartition(":")[2]
    return resource.partition("/")[2] or resource
