"""Re-applying fork commits: what writers committed off a memory's chain after a wipe lands again,
on top of the restored memory, exactly once across processes (see `forks.py` for finding them)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from a13n_harness.providers.memory import MemoryStoreError

from ..files.store import LogFileStore
from ..format.changes import Change, Erase, Sealed
from ..format.codec import Commit
from ..format.signed import CorruptObjectError
from ..format.wire_values import LOG_PREFIX, log_key
from ..log.erasure_records import RecordedAttempts
from ..objects.interface import VersionedObjectStore
from ..state.state import State
from .versions import StoredVersions, reapplied

logger = logging.getLogger(__name__)
_OFF_CHAIN = "it is not of the chain recover put back: a writer committed off it while forks were re-applied"


class _Behind(MemoryStoreError):
    """A re-application was planned on a head past the commits recovery has read for marks."""

    def __init__(self, head: int) -> None:
        super().__init__("unavailable", "the memory moved on while a fork commit was re-applied; read on")
        self.head = head


class Reapplying:
    """Re-applies fork commits on top of a restored memory, each exactly once across processes.

    The marks of re-applications are read from every commit up to `read`; a re-application is
    planned only on a head no newer than that (else the plan refuses, the commits past it are read,
    and the fork is looked at again), and it lands at that head + 1 (invariant 1). So a fork that
    another run re-applied meanwhile is seen before a second re-application could land. The commits
    read must chain from `read_hash` (the head put back), and the head planned on must be theirs:
    else a writer committed off the restored chain, and `CorruptObjectError` asks to restore again.
    """

    def __init__(self, store: LogFileStore, read: int, read_hash: str) -> None:
        self.store = store
        self.read, self.read_hash = read, read_hash
        self.done: set[str] = set()

    async def commit(self, fork: Commit, changes: tuple[Change, ...]) -> int | None:
        """Commit the fork commit's `changes` on top, leaving out what no longer applies (a delete of
        a file now gone, a text an erasure removed); the new seq, or None when nothing is left or
        another run re-applied it.
        A fork that erases is re-applied as an erasure only on its record's word (recorded anew for
        its new seq, as `erase` records one); without a record, readers took it for void, and so
        does this."""
        erases = any(isinstance(change, Erase) for change in changes)
        if erases and not fork.erasure_authorized:
            logger.info("%s: left out fork commit %s: an erasure no record vouches for", self.store.location, fork.seq)
            return None
        attempts = RecordedAttempts(self.store.reader.erasures)

        def plan(state: State) -> Sequence[Change]:
            if state.head != self.read:
                raise _Behind(state.head)
            if state.head_hash != self.read_hash:
                # Loaded past a break in the log (a run a writer off the chain stored vouches for
                # its lineage): re-applied there, every fork would land off the chain again.
                raise CorruptObjectError(self.store.location, log_key(state.head), _OFF_CHAIN)
            scratch, kept = state.copy(), []
            for change in changes:
                if isinstance(change, Sealed) and change.is_erased:
                    # An erase rewrote the fork's version: the text is gone, and no commit can carry it.
                    logger.info("%s: left out %s: an erasure removed its text", self.store.location, change)
                    continue
                try:
                    scratch.apply_change(change, state.head + 1)
                except MemoryStoreError as refused:
                    logger.info("%s: left out %s: %s", self.store.location, change, refused)
                    continue
                kept.append(change if change.origin else change.model_copy(update={"origin": fork.origin}))
            return kept

        while fork.id not in self.done:
            seq: int | None = None
            try:
                hook = attempts.before_create if erases else None
                seq = await self.store.reapply(plan, fork.id, before_create=hook)
            except _Behind as behind:
                await self._read_up_to(behind.head)
                continue
            finally:
                await attempts.landed(seq)
            return seq
        logger.info("%s: fork commit %s was re-applied by another run", self.store.location, fork.seq)
        return None

    async def _read_up_to(self, head: int) -> None:
        """Read the marks of every commit after `read` up to `head` (from the versions if compacted)."""
        reader = self.store.reader
        listed = [(seq, info) for seq, info in await reader.list_log(after=self.read) if seq <= head]
        if [seq for seq, _ in listed] == list(range(self.read + 1, head + 1)):
            commits = await reader.fetch_commits(listed)
        else:
            objects = self.store.objects
            assert isinstance(objects, VersionedObjectStore)
            stored = await StoredVersions.listed(objects, self.store.format, LOG_PREFIX)
            commits = [commit for commit in (await stored.first_commits()).values() if self.read < commit.seq <= head]
        previous = self.read_hash
        for commit in sorted(commits, key=lambda commit: commit.seq):
            if commit.prev != previous:
                raise CorruptObjectError(self.store.location, log_key(commit.seq), _OFF_CHAIN)
            previous = commit.hash
        self.done |= reapplied(commits)
        self.read, self.read_hash = head, previous
