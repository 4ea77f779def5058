"""Changing objects the log never changes: a current object replaced by another form of itself, and
stored versions removed for good. Only erasure does this (`erasure.py`)."""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
from collections.abc import Callable, Collection, Sequence
from typing import cast

from a13n_harness.providers.memory import MemoryStoreError

from ..files.store import LogFileStore
from ..format.wire_values import LOG_PREFIX, is_owned
from ..objects.interface import (
    CREATE,
    AlreadyExists,
    IfHolds,
    IfMatch,
    ObjectVersion,
    PreconditionFailed,
    RewritableObjectStore,
    VersionedObjectStore,
)
from ..objects.local import STAGING, LocalObjectStore
from ..objects.retry import gather_bounded, retrying
from ..runtime.off_loop import off_loop
from .recovery import Recovery
from .versions import StoredVersions

logger = logging.getLogger(__name__)

type Redaction = Callable[[bytes], bytes | None]


class Rewriting:
    """The objects of one memory, rewritten in place and their old versions deleted.

    A bucket with versions (S3, GCS) replaces an object only while it holds the version that was
    read (S3 `If-Match`, GCS `ifGenerationMatch`); a local memory, which keeps no versions, renames
    a new file over it only while it holds the bytes read (under a lock). So two runs at once
    (erasing two files, whose texts share checkpoints) never undo each other. `check` refuses, before anything is
    changed, credentials that may not list versions and a store that can do neither.
    """

    def __init__(self, store: LogFileStore) -> None:
        self.store = store
        self.objects = store.objects
        # The overwrites `_put_right` found ("key", "version"): `delete_versions` deletes them first.
        self._put_right_first: set[tuple[str, str]] = set()

    async def check(self) -> None:
        """Refuse now what would be refused half-way: on a bucket, listing versions, and reading and
        deleting one, tried on a short-lived object of its own (`doctor/<random>.json`, as `doctor`
        makes), which it leaves as nothing (as a delete marker and one version where deleting a
        version is refused, both under `doctor/`)."""
        objects = self.objects
        if not isinstance(objects, VersionedObjectStore):
            if not isinstance(objects, RewritableObjectStore):
                raise MemoryStoreError(
                    "unavailable", f"{self.store.location} cannot rewrite its objects; it cannot erase."
                )
            return
        what = f"Checking the operator's permissions on {self.store.location}"
        await retrying(lambda: objects.has_past(LOG_PREFIX), what=what)
        key = f"doctor/{secrets.token_hex(8)}.json"
        with contextlib.suppress(AlreadyExists):  # a fresh key: only our own put, sent twice, is there
            await retrying(functools.partial(objects.put, key, b"{}", CREATE), what=what)
        try:
            for version in await self._versions(key):
                await self._read_version(version)
                await retrying(functools.partial(objects.delete_version, version.key, version.version), what=what)
        finally:
            try:
                if await retrying(functools.partial(objects.get, key), what=what) is not None:
                    await retrying(functools.partial(objects.delete, [key]), what=what)
            except MemoryStoreError as error:  # the refusal above is what the operator must see
                logger.warning("could not delete %s/%s: %s", self.store.location, key, error)

    async def rewrite_all(self, found: Sequence[tuple[str, Redaction]], *, first: Collection[str] = ()) -> list[str]:
        """Replace each object found by what its redaction makes of it, several at a time, the keys
        in `first` (void commits, whose rewrites record their verdicts) before the other commits,
        and commits before checkpoints; the keys this call rewrote (not those gone, or left with
        nothing to redact, meanwhile). An erase asks `refuse_disproved` first."""
        current = await self._current()
        rewritten: list[str] = []
        # A void commit's rewrite records its verdict; one not rewritten yet when a run is killed,
        # replayed over a text erased before it (in a commit or checkpoint below it), has its edit
        # applied to that erased text, which it no longer fails: void turned valid (seeds 715, 8135).
        commits = [item for item in found if item[0].startswith(LOG_PREFIX)]
        for batch in (
            [item for item in commits if item[0] in first],
            [item for item in commits if item[0] not in first],
            [item for item in found if not item[0].startswith(LOG_PREFIX)],
        ):
            done = await gather_bounded(batch, lambda item: self._rewrite(item[0], item[1], current.get(item[0])))
            rewritten += [key for (key, _), landed in zip(batch, done, strict=True) if landed]
        return rewritten

    async def old_versions(self, holds: Callable[[ObjectVersion, bytes], bool]) -> list[ObjectVersion]:
        """The stored versions of the memory's own keys, other than the current ones, that `holds`
        says hold something, each read once. A redacted version made current and then deleted by
        compaction is kept: it is what `recover` puts back."""
        if not isinstance(self.objects, VersionedObjectStore):
            return []
        listed = [version for version in await self._versions("") if is_owned(version.key)]
        candidates = [version for version in listed if not version.current]

        async def held(version: ObjectVersion) -> bool:
            data = await self._read_version(version)
            return data is not None and await off_loop(len(data), functools.partial(holds, version, data))

        marks = await gather_bounded(candidates, held)
        chosen = [version for version, mark in zip(candidates, marks, strict=True) if mark]
        put_right = await self._put_right(listed, chosen)
        self._put_right_first.update((version.key, version.version) for version in put_right)
        return put_right + chosen

    async def refuse_disproved(self) -> None:
        """`unavailable` where a checkpoint of the memory is a forgery (or made on one) that the first
        versions of the log disprove: an erase asks before it rewrites or deletes anything, because
        the versions it deletes may be what disproves it. Rewritten, the forgery would stand once the
        erase deleted the versions that hold the text, its first among them (seed 1321); left alone,
        once the erase deleted the versions of compacted commits and checkpoints that held the text,
        nothing would be left below it to replay (seed 5577: a process that loaded the forgery
        committed the erasure, checkpointed on it and compacted below it). A checkpoint is derived
        data, but deleting it here would not do either: processes that loaded it serve it until
        `recover` commits the mark that makes them load again."""
        if not isinstance(self.objects, VersionedObjectStore):
            return
        if disproved := await Recovery(self.store).disproved_checkpoints():
            raise _disproved(self.store.location, disproved[0])

    async def _put_right(self, listed: list[ObjectVersion], chosen: list[ObjectVersion]) -> list[ObjectVersion]:
        """Where `chosen` takes a key's first version: the versions of that key that a later one
        replaced by that first version again (or its erased form). Each is an overwrite a recover put
        right; left, the oldest version once the first is gone, recover would take it for the
        memory's (seed 314: a forged commit 4 between two true ones, which an erase deleted). Where
        the current version of such a commit key is another commit, `unavailable`: the first is the
        only copy of that commit (seed 2736), checked here since the versions are read here anyway."""
        going = {(version.key, version.version) for version in chosen}
        by_key: dict[str, list[ObjectVersion]] = {}
        for version in listed:
            by_key.setdefault(version.key, []).append(version)
        stored = StoredVersions(cast(VersionedObjectStore, self.objects), self.store.format, {})
        found: list[ObjectVersion] = []
        for key, versions in by_key.items():
            if len(versions) < 2 or (key, versions[0].version) not in going:
                continue
            first, later = await self._read_version(versions[0]), versions[1:]
            texts = await gather_bounded(later, self._read_version)
            back = [
                first is not None and data is not None and await stored.holds_first(key, first, data) for data in texts
            ]
            if key.startswith(LOG_PREFIX) and any(v.current and not back[n] for n, v in enumerate(later)):
                raise _overwritten(self.store.location, key)
            found += [
                version
                for index, version in enumerate(later)
                if (key, version.version) not in going and not back[index] and any(back[index + 1 :])
            ]
        return found

    async def staged_leftovers(self, holds: Callable[[str, bytes], bool]) -> list[str]:
        """Remove the staging files of a local memory that `holds` says hold something, left by
        writers that died mid-create (older than any create can take); their names."""
        objects = self.objects
        if not isinstance(objects, LocalObjectStore):
            return []
        removed = []
        for name, data in await objects.staged(older_than=self.store.options.operation_timeout):
            if holds(name, data):
                await objects.remove_staged(name)
                removed.append(f"{STAGING}/{name}")
        return removed

    async def delete_versions(self, versions: Sequence[ObjectVersion]) -> None:
        """Delete these stored versions for good (`old_versions` finds them: none on a local memory),
        the overwrites `_put_right` found before the rest: killed after deleting a key's first
        version and the copy a recover put back but not the overwrite between them, a run left that
        the oldest, and no later run could tell it from the memory's (seed 2629)."""
        if not versions:
            return
        objects = self.objects
        assert isinstance(objects, VersionedObjectStore), "only a bucket with versions lists old versions"

        async def delete(version: ObjectVersion) -> None:
            await retrying(
                functools.partial(objects.delete_version, version.key, version.version),
                what=f"Deleting {version.key}@{version.version}",
            )

        first = [version for version in versions if (version.key, version.version) in self._put_right_first]
        await gather_bounded(first, delete)
        await gather_bounded([version for version in versions if version not in first], delete)

    async def _rewrite(self, key: str, redact: Redaction, current: ObjectVersion | None) -> bool:
        """Replace the object at `key` by the redacted form of the very version read (`current`, when
        listed), only while it is still current; whether this call did."""
        objects = self.objects
        for _ in range(self.store.options.request_attempts):
            if not isinstance(objects, VersionedObjectStore):
                assert isinstance(objects, RewritableObjectStore)
                data = await self.store.reader.get(key)
                redacted = None if data is None else await off_loop(len(data), functools.partial(redact, data))
                if data is None or redacted is None:
                    return False  # compacted meanwhile, or redacted by another run
                try:
                    await retrying(
                        functools.partial(objects.put, key, redacted, IfHolds(data)), what=f"Rewriting {key}"
                    )
                    return True
                except PreconditionFailed:
                    continue  # another run rewrote it meanwhile: redact what it holds now
            if current is None:
                listed = [version for version in await self._versions(key) if version.current]
                if not listed:
                    return False
                current = listed[-1]
            data = await self._read_version(current)
            redacted = None if data is None else await off_loop(len(data), functools.partial(redact, data))
            if data is None or redacted is None:
                return False
            try:
                await retrying(
                    functools.partial(objects.put, key, redacted, IfMatch(current.tag)), what=f"Rewriting {key}"
                )
                return True
            except PreconditionFailed:
                current = None  # another version came (a concurrent run): list and read it again
        raise MemoryStoreError(
            "unavailable", f"{self.store.location}/{key} kept changing while it was rewritten; try again."
        )

    async def deleted(self, key: str) -> bool:
        """Whether the bucket keeps a version of `key` though the key holds nothing now (never on a
        local memory, which keeps no versions)."""
        if not isinstance(self.objects, VersionedObjectStore):
            return False
        versions = [version for version in await self._versions(key) if version.key == key]
        return bool(versions) and not any(version.current for version in versions)

    async def _current(self) -> dict[str, ObjectVersion]:
        """The current version of each key, from one listing (none on a local memory)."""
        if not isinstance(self.objects, VersionedObjectStore):
            return {}
        return {version.key: version for version in await self._versions("") if version.current}

    async def _versions(self, prefix: str) -> list[ObjectVersion]:
        objects = self.objects
        assert isinstance(objects, VersionedObjectStore)
        return await retrying(
            functools.partial(objects.list_versions, prefix), what=f"Listing versions of {self.store.location}/{prefix}"
        )

    async def _read_version(self, version: ObjectVersion) -> bytes | None:
        objects = self.objects
        assert isinstance(objects, VersionedObjectStore)
        return await retrying(
            functools.partial(objects.get_version, version.key, version.version),
            what=f"Reading {version.key}@{version.version}",
        )


def _overwritten(location: str, key: str) -> MemoryStoreError:
    """An erase about to delete the first version of commit `key`, which another object replaced:
    that version is the only copy of the commit (seed 2736), so nothing is deleted until `recover`
    has put it back."""
    return MemoryStoreError(
        "unavailable",
        f"{location}/{key} is not the commit first stored there (it was overwritten, by hand or by a writer "
        f"holding the agents' grants), and erasing would delete the only copy of that commit. Run "
        f"`bucket-memory verify {location}`, which names it, then `bucket-memory recover {location}`, then "
        "`erase` again.",
    )


def _disproved(location: str, key: str) -> MemoryStoreError:
    """An erase that finds checkpoint `key`, which the log disproves (seeds 1321, 5577)."""
    return MemoryStoreError(
        "unavailable",
        f"{location}/{key} is not the state its log replays to (a checkpoint written by hand or by a writer holding "
        f"the agents' grants, or made on such a one), and erasing now could leave it the memory's. Run "
        f"`bucket-memory verify {location}`, which names it, then `bucket-memory recover {location}`, which removes "
        "it, then `erase` again to finish.",
    )
