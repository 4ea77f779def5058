"""The bucket's stored versions of one memory's objects, and the memory they tell of.

The log creates every key once, so the first stored version of a key is the memory's own; a later
one can only be a re-creation after a wipe or an overwrite (damage). `StoredVersions` lists them,
reads and decodes first versions, finds the longest chain they form, and replays states from them.
"""

from __future__ import annotations

import functools
import logging

from a13n_harness.providers.memory import FileFormat, MemoryStoreError

from ..format.changes import Edit, Write
from ..format.codec import GENESIS_HASH, Commit
from ..format.erasure_record import ErasureRecord
from ..format.signed import CorruptObjectError
from ..format.wire_values import (
    CHECKPOINT_PREFIX,
    LOG_PREFIX,
    erasure_record_key,
    erasure_record_parts,
    key_seq,
    log_key,
    reapplied_fork,
)
from ..objects.interface import ObjectVersion, VersionedObjectStore
from ..objects.retry import gather_bounded, retrying
from ..state.checkpoint_state import read_checkpoint
from ..state.state import State
from .checkpoint_verdicts import checkpoint_verdicts
from .erase_rewrites import pinned_by_erasures

logger = logging.getLogger(__name__)


class StoredVersions:
    """Every stored version of a memory's own keys (each key's oldest first), as listed once.

    Reading needs `s3:GetObjectVersion` (GCS: object reads with generations); the listing
    `s3:ListBucketVersions`. A version that vanished since the listing is `unavailable`.
    """

    def __init__(
        self,
        objects: VersionedObjectStore,
        format: FileFormat,
        versions: dict[str, list[ObjectVersion]],
        records: dict[str, list[ObjectVersion]] | None = None,
    ):
        self.objects = objects
        self.format = format
        self.versions = versions
        # The erasure records' versions, by key: a commit that erases is an erasure where the first
        # version of its record names it, whether or not a wipe deleted the record since.
        self.records = records or {}
        self._firsts: dict[str, Commit] | None = None
        self._checkpoints: dict[int, State] | None = None
        self._verdicts: dict[int, bool] | None = None  # by checkpoint seq, once `fits` is first asked
        # Keys whose chain version is a later one than their first (`_through_reapplications`, and
        # a checkpoint's version that stands in for a first the log disproves: checkpoint_verdicts).
        self.in_place: dict[str, ObjectVersion] = {}

    @classmethod
    async def listed(cls, objects: VersionedObjectStore, format: FileFormat, prefix: str = "") -> StoredVersions:
        versions = await retrying(
            functools.partial(objects.list_versions, prefix), what=f"Listing versions of {objects.location}"
        )
        found: dict[str, list[ObjectVersion]] = {}
        records: dict[str, list[ObjectVersion]] = {}
        for version in versions:
            if key_seq(version.key) is not None:
                found.setdefault(version.key, []).append(version)
            elif erasure_record_parts(version.key) is not None:
                records.setdefault(version.key, []).append(version)
        return cls(objects, format, found, records)

    @property
    def location(self) -> str:
        return self.objects.location

    def first(self, key: str) -> ObjectVersion | None:
        """The key's first version, or the re-application the chain takes in its place (once
        `first_commits` has read them: every caller reads those first)."""
        found = self.versions.get(key)
        return self.in_place.get(key) or (found[0] if found else None)

    def keys(self, prefix: str) -> list[tuple[int, str]]:
        return sorted((seq, key) for key in self.versions if key.startswith(prefix) and (seq := key_seq(key)))

    async def read(self, version: ObjectVersion | None) -> bytes:
        assert version is not None
        data = await retrying(
            functools.partial(self.objects.get_version, version.key, version.version),
            what=f"Reading {self.location}/{version.key}",
        )
        if data is None:
            raise MemoryStoreError(
                "unavailable",
                f"{self.location}/{version.key} version {version.version} vanished as it was read (an erase or a "
                "recover in another process changed the stored versions); nothing was put back from it: run it again.",
            )
        return data

    async def holds_first(self, key: str, first: bytes, current: bytes) -> bool:
        """Whether `current` is `key`'s first version (`first`, as read), or that version with texts
        erased as `erase` rewrites it (the same commit, its hash kept; a checkpoint's files the same
        but for erased texts): what an erase stopped before deleting the old versions leaves, which
        only erasing again may finish. Anything else in its place is a rewrite."""
        if current == first:
            return True
        try:
            if key.startswith(LOG_PREFIX):
                was = await Commit.read(self.location, key, first)
                return _erased_form(was, await Commit.read(self.location, key, current))
            before = await read_checkpoint(self.location, key, first, self.format)
            after = await read_checkpoint(self.location, key, current, self.format)
        except CorruptObjectError:
            return False
        return (
            before.head_hash == after.head_hash
            and set(after.files) == set(before.files)
            and all(
                live.version == before.files[path].version
                and (live.erased is not None or live.text == before.files[path].text)
                for path, live in after.files.items()
            )
        )

    async def first_commits(self) -> dict[str, Commit]:
        """The first stored version of every log key, decoded; damaged ones left out (read once)."""
        if self._firsts is None:
            self._firsts = await self._decoded_firsts()
        return self._firsts

    async def _decoded_firsts(self) -> dict[str, Commit]:
        keys = [key for _, key in self.keys(LOG_PREFIX)]
        data = await gather_bounded(keys, lambda key: self.read(self.first(key)))
        decoded: dict[str, Commit] = {}
        for key, body in zip(keys, data, strict=True):
            try:
                decoded[key] = await self.read_commit(key, body)
            except CorruptObjectError as error:
                logger.warning("%s: the first version of %s is not usable: %s", self.location, key, error.reason)
        for key, (commit, version) in (await pinned_by_erasures(self, decoded)).items():
            decoded[key], self.in_place[key] = commit, version
        return await self._through_reapplications(decoded)

    async def _through_reapplications(self, firsts: dict[str, Commit]) -> dict[str, Commit]:
        """`firsts`, but where a key's first version is a commit made off the chain (it does not
        follow the key before) and a later version of the key is a re-application that does
        follow: that one in its place. `recover` re-applies such commits at the next keys, which
        may be keys the off-chain writer created first; taken by their first versions, the next
        look at the versions found the re-applied commits strays (a stale writer's lineage reused
        keys), and re-applied them again. A displaced commit that nothing re-applied (a recover
        killed part-way, seed 475) is a fork still: `fork_commits` reads every version, and
        re-applies those the chain marks nowhere. A commit that follows the key before is never
        displaced."""
        chain = dict(firsts)
        for seq, key, commit in sorted((commit.seq, key, commit) for key, commit in firsts.items()):
            before = chain.get(log_key(seq - 1))
            if before is None or commit.prev == before.hash:
                continue
            for version in self.versions[key][1:]:
                try:
                    later = await self.read_commit(key, await self.read(version))
                except CorruptObjectError:
                    continue
                if later.prev == before.hash and reapplied([later]):
                    chain[key], self.in_place[key] = later, version
                    break
        return chain

    async def read_commit(self, key: str, data: bytes) -> Commit:
        """A stored version of a log key, decoded, and noted as an erasure where the first version
        of its erasure record names it (`erasure_record`)."""
        commit = await Commit.read(self.location, key, data)
        if commit.erasure_authorized is not None:
            return commit
        record_key = erasure_record_key(commit.seq, commit.hash)
        versions = self.records.get(record_key)
        if not versions:
            return commit.authorize(False)
        try:
            record = ErasureRecord.decode(self.location, record_key, await self.read(versions[0]))
        except CorruptObjectError:
            return commit.authorize(False)
        return commit.authorize(record.names(commit))

    async def erasure_records(self) -> list[ErasureRecord]:
        """The first version of every erasure record that decodes, deleted ones included."""
        records = []
        for key, versions in sorted(self.records.items()):
            try:
                records.append(ErasureRecord.decode(self.location, key, await self.read(versions[0])))
            except CorruptObjectError:
                continue
        return records

    async def first_checkpoints(self) -> dict[int, State]:
        """The first stored version of every checkpoint, decoded, by seq; damaged ones left out
        (read once: callers that change one take a copy)."""
        if self._checkpoints is None:
            self._checkpoints = {}
            for seq, key in self.keys(CHECKPOINT_PREFIX):
                try:
                    data = await self.read(self.first(key))
                    self._checkpoints[seq] = await read_checkpoint(self.location, key, data, self.format)
                except CorruptObjectError:
                    continue
        return self._checkpoints

    async def longest_chain(self, firsts: dict[str, Commit]) -> tuple[int, int]:
        """The base (a checkpoint's seq, or 0) and head of the longest run of first versions that chain,
        from a checkpoint of this memory (not of a log begun after a wipe, nor one the first versions
        of its log disprove) or from commit 1."""
        by_seq = {commit.seq: commit for commit in firsts.values()}
        runs: list[tuple[int, int]] = []
        for base in [0, *(seq for seq, _ in self.keys(CHECKPOINT_PREFIX) if seq in by_seq)]:
            previous = by_seq[base].hash if base else GENESIS_HASH
            head = base
            while (following := by_seq.get(head + 1)) is not None and following.prev == previous:
                head, previous = head + 1, following.hash
            runs.append((head, base))
        for head, base in sorted(runs, reverse=True):
            if head and (base == 0 or await self.fits(base)):
                return base, head
        raise MemoryStoreError("not_found", f"The bucket keeps no version of a commit of {self.location}.")

    async def fits(self, seq: int) -> bool:
        """Whether the first version of checkpoint `seq` is the state at the first version of commit
        `seq`, of the memory whose first commit 1 the bucket keeps (when it still does), and holds
        the files the first versions of the log replay to (where they reach back that far)."""
        if self._verdicts is None:
            self._verdicts = await checkpoint_verdicts(self, await self.first_commits())
        return self._verdicts.get(seq, False)

    async def disproved(self, seq: int) -> bool:
        """Whether checkpoint `seq` is a state its log disproves: its first version decodes and no
        version of it holds what the first versions of the log replay to (one whose first version
        does not decode is no state anyone loaded; `fits` passes it over too)."""
        return seq in await self.first_checkpoints() and not await self.fits(seq)

    async def replayed(self, commits: dict[int, Commit], target: int) -> State | None:
        """The state at commit `target` of `commits` (by seq): the newest stored checkpoint of theirs
        below it from which they run without a gap, and those commits; None when there is none."""
        bases = sorted((seq for seq, _ in self.keys(CHECKPOINT_PREFIX) if seq <= target), reverse=True)
        for base in [*bases, 0]:
            if not all(seq in commits for seq in range(base + 1, target + 1)):
                continue
            state = State(format=self.format)
            if base:
                if not await self.fits(base):
                    continue  # of another log, or not what the log replays to
                state = (await self.first_checkpoints())[base].copy()
            for seq in range(base + 1, target + 1):
                state.apply(commits[seq], self.location)
            return state
        return None


def _erased_form(first: Commit, current: Commit) -> bool:
    """Whether `current` is `first` with the texts of some changes erased (each by the erasure its
    `erased` names), and nothing else changed; a text `first` holds erased may name another erasure
    now (an erase moves the mark of one `recover` re-applied at a new seq to it: seed 3859)."""
    erased_by = {
        index: change.erased
        for index, change in enumerate(current.changes)
        if isinstance(change, Write | Edit) and change.erased is not None
    }
    candidate = first
    for erasure in set(erased_by.values()):
        named = {index for index, by in erased_by.items() if by == erasure}
        candidate = candidate.redacted(lambda index, _: index in named, erasure, named)  # noqa: B023 (used at once)
    if current.void is not None:
        candidate = candidate.recorded_void(current.void)
    return (bool(erased_by) or current.void is not None) and candidate == current


def reapplied(commits: dict[str, Commit] | list[Commit]) -> set[str]:
    """The ids of the fork commits that `commits` re-applied, by the marks in their origins."""
    found = commits.values() if isinstance(commits, dict) else commits
    return {
        fork
        for commit in found
        for origin in (commit.origin, *(change.origin for change in commit.changes if change.origin))
        if (fork := reapplied_fork(origin)) is not None
    }
