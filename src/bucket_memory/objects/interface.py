"""The object layer's interface: the few operations the commit log needs from a bucket, and the
versions recovery and erasure read. Backends: `local` (a directory), `memory` (a dict, for tests),
`s3`, `s3_obstore` and `gcs`.

Keys are relative to one memory's prefix ("log/00000000000000000001.json"). Every backend gives
the same guarantees the clouds do: an object is written whole or not at all, a conditional `put`
succeeds for exactly one of any number of racing callers, and a listing sees every object written
before it.

Writes are one call, `put(key, data, mode)`, whose mode says the condition (object_store's
`PutMode`): `Create` (only where the key holds nothing), `IfMatch` (only while the key holds the
version a tag names: a bucket that keeps versions), `IfHolds` (only while the key holds these
bytes: a store that keeps no versions), `Overwrite` (whatever it holds: `destroy`'s tombstone).
Which modes a store keeps is in its protocol's `put` signature, so asking one for a mode it cannot
keep is a type error (at run time a `TypeError`, before anything is sent). The errors `put` may
raise, and what each says about the write:

    Refused                      the condition did not hold when the answered request came:
    │                            it wrote nothing (an earlier send of the same call, which a
    │                            transport may make, may have: only reading the key tells)
    ├── AlreadyExists            Create: the key holds an object
    └── PreconditionFailed       IfMatch / IfHolds: the key holds another version, or nothing
    MemoryStoreError             nothing was written: the request never left (credentials,
    │                            settings, the operation's deadline) or a reply refused it
    └── code "forbidden"         the same, and the rule callers rely on (`log/settle.py`)
    TransientError, or any       the request may have reached the server and been written,
    other exception              by this very request: read the key before deciding

The rule every backend keeps: an error raised after a request may have been sent (a reset
connection, a timeout, a reply cut short, a body or checksum that failed as the reply was read)
is never a `MemoryStoreError`; a backend that cannot tell maps it to `TransientError`. Nor is a
refusal of a second send of the same write (its first may have landed), so a backend's client
sends a write once: one SDK attempt, no transport resend (`s3_clients`). `tests/test_objects.py`
holds every backend to it with faults after sending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, runtime_checkable


class TransientError(Exception):
    """A request failed in a way that may pass: throttling, a 5xx, a timeout, a reset connection.

    For `put` the outcome is unknown: the object may hold the data, written by this very request.
    """


class Refused(Exception):
    """A conditional `put` whose condition did not hold: the request answered wrote nothing (an
    earlier send of it may have, so the key may hold this call's own bytes). An answer for the
    caller to decide on, never a failure to report: every caller catches it."""

    def __init__(self, location: str, key: str, why: str) -> None:
        super().__init__(f"{location}/{key}: {why}")
        self.key = key


class AlreadyExists(Refused):
    """`Create` found the key holding an object (a 412 to `If-None-Match: *`, a taken generation 0,
    a link that exists)."""


class PreconditionFailed(Refused):
    """`IfMatch` or `IfHolds` found the key holding another version than the one named, or nothing."""


@dataclass(frozen=True, slots=True)
class Create:
    """Write only where the key holds nothing."""


@dataclass(frozen=True, slots=True)
class IfMatch:
    """Write only while the key's current version is the one `tag` names (`ObjectVersion.tag`: an
    S3 ETag, a GCS generation): the overwrite a bucket that keeps versions can make."""

    tag: str


@dataclass(frozen=True, slots=True)
class IfHolds:
    """Write only while the key holds exactly `expected`: the overwrite a store that keeps no
    versions (a directory, a dict) makes by comparing under its own lock."""

    expected: bytes


@dataclass(frozen=True, slots=True)
class Overwrite:
    """Write whatever the key holds: only `destroy`'s tombstone, which must cover any object."""


CREATE: Final = Create()
OVERWRITE: Final = Overwrite()
type PutMode = Create | IfMatch | IfHolds | Overwrite


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """A listed object: its key and when the server last wrote it (seconds since the epoch)."""

    key: str
    modified: float


@runtime_checkable
class ObjectStore(Protocol):
    """The objects under one memory's prefix, every method's contract in its docstring. A failure
    that may pass raises `TransientError`, one that will not a `MemoryStoreError` (`forbidden`,
    `unavailable`); what each error from `put` says about the write is in the module docstring.
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

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        """Write `data` at `key` whole, only where the key holds nothing (this protocol's one mode;
        stores that keep more say so in their own `put`). Returns once this request wrote it.
        `AlreadyExists` when the key holds an object; `MemoryStoreError` only when nothing can have
        been written; `TransientError` or any other exception when it may have been, by this very
        request, so a caller that must know reads the key back (`log/settle.py`)."""
        ...

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> list[ObjectInfo]:
        """The objects under `prefix` in key order, after `start_after` when given, the first
        `limit` when given (one request where the server pages by that many; a store whose
        listing is unordered lists them all first); every object written before the call is listed."""
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
    was on; a GCS generation), `tag` for a conditional overwrite of it (`IfMatch`: an S3 ETag, a
    generation). `current` tells whether a read of the key answers it (not for one deleted or
    overwritten since).
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
    open tells a wiped memory (refused until `recover`) from a new one."""

    async def has_past(self, prefix: str) -> bool:
        """Whether anything (a version or a delete marker) is stored under `prefix`, in a bucket
        that keeps old versions; one request."""
        ...


@runtime_checkable
class InstantObjectStore(ObjectStore, Protocol):
    """An object store on a local disk, where one stat on the event loop costs less than the
    thread hop of a request: how a fresh read's probe proves the next commit absent."""

    def absent(self, key: str) -> bool:
        """True only when the key is proven absent now; False when it exists or the stat could not
        tell (a `get` then says what is wrong)."""
        ...


@runtime_checkable
class VersionedObjectStore(PastObjectStore, Protocol):
    """An object store whose bucket keeps old versions: what recovery after a purge or a wipe reads,
    and what erasure overwrites a version of (`IfMatch`) and deletes old versions from."""

    async def put(self, key: str, data: bytes, mode: Create | IfMatch) -> None:
        """`ObjectStore.put`, and with `IfMatch` an overwrite only while the key's current version
        is the one the tag names: `PreconditionFailed` when it holds another, or nothing."""
        ...

    async def list_versions(self, prefix: str) -> list[ObjectVersion]:
        """Every content version under `prefix` (delete markers left out), each key's oldest first."""
        ...

    async def get_version(self, key: str, version: str) -> bytes | None:
        """The bytes of one stored version, None when it is gone."""
        ...

    async def delete_version(self, key: str, version: str) -> None:
        """Remove one stored version for good (erasure: the operator's `s3:DeleteObjectVersion`);
        one that is gone is no error."""
        ...

    async def versioning(self) -> Versioning:
        """Whether the bucket keeps versions now ("suspended": it did, and keeps those)."""
        ...


@runtime_checkable
class RewritableObjectStore(ObjectStore, Protocol):
    """An object store that can replace an object only while it holds given bytes, comparing under
    its own lock (a directory, a dict): what erasure rewrites a local memory's objects with. Every
    store has `put`, so `rewrites_in_place` is what tells one at run time."""

    @property
    def rewrites_in_place(self) -> Literal[True]:
        """True: `put` keeps `IfHolds`."""
        ...

    async def put(self, key: str, data: bytes, mode: Create | IfHolds) -> None:
        """`ObjectStore.put`, and with `IfHolds` a replacement, whole, only while the key holds
        exactly the bytes expected: `PreconditionFailed` when it holds others, or nothing."""
        ...
