"""Destroying a memory for good: every version and delete marker of its objects deleted, and a
tombstone (`format/tombstone.py`) left at each commit key a reader could still ask for.

The order makes it safe to stop anywhere and run again:

1. Prove: the operator's proof of the destroy is written under `erasures/`, which the agents'
   grants may not write. A tombstone is the end of the memory only beside it: without it, one is a
   forged commit, which any writer with PutObject under the prefix could create.
2. Seal: the tombstone is created at the seq after the newest commit ever stored. No writer can
   commit past it (a commit is created at the next seq, which it holds), and every reader, cold or
   warm, meets it by its next listing or probe: from here on the memory is refused, never served.
3. Cover: the tombstone is written over every commit key that holds a commit now, so that a warm
   store's probe of its next seq, which needs no listing, is refused too.
4. Delete every other version under the memory's folders: old versions, delete markers,
   checkpoints, intents, erasure records, the commit texts the tombstones replaced.

A run stopped after 2 leaves a memory every reader refuses; running it again repeats 1, 3 and 4
(a write is idempotent) and finds the seal it made. Only the memory's own folders are touched: a
prefix that holds other memories is refused, naming them, and objects not the memory's are left.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError

from .connect import memory_prefixes
from .format.tombstone import DESTROYED, PROOF_KEY
from .format.wire_values import CHECKPOINT_PREFIX, ERASURES_PREFIX, LOG_PREFIX, PENDING_PREFIX, key_seq, log_key
from .objects.bulk import DestroyableObjectStore
from .objects.interface import CREATE, OVERWRITE, AlreadyExists, ObjectStore, ObjectVersion
from .objects.retry import gather_bounded, retrying

# Every folder a memory writes (doctor/ holds the create-only check's short-lived objects).
OWN_FOLDERS = (LOG_PREFIX, CHECKPOINT_PREFIX, PENDING_PREFIX, ERASURES_PREFIX, "doctor/")


@dataclass(frozen=True, slots=True)
class DestroyPlan:
    """What destroying a memory deletes: `objects` keys holding `versions` stored versions (of them
    `markers` delete markers) and `bytes` bytes, and the `covered` commit keys left holding the
    tombstone. `sealed`: a run before proved and sealed the memory already (no reader is served from it)."""

    location: str
    objects: int
    versions: int
    markers: int
    bytes: int
    covered: int
    sealed: bool


@dataclass(frozen=True, slots=True)
class Destroyed:
    """What a destroy did: the versions and bytes it deleted, and the tombstones (one version each,
    no text, path or principal) left at the memory's commit keys, the seal at `seal` among them, with
    the proof at `format.tombstone.PROOF_KEY` that makes them a destroy."""

    location: str
    versions_deleted: int
    bytes_deleted: int
    tombstones: int
    seal: int


class Destroyer:
    """Destroys the memory at one object store's prefix (see the module's steps).

    `plan` reads and changes nothing; `destroy` is safe to stop anywhere and to run again, and
    concurrent writers are refused from the seal on. Requests: a listing of each folder the memory
    keeps (a page per 1000 versions), one to find other memories under it, the proof's write, a
    write per commit key held now, and a delete per 1000 versions.
    """

    def __init__(self, objects: ObjectStore, *, attempts: int = 6) -> None:
        if not isinstance(objects, DestroyableObjectStore):
            raise MemoryStoreError(
                "unavailable",
                f"{objects.location} cannot list and delete every stored version: destroy needs S3, GCS, "
                "a local directory or the in-memory stores.",
            )
        self.objects: DestroyableObjectStore = objects
        self.attempts = attempts

    async def plan(self) -> DestroyPlan:
        """What `destroy` would delete; refused when other memories live under this one's prefix,
        `not_found` where the memory's folders hold nothing."""
        await self._refuse_children()
        stored = await self._stored()
        if not stored:
            raise MemoryStoreError(
                "not_found",
                f"no memory at {self.objects.location}: its folders hold no object and no old version. "
                "Nothing was deleted.",
            )
        covered = _covered(stored)
        return DestroyPlan(
            location=self.objects.location,
            objects=len({version.key for version in stored}),
            versions=len(stored),
            markers=sum(version.marker for version in stored),
            bytes=sum(version.size for version in stored),
            covered=len(covered),
            sealed=bool(covered)
            and await self._get(covered[-1]) == DESTROYED
            and await self._get(PROOF_KEY) == DESTROYED,
        )

    async def destroy(self) -> Destroyed:
        """Prove, seal, cover, delete (the module's steps); what is left is the tombstones and the proof."""
        await self._refuse_children()
        stored = await self._stored()
        await self._prove()
        covered = _covered(stored)
        newest = max((seq for version in stored if (seq := _commit_seq(version.key)) is not None), default=0)
        seal = await self._seal(newest, covered)
        # Commits that landed between the listing and the seal hold the seqs it passed over.
        tombstones = {*covered, *(log_key(seq) for seq in range(newest + 1, seal + 1))}
        await gather_bounded(sorted(tombstones - {log_key(seal)} - await self._covered_before(stored)), self._cover)
        stored = await self._stored()
        doomed = [version for version in stored if not _kept(version, {*tombstones, PROOF_KEY})]
        await self._retry(functools.partial(self.objects.delete_stored, doomed), "Deleting the stored versions")
        return Destroyed(
            location=self.objects.location,
            versions_deleted=len(doomed),
            bytes_deleted=sum(version.size for version in doomed),
            tombstones=len(tombstones),
            seal=seal,
        )

    async def _prove(self) -> None:
        """Write the proof (once: a run again finds it), before any tombstone, so that none this run
        writes stands without it."""
        if await self._get(PROOF_KEY) != DESTROYED:
            await self._retry(
                functools.partial(self.objects.put, PROOF_KEY, DESTROYED, OVERWRITE), f"Writing {PROOF_KEY}"
            )

    async def _seal(self, newest: int, covered: Sequence[str]) -> int:
        """The seq of the seal: one a run before made, else the first free seq after `newest`,
        created if absent (a commit that lands first moves it on)."""
        if covered and await self._get(covered[-1]) == DESTROYED:
            return _commit_seq(covered[-1]) or 0
        seq = newest + 1
        while True:
            key = log_key(seq)
            try:
                await self._retry(functools.partial(self.objects.put, key, DESTROYED, CREATE), f"Sealing {key}")
                return seq
            except AlreadyExists:  # a create whose reply was lost and was sent again: the read tells it was ours
                if await self._get(key) == DESTROYED:
                    return seq
            seq += 1

    async def _covered_before(self, stored: Sequence[ObjectVersion]) -> set[str]:
        """The commit keys a run before covered: those whose current version is a tombstone's size,
        read to make sure (a hostile writer's object of that size may hold a text)."""
        covered = set(_covered(stored))
        sized = [version.key for version in stored if _kept(version, covered) and version.size == len(DESTROYED)]
        held = await gather_bounded(sized, self._get)
        return {key for key, data in zip(sized, held, strict=True) if data == DESTROYED}

    async def _cover(self, key: str) -> None:
        cover = functools.partial(self.objects.put, key, DESTROYED, OVERWRITE)
        await self._retry(cover, f"Writing the tombstone at {key}")

    async def _stored(self) -> list[ObjectVersion]:
        listed = await gather_bounded(
            OWN_FOLDERS,
            lambda folder: self._retry(functools.partial(self.objects.list_stored, folder), f"Listing {folder}"),
        )
        return [version for versions in listed for version in versions]

    async def _refuse_children(self) -> None:
        children = [
            prefix for prefix in await memory_prefixes(self.objects, attempts=self.attempts, destroyed=False) if prefix
        ]
        if children:
            named = ", ".join(f"{self.objects.location}/{child}" for child in children[:5])
            more = f" and {len(children) - 5} more" if len(children) > 5 else ""
            raise MemoryStoreError(
                "forbidden",
                f"{self.objects.location} holds other memories under its prefix: {named}{more}. Nothing was "
                "deleted. Destroy each of them first (`bucket-memory destroy URL`), or move them elsewhere.",
            )

    async def _get(self, key: str) -> bytes | None:
        return await self._retry(functools.partial(self.objects.get, key), f"Reading {key}")

    async def _retry[T](self, operation: Callable[[], Awaitable[T]], what: str) -> T:
        return await retrying(operation, what=f"{what} of {self.objects.location}", attempts=self.attempts)


def _commit_seq(key: str) -> int | None:
    return key_seq(key) if key.startswith(LOG_PREFIX) else None


def _covered(stored: Sequence[ObjectVersion]) -> list[str]:
    """The commit keys that hold a commit (or a tombstone) now, in seq order."""
    return sorted(
        {version.key for version in stored if version.current and _commit_seq(version.key) is not None},
        key=lambda key: _commit_seq(key) or 0,
    )


def _kept(version: ObjectVersion, tombstones: set[str]) -> bool:
    """Whether `version` is one `destroy` leaves: the current version at a covered key (or the proof)."""
    return version.current and not version.marker and version.key in tombstones
