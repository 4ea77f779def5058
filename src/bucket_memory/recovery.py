"""Recovery from the bucket's object versions: a wiped prefix, damaged objects, states that
compaction or a purge removed.

The memory's history is in the first stored version of each key: the log creates every key once,
so a later version can only be a re-creation after the prefix was wiped or an overwrite (damage).
A re-creation is a commit of a *fork*: a writer whose cached head was older than the wipe found
the next key gone and committed there, or a writer that could not tell the memory existed began
it again at commit 1. `restore` puts the first versions back and re-applies the forks' commits on
top as new commits; `state_as_of` reads the memory at a past moment.
"""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from a13n_harness.providers.memory import MemoryStoreError, Origin

from .codec import (
    CHECKPOINT_PREFIX,
    GENESIS_HASH,
    LOG_PREFIX,
    Change,
    Commit,
    CorruptObjectError,
    Edit,
    Write,
    checkpoint_key,
    key_seq,
    log_key,
)
from .log import CommitLog
from .objects import ObjectVersion, VersionedObjectStore
from .retry import gather_bounded, retrying
from .state import State

logger = logging.getLogger(__name__)

RECOVER_RUN = "bucket-memory recover"
_REAPPLIED = "reapplies:"


@dataclass(frozen=True, slots=True)
class Restoration:
    """What `Recovery.restore` did.

    `restored`: keys re-created from their first version (deleted ones). `repaired`: keys that
    held other bytes, put back. `reapplied`: for each commit of a fork made after a wipe, its seq
    there and the seq of the new commit that carries its changes (None: nothing left to change).
    `head`: the memory's head once done.
    """

    restored: tuple[str, ...]
    repaired: tuple[str, ...]
    reapplied: tuple[tuple[int, int | None], ...]
    head: int

    @property
    def changed(self) -> bool:
        return bool(self.restored or self.repaired or self.reapplied)


@dataclass(frozen=True, slots=True)
class _Stored:
    """Every stored version of the memory's own keys, each key's oldest first."""

    versions: dict[str, list[ObjectVersion]]

    def first(self, key: str) -> ObjectVersion | None:
        found = self.versions.get(key)
        return found[0] if found else None

    def keys(self, prefix: str) -> list[tuple[int, str]]:
        return sorted((seq, key) for key in self.versions if key.startswith(prefix) and (seq := key_seq(key)))


class Recovery:
    """Reads every stored version of a memory's objects, deleted ones included; needs a versioned bucket."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log

    async def restore(self) -> Restoration:
        """Bring back every acknowledged commit from the bucket's versions, keeping those made since.

        Puts back, create-only and newest first, the first version of every key of the longest
        chain of first versions (so a writer that resumes meanwhile can only extend that chain),
        repairs keys that hold other bytes, and re-applies the commits of forks made after a wipe
        as new commits on top, each marked with the fork commit's id so that it is re-applied once.
        Safe to run again and while writers run: a second run finds nothing to do.
        """
        self.log.check_writable()
        objects, location = self._versioned(), self.log.location
        async with self.log.exclusive():
            # Live keys first: each is then among the versions listed next, so a commit a writer adds
            # meanwhile is either in the chain found below or not live here, and never removed.
            live = {info.key: info for _, info in await self.log.reader.list_log()}
            live |= {info.key: info for _, info in await self.log.reader.list_checkpoints()}
            stored = await self._stored(objects)
            firsts = await self._first_commits(stored)
            base, head = await self._longest_chain(stored, firsts)
            kept = [log_key(seq) for seq in range(max(base, 1), head + 1)]
            kept += [
                key
                for seq, key in stored.keys(CHECKPOINT_PREFIX)
                if base <= seq <= head and (seq == base or await self._fits(stored, firsts, seq))
            ]
            # Every commit of a fork, from all the versions, read before anything is replaced.
            forks = await self._forks(stored, firsts, base, head)
            if forks:  # their writers' next keys must hold the chain's commits, so that they reload
                kept += [log_key(seq) for seq in range(forks[0][0].seq, base) if log_key(seq) in firsts]
            restored: list[str] = []
            repaired: list[str] = []
            for key in sorted(set(kept), key=_newest_first):
                outcome = await self._put_back(objects, stored, key, live.get(key) is not None)
                if outcome == "restored":
                    restored.append(key)
                elif outcome == "repaired":
                    repaired.append(key)
            for key in sorted(live):
                seq = key_seq(key) or 0
                if seq > head or (key.startswith(CHECKPOINT_PREFIX) and base < seq and key not in kept):
                    # Past the chain, or a checkpoint of a fork: read above, and kept as a version.
                    await retrying(functools.partial(objects.delete, [key]), what=f"Removing {location}/{key}")
                    logger.info("%s: removed %s, which is not of the memory's chain", location, key)
            self.log.forget()
        reapplied = [(commit.seq, await self._reapply(commit, changes)) for commit, changes in sorted(forks, key=_made)]
        return Restoration(tuple(restored), tuple(repaired), tuple(reapplied), (await self.log.proven_state()).head)

    async def state_as_of(self, moment: datetime) -> State:
        """The memory as it was at `moment`: the newest commit made by then, on a gap-free run from a checkpoint."""
        location = self.log.location
        stored = await self._stored(self._versioned())
        firsts = await self._first_commits(stored)
        decoded = sorted(firsts.values(), key=lambda commit: commit.seq)
        # The run made by `moment`, stopped at the first commit made later (as `seq_at` does).
        commits = {commit.seq: commit for commit in itertools.takewhile(lambda c: c.moment <= moment, decoded)}
        if not commits:
            raise MemoryStoreError("not_found", f"No stored version of {location} holds a commit made by {moment}.")
        state = await self._replayed(stored, commits, max(commits))
        if state is None:
            raise MemoryStoreError(
                "not_found", f"The stored versions of {location} have gaps before commit {max(commits)}."
            )
        return state

    async def _replayed(self, stored: _Stored, commits: dict[int, Commit], target: int) -> State | None:
        """The state at commit `target` of `commits` (by seq): the newest stored checkpoint of theirs
        below it from which they run without a gap, and those commits; None when there is none."""
        bases = sorted((seq for seq, _ in stored.keys(CHECKPOINT_PREFIX) if seq <= target), reverse=True)
        for base in [*bases, 0]:
            if not all(seq in commits for seq in range(base + 1, target + 1)):
                continue
            state = State(format=self.log.format)
            if base:
                key = checkpoint_key(base)
                data = await self._read(stored.first(key))
                state = await State.read_checkpoint(self.log.location, key, data, state.format)
                if base in commits and state.head_hash != commits[base].hash:
                    continue  # a checkpoint of another log at that seq
            for seq in range(base + 1, target + 1):
                state.apply(commits[seq], self.log.location)
            return state
        return None

    async def versioning(self) -> str:
        """Whether the bucket keeps versions: "enabled", "suspended", "off"; "unknown" where it may not say."""
        objects = self._versioned()
        try:
            return await retrying(objects.versioning, what=f"Reading the versioning of {objects.location}")
        except MemoryStoreError as error:
            if error.code != "forbidden":
                raise
            return "unknown"

    async def _put_back(self, objects: VersionedObjectStore, stored: _Stored, key: str, live: bool) -> str | None:
        """Make `key` hold its first version: "restored" (it was gone), "repaired" (it held other
        bytes), or None (it already did)."""
        first = stored.first(key)
        assert first is not None
        data = await self._read(first)
        for _ in range(self.log.options.request_attempts):
            if not live and await retrying(functools.partial(objects.create, key, data), what=f"Re-creating {key}"):
                return "restored"
            current = await self.log.reader.get(key)
            if current == data:
                return None
            live = current is not None
            newest = (await self._stored(objects, key)).versions.get(key, [])
            if live and newest:
                replace = functools.partial(objects.replace, key, data, tag=newest[-1].tag)
                if await retrying(replace, what=f"Repairing {key}"):
                    return "repaired"
        raise MemoryStoreError("unavailable", f"{self.log.location}/{key} kept changing while it was restored.")

    async def _forks(
        self, stored: _Stored, firsts: dict[str, Commit], base: int, head: int
    ) -> list[tuple[Commit, tuple[Change, ...]]]:
        """The commits of forks off the chain (or off a new commit 1) that no earlier run re-applied,
        in seq order. Versions that are neither (damage, another memory's objects) are left out."""
        chain = {seq: firsts[log_key(seq)] for seq in range(max(base, 1), head + 1)}
        below = max(base, 1) - 1  # the chain's own history below its base, as far as it links
        while below >= 1 and (older := firsts.get(log_key(below))) is not None and older.hash == chain[below + 1].prev:
            chain[below] = older
            below -= 1
        others = [
            version
            for seq, key in stored.keys(LOG_PREFIX)
            for version in stored.versions[key]
            if seq not in chain or version is not stored.first(key)
        ]
        decoded: list[Commit] = []
        for version, data in zip(others, await gather_bounded(others, self._read), strict=True):
            try:
                decoded.append(await Commit.read(self.log.location, version.key, data))
            except CorruptObjectError:
                continue
        chain_ids = {commit.id for commit in chain.values()}
        done = {
            (origin.tool_call_id or "").removeprefix(_REAPPLIED)
            for commit in firsts.values()
            for origin in (commit.origin, *(change.origin for change in commit.changes if change.origin))
            if origin.run_id == RECOVER_RUN and (origin.tool_call_id or "").startswith(_REAPPLIED)
        }
        known = {(seq, commit.hash) for seq, commit in chain.items()} | {(0, GENESIS_HASH)}
        linked: dict[str, Commit] = {}
        for commit in sorted(decoded, key=lambda commit: commit.seq):
            if commit.id in chain_ids or commit.id in linked or (commit.seq - 1, commit.prev) not in known:
                continue
            known.add((commit.seq, commit.hash))
            linked[commit.id] = commit
        return await self._as_written(stored, chain, list(linked.values()), set(linked) - done)

    async def _as_written(
        self, stored: _Stored, chain: dict[int, Commit], linked: list[Commit], wanted: set[str]
    ) -> list[tuple[Commit, tuple[Change, ...]]]:
        """The `wanted` fork commits, each with its changes as its writer meant them: an edit, made
        against the fork's own text, becomes a write of the whole text it made. `linked` holds every
        fork commit in seq order (those re-applied before too, whose texts later ones may edit)."""
        if not any(isinstance(change, Edit) for commit in linked for change in commit.changes):
            return [(commit, commit.changes) for commit in linked if commit.id in wanted]
        after: dict[str, State] = {}  # by commit hash: the state each fork commit made
        written: list[tuple[Commit, tuple[Change, ...]]] = []
        for commit in linked:
            base = after.get(commit.prev)
            if base is None:
                base = (
                    State(format=self.log.format)
                    if commit.seq == 1
                    else await self._replayed(stored, chain, commit.seq - 1)
                )
            changes = commit.changes
            if base is not None:
                state, whole = base.copy(), []
                try:
                    for change in commit.changes:
                        if isinstance(change, Edit):
                            change = Write(path=change.path, text=state.edited(change), origin=change.origin)
                        state.apply_change(change, commit.seq)
                        whole.append(change)
                    after[commit.hash], changes = state, tuple(whole)
                except MemoryStoreError as error:
                    logger.warning("%s: fork commit %s does not apply: %s", self.log.location, commit.seq, error)
            elif any(isinstance(change, Edit) for change in commit.changes):
                logger.warning(
                    "%s: no stored state is the base of fork commit %s; its edits apply only where the text fits",
                    self.log.location,
                    commit.seq,
                )
            if commit.id in wanted:
                written.append((commit, changes))
        return written

    async def _reapply(self, commit: Commit, changes: tuple[Change, ...]) -> int | None:
        """Commit the `changes` of a fork's commit on top of the restored memory, leaving out what
        no longer applies (a delete of a file now gone)."""

        def plan(state: State) -> Sequence[Change]:
            scratch, kept = state.copy(), []
            for change in changes:
                try:
                    scratch.apply_change(change, state.head + 1)
                except MemoryStoreError as refused:
                    logger.info("%s: left out %s: %s", self.log.location, change, refused)
                    continue
                kept.append(change if change.origin else change.model_copy(update={"origin": commit.origin}))
            return kept

        return await self.log.commit(plan, Origin(run_id=RECOVER_RUN, tool_call_id=f"{_REAPPLIED}{commit.id}"))

    async def _longest_chain(self, stored: _Stored, firsts: dict[str, Commit]) -> tuple[int, int]:
        """The base (a checkpoint's seq, or 0) and head of the longest run of first versions that chain,
        from a checkpoint of this memory (not of a log begun after a wipe) or from commit 1."""
        by_seq = {commit.seq: commit for commit in firsts.values()}
        runs: list[tuple[int, int]] = []
        for base in [0, *(seq for seq, _ in stored.keys(CHECKPOINT_PREFIX) if seq in by_seq)]:
            previous = by_seq[base].hash if base else GENESIS_HASH
            head = base
            while (following := by_seq.get(head + 1)) is not None and following.prev == previous:
                head, previous = head + 1, following.hash
            runs.append((head, base))
        for head, base in sorted(runs, reverse=True):
            if head and (base == 0 or await self._fits(stored, firsts, base)):
                return base, head
        raise MemoryStoreError("not_found", f"The bucket keeps no version of a commit of {self.log.location}.")

    async def _fits(self, stored: _Stored, firsts: dict[str, Commit], seq: int) -> bool:
        """Whether the first version of checkpoint `seq` is the state at the first version of commit
        `seq`, of the memory whose first commit 1 the bucket keeps (when it still does)."""
        key = checkpoint_key(seq)
        try:
            state = await State.read_checkpoint(
                self.log.location, key, await self._read(stored.first(key)), self.log.format
            )
        except CorruptObjectError:
            return False
        genesis = firsts.get(log_key(1))
        return state.head_hash == firsts[log_key(seq)].hash and (
            genesis is None or state.genesis in (None, genesis.hash)
        )

    async def _first_commits(self, stored: _Stored) -> dict[str, Commit]:
        """The first stored version of every log key, decoded; damaged ones left out."""
        keys = [key for _, key in stored.keys(LOG_PREFIX)]
        data = await gather_bounded(keys, lambda key: self._read(stored.first(key)))
        decoded: dict[str, Commit] = {}
        for key, body in zip(keys, data, strict=True):
            try:
                decoded[key] = await Commit.read(self.log.location, key, body)
            except CorruptObjectError as error:
                logger.warning("%s: the first version of %s is not usable: %s", self.log.location, key, error.reason)
        return decoded

    async def _read(self, version: ObjectVersion | None) -> bytes:
        objects = self._versioned()
        assert version is not None
        data = await retrying(
            functools.partial(objects.get_version, version.key, version.version),
            what=f"Reading {self.log.location}/{version.key}",
        )
        if data is None:
            raise MemoryStoreError(
                "unavailable", f"{self.log.location}/{version.key} version {version.version} vanished."
            )
        return data

    async def _stored(self, objects: VersionedObjectStore, prefix: str = "") -> _Stored:
        versions = await retrying(
            functools.partial(objects.list_versions, prefix), what=f"Listing versions of {objects.location}"
        )
        found: dict[str, list[ObjectVersion]] = {}
        for version in versions:
            if key_seq(version.key) is not None:
                found.setdefault(version.key, []).append(version)
        return _Stored(found)

    def _versioned(self) -> VersionedObjectStore:
        if not isinstance(self.log.objects, VersionedObjectStore):
            raise MemoryStoreError(
                "unavailable",
                f"{self.log.location} keeps no object versions to recover from; restore a backup instead.",
            )
        return self.log.objects


def _made(fork: tuple[Commit, tuple[Change, ...]]) -> tuple[datetime, int]:
    """Forks' commits in the order they were made, as near as the server's clock tells."""
    return fork[0].moment, fork[0].seq


def _newest_first(key: str) -> tuple[int, int]:
    """Log keys from the newest, then checkpoints: a chain put back from the top down is never extended
    by a writer that finds a hole in it, and a cold start never meets a checkpoint before its log."""
    return (0 if key.startswith(LOG_PREFIX) else 1, -(key_seq(key) or 0))
