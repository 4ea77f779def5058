"""Objects in memory whose bucket keeps every version, as S3 with versioning on: for fault injection
into the code that reads, rewrites and deletes stored versions (recovery, erasure)."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Sequence

from ..objects.interface import IfMatch, ObjectVersion, PreconditionFailed, PutMode, Versioning
from ..objects.memory import MemoryObjectStore


class VersionedMemoryObjectStore(MemoryObjectStore):
    """A `MemoryObjectStore` that keeps each key's versions, oldest first, with S3's rules: a delete
    leaves a delete marker, deleting a version makes the one before it current, and `put` with
    `IfMatch` overwrites only the version its tag names."""

    def __init__(self, name: str = "versioned") -> None:
        super().__init__(name)
        # Per key, (version id, bytes or None for a delete marker, when written by the server's clock).
        self.stored: dict[str, list[tuple[str, bytes | None, float]]] = {}
        self._ids = itertools.count(1)

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        if isinstance(mode, IfMatch):
            versions = self.stored.get(key)
            if key not in self.objects or not versions or versions[-1][0] != mode.tag:
                raise PreconditionFailed(self.location, key, "the key holds another version, or nothing")
            self.objects[key] = (bytes(data), self.clock)
        else:
            await super().put(key, data, mode)
        self._keep(key, bytes(data))

    async def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            if key in self.objects:
                self._keep(key, None)
        await super().delete(keys)

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [
            ObjectVersion(key, version, modified, version, current=index == len(versions) - 1)
            for key, versions in sorted(self.stored.items())
            if key.startswith(prefix)
            for index, (version, data, modified) in enumerate(versions)
            if data is not None
        ]

    async def get_version(self, key: str, version: str) -> bytes | None:
        return next((data for name, data, _ in self.stored.get(key, ()) if name == version), None)

    async def has_past(self, prefix: str) -> bool:
        return any(key.startswith(prefix) for key in self.stored)

    async def delete_version(self, key: str, version: str) -> None:
        versions = [entry for entry in self.stored.get(key, ()) if entry[0] != version]
        if versions:
            self.stored[key] = versions
        else:
            self.stored.pop(key, None)
        newest = versions[-1] if versions else None
        if newest is not None and newest[1] is not None:
            self.objects[key] = (newest[1], newest[2])
        else:
            self.objects.pop(key, None)

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [
            ObjectVersion(
                key,
                version,
                modified,
                version,
                data is not None and index == len(versions) - 1,
                data is None,
                len(data or b""),
            )
            for key, versions in sorted(self.stored.items())
            if key.startswith(prefix)
            for index, (version, data, modified) in enumerate(versions)
        ]

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        for version in versions:
            await self.delete_version(version.key, version.version)

    async def versioning(self) -> Versioning:
        return "enabled"

    def _keep(self, key: str, data: bytes | None) -> None:
        self.stored.setdefault(key, []).append((str(next(self._ids)), data, self.clock))
