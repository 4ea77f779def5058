"""Many memories in one in-memory bucket: each memory's view of it under a key prefix, as an S3
store's prefix is, for the tests and benchmarks of operator work across memories."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence

from ..objects.bulk import RolledPage
from ..objects.interface import ObjectInfo, ObjectVersion, PutMode, Versioning
from .faults import FaultyObjectStore
from .versioned import VersionedMemoryObjectStore


class PrefixedObjectStore:
    """The objects of a versioned in-memory bucket (or a `FaultyObjectStore` counting its requests)
    under `prefix`, with keys relative to it: every request goes to the bucket as one request, so
    the bucket's counts are the sum over its memories. It keeps the bucket's guarantees and offers
    what S3 does (versions, rolled listings, destroy); a prefix ends in "/"."""

    def __init__(self, bucket: VersionedMemoryObjectStore | FaultyObjectStore, prefix: str) -> None:
        if prefix and not prefix.endswith("/"):
            raise ValueError(f"a memory's prefix ends in '/', not {prefix!r}")
        self.bucket, self.prefix = bucket, prefix

    @property
    def location(self) -> str:
        return f"{self.bucket.location}/{self.prefix}".rstrip("/")

    @property
    def ordered_listing(self) -> bool:
        return self.bucket.ordered_listing

    def _in(self, key: str) -> str:
        return self.prefix + key

    def _out(self, key: str) -> str:
        return key[len(self.prefix) :]

    async def get(self, key: str) -> bytes | None:
        return await self.bucket.get(self._in(key))

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        after = self._in(start_after) if start_after is not None else None
        found = await self.bucket.list(self._in(prefix), start_after=after, limit=limit)
        return [ObjectInfo(self._out(info.key), info.modified) for info in found]

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        page = await self.bucket.list_rolled(self._in(prefix), delimiter, token=token)
        return RolledPage([self._out(key) for key in page.keys], [self._out(key) for key in page.prefixes], page.token)

    async def delete(self, keys: Sequence[str]) -> None:
        await self.bucket.delete([self._in(key) for key in keys])

    async def now(self, *, ageing: bool = False) -> float:
        return await self.bucket.now(ageing=ageing)

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [self._version_out(found) for found in await self.bucket.list_versions(self._in(prefix))]

    async def get_version(self, key: str, version: str) -> bytes | None:
        return await self.bucket.get_version(self._in(key), version)

    async def has_past(self, prefix: str) -> bool:
        return await self.bucket.has_past(self._in(prefix))

    async def delete_version(self, key: str, version: str) -> None:
        await self.bucket.delete_version(self._in(key), version)

    async def versioning(self) -> Versioning:
        return await self.bucket.versioning()

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        await self.bucket.put(self._in(key), data, mode)

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [self._version_out(found) for found in await self.bucket.list_stored(self._in(prefix))]

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        await self.bucket.delete_stored([dataclasses.replace(found, key=self._in(found.key)) for found in versions])

    def _version_out(self, found: ObjectVersion) -> ObjectVersion:
        return dataclasses.replace(found, key=self._out(found.key))
