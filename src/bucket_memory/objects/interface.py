"""The object layer's interface: the few operations the commit log needs from a bucket, and the
versions recovery and erasure read. Backends: `local` (a directory), `memory` (a dict, for tests),
`s3`, `s3_obstore` and `gcs`.

Keys are relative to one memory's prefix ("log/00000000000000000001.json"). Every backend gives
the same guarantees the clouds do: an object is created whole or not at all, `create` succeeds
for exactly one of any number of racing callers, and a listing sees every object created before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable


class TransientError(Exception):
    """A request failed in a way that may pass: throttling, a 5xx, a timeout, a reset connection.

    For `create` the outcome is unknown: the object may exist, written by this very request.
    """


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """A listed object: its key and when the server last wrote it (seconds since the epoch)."""

    key: str
    modified: float


@runtime_checkable
class ObjectStore(Protocol):
    """The objects under one memory's prefix; each method states its contract. Failures that may
    pass raise `TransientError`, others `MemoryStoreError` (`forbidden`, `unavailable`); what an
    error from `create` means is in its docstring (`log/settle.py` reads the key back after any
    error but `forbidden` and the deadline's, in case a backend errs).
    """

    @property
    def location(self) -> str:
        """Where the objects are, for messages: a URL such as s3://bucket/prefix."""
        ...

    @property
    def ordered_listing(self) -> bool:
        """Whether the server lists in key order from a start-after key (S3 Express does not)."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The object's bytes, None when the key is absent. `TransientError` when the read may
        pass on a retry; `MemoryStoreError` (`forbidden`, `unavailable`) when it will not."""
        ...

    async def create(self, key: str, data: bytes) -> bool:
        """Write `data` at `key` only if the key is absent: True when this call created it, False
        when the key was there. An error means different things by its type: `MemoryStoreError`
        only when the object cannot have been created (the request was never sent or a reply
        refused it); `TransientError` or any other exception when it may have been, by this very
        request, so the caller reads the key back before it decides (`log/settle.py`)."""
        ...

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> list[ObjectInfo]:
        """The objects under `prefix` in key order, after `start_after` when given, the first
        `limit` when given (one request where the server pages by that many; a store whose
        listing is unordered lists them all first); every object created before the call is listed."""
        ...

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete `keys`; a key already absent is no error. `TransientError` when the deletion
        may pass on a retry (some keys may be gone by then)."""
        ...

    async def now(self, *, ageing: bool = False) -> float:
        """The server's clock, in seconds since the epoch. With `ageing` the caller deletes objects by
        their age from it, so it must not run ahead of the server's (it may send a request to make sure)."""
        ...


type Versioning = Literal["enabled", "suspended", "off"]


@dataclass(frozen=True, slots=True)
class ObjectVersion:
    """One stored version of an object, current or not (a bucket with versioning keeps deleted ones).

    `version` names it for reading (an S3 version id, "null" for one written before versioning
    was on; a GCS generation), `tag` for a conditional overwrite of it (an S3 ETag, a generation).
    `current` tells whether a read of the key answers it (not for one deleted or overwritten since).
    """

    key: str
    version: str
    modified: float
    tag: str
    current: bool = False
    marker: bool = False  # an S3 delete marker (listed by `list_stored` only): no content
    size: int = 0  # bytes stored (given by `list_stored` only)


@runtime_checkable
class PastObjectStore(ObjectStore, Protocol):
    """An object store that can tell whether anything was ever stored under a prefix: how a cold
    open tells a wiped memory (refused until `recover`) from a new one.

    `has_past` tells in one request whether anything (a version or a delete marker) is stored
    under a prefix, in a bucket that keeps old versions.
    """

    async def has_past(self, prefix: str) -> bool: ...


@runtime_checkable
class InstantObjectStore(ObjectStore, Protocol):
    """An object store on a local disk, where one stat on the event loop costs less than the
    thread hop of a request: how a fresh read's probe proves the next commit absent.

    `absent` is True only when the key is proven absent now; False when it exists or the stat
    could not tell (a `get` then says what is wrong).
    """

    def absent(self, key: str) -> bool: ...


@runtime_checkable
class VersionedObjectStore(PastObjectStore, Protocol):
    """An object store whose bucket keeps old versions: what recovery after a purge or a wipe reads.

    `list_versions` gives every content version under a prefix (delete markers left out), each
    key's oldest first. `replace` overwrites a key only while it holds the version
    `tag` names, and says whether it did. `delete_version` removes one stored version for good
    (erasure: the operator's `s3:DeleteObjectVersion`); deleting one that is gone is no error.
    """

    async def list_versions(self, prefix: str) -> list[ObjectVersion]: ...

    async def get_version(self, key: str, version: str) -> bytes | None: ...

    async def replace(self, key: str, data: bytes, *, tag: str) -> bool: ...

    async def delete_version(self, key: str, version: str) -> None: ...

    async def versioning(self) -> Versioning: ...


@runtime_checkable
class RewritableObjectStore(ObjectStore, Protocol):
    """An object store that keeps no old versions and can replace an object in place: what erasure
    rewrites a local memory's objects with. `rewrite` replaces a key whole, only while it holds the
    bytes `expected`, and says whether it did."""

    async def rewrite(self, key: str, data: bytes, *, expected: bytes) -> bool: ...
