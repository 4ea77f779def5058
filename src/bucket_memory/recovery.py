"""Recovery from the bucket's object versions: states that compaction, a purge or a wiped prefix removed."""

from __future__ import annotations

import functools
import itertools
from datetime import datetime

from a13n_harness.providers.memory import MemoryStoreError

from .codec import CHECKPOINT_PREFIX, LOG_PREFIX, Commit, checkpoint_key, key_seq
from .log import CommitLog
from .objects import ObjectVersion, VersionedObjectStore
from .retry import gather_bounded, retrying
from .state import State


class Recovery:
    """Reads every stored version of a memory's objects, deleted ones included; needs a versioned bucket."""

    def __init__(self, log: CommitLog) -> None:
        self.log = log

    async def state_as_of(self, moment: datetime) -> State:
        """The memory as it was at `moment`: the newest commit made by then, on a gap-free run from a checkpoint."""
        objects, location = self._versioned(), self.log.location
        original = await self._original_versions(objects)
        logs = [version for key, version in original.items() if key.startswith(LOG_PREFIX)]
        fetched = await gather_bounded(logs, self._fetch)
        decoded = sorted([await Commit.read(location, key, data) for key, data in fetched], key=lambda c: c.seq)
        # The run made by `moment`, stopped at the first commit made later (as `seq_at` does).
        commits = {commit.seq: commit for commit in itertools.takewhile(lambda c: c.moment <= moment, decoded)}
        if not commits:
            raise MemoryStoreError("not_found", f"No stored version of {location} holds a commit made by {moment}.")
        target = max(commits)
        bases = sorted(
            (seq for key in original if key.startswith(CHECKPOINT_PREFIX) and (seq := key_seq(key) or 0) <= target),
            reverse=True,
        )
        for base in [*bases, 0]:
            if all(seq in commits for seq in range(base + 1, target + 1)):
                break
        else:
            raise MemoryStoreError("not_found", f"The stored versions of {location} have gaps before commit {target}.")
        state = State(format=self.log.format)
        if base:
            key, data = await self._fetch(original[checkpoint_key(base)])
            state = await State.read_checkpoint(location, key, data, self.log.format)
        for seq in range(base + 1, target + 1):
            state.apply(commits[seq], location)
        return state

    async def undelete(self) -> int:
        """When the live log is gone entirely (a deleted prefix), re-create its objects from their versions.

        The log then resumes where it was, so versions are never reused. Returns how many objects
        were re-created; 0 when the log is live.
        """
        async with self.log.exclusive():
            if await self.log.reader.list_log():
                return 0
            objects = self._versioned()
            original = await self._original_versions(objects)
            created = 0
            for key, version in sorted(original.items()):
                _, data = await self._fetch(version)
                if await retrying(functools.partial(objects.create, key, data), what=f"Re-creating {key}"):
                    created += 1
            self.log.forget()
            return created

    async def _fetch(self, version: ObjectVersion) -> tuple[str, bytes]:
        objects = self._versioned()
        data = await retrying(
            functools.partial(objects.get_version, version.key, version.version),
            what=f"Reading {self.log.location}/{version.key}",
        )
        if data is None:
            raise MemoryStoreError(
                "unavailable", f"{self.log.location}/{version.key} version {version.version} vanished."
            )
        return version.key, data

    async def _original_versions(self, objects: VersionedObjectStore) -> dict[str, ObjectVersion]:
        """The first stored version of every commit and checkpoint key, deleted or not.

        The first version is the one the store created; a later one could only be a re-creation.
        """
        original: dict[str, ObjectVersion] = {}
        versions = await retrying(functools.partial(objects.list_versions, ""), what=f"Listing {objects.location}")
        for version in sorted(versions, key=lambda version: version.modified):
            if key_seq(version.key) is not None:
                original.setdefault(version.key, version)
        return original

    def _versioned(self) -> VersionedObjectStore:
        if not isinstance(self.log.objects, VersionedObjectStore):
            raise MemoryStoreError(
                "unavailable",
                f"{self.log.location} keeps no object versions to recover from; restore a backup instead.",
            )
        return self.log.objects
