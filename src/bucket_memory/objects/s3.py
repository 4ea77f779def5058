"""The object layer on S3 (and S3-compatible endpoints) through an aiobotocore client."""

from __future__ import annotations

import asyncio
import base64
import builtins
import functools
import weakref
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime.deadline import check_seconds
from ..runtime.off_loop import off_loop
from .bulk import RolledPage
from .interface import (
    AlreadyExists,
    Create,
    IfMatch,
    ObjectInfo,
    ObjectVersion,
    Overwrite,
    PreconditionFailed,
    Versioning,
)
from .retry import gather_bounded
from .s3_clients import LoopClient, shared_client
from .s3_errors import Exists, Missing, s3_error, wrong_endpoint
from .s3_failures import botocore_failure
from .server_clock import ServerClock
from .urls import check_prefix

_DELETE_BATCH = 1000
_DELETE_CONCURRENCY = 4
type _Request = Callable[[Any], Awaitable[Any]]
_LISTED_TIME_RESOLUTION = 1.0


class S3ObjectStore:
    """The objects under `s3://bucket/prefix/`: `put` is one `PutObject`, `Create` with
    `If-None-Match: *`, `IfMatch` with `If-Match` (the ETag), `Overwrite` with neither.

    Without a `client` the store uses the process's shared client for the running event loop and
    the credentials in the environment (`shared_client`: an aiobotocore client belongs to the loop
    it was made on), so one store serves a process that calls `asyncio.run` per request, and a
    thousand stores open at once hold one client and its few sockets; `aclose` lets go of the
    running loop's, which closes once no store holds it. A caller's `client` is used on its own
    loop only. The shared client sends each request once (one SDK attempt, no aiohttp resend:
    `s3_clients`); a caller's client that retries may have a refusal answer a retry of a write its
    first attempt made, which breaks `put`'s error rule (`log/settle.py` reads back all else). A 412 is reported as the
    mode's `Refused`; 409 ConditionalRequestConflict, throttling, 5xx, lost connections and any SDK
    failure after a request may have been sent as `TransientError`, so the log reads the key back.
    """

    def __init__(self, client: Any = None, *, bucket: str, prefix: str = "", request_timeout: float = 30.0) -> None:
        check_prefix(prefix.strip("/"), f"s3://{bucket}")
        self._given = client
        self.request_timeout = check_seconds("request_timeout", request_timeout)
        self._given_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopClient] = weakref.WeakKeyDictionary()
        self.bucket = bucket
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        # S3 Express One Zone directory buckets ("name--zone--x-s3") list unordered, without StartAfter.
        self.ordered_listing = not bucket.endswith("--x-s3")
        self.clock = ServerClock()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix.rstrip('/')}".rstrip("/")

    async def get(self, key: str) -> bytes | None:
        return await self._read(lambda client: client.get_object(Bucket=self.bucket, Key=self.prefix + key), key)

    async def put(self, key: str, data: bytes, mode: Create | IfMatch | Overwrite) -> None:
        condition = _condition(mode, self.location)
        checksum = await _checksum(data)
        try:
            await self._call(
                lambda client: client.put_object(
                    Bucket=self.bucket, Key=self.prefix + key, Body=data, **condition, **checksum
                ),
                key,
                absent_ok=isinstance(mode, IfMatch),
            )
        except Exists:
            if isinstance(mode, Create):
                raise AlreadyExists(self.location, key, "the key holds an object (412)") from None
            raise PreconditionFailed(self.location, key, "the key holds another version (412)") from None
        except Missing:  # If-Match on a key that holds nothing
            raise PreconditionFailed(self.location, key, "the key holds nothing (404)") from None

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        found: builtins.list[ObjectInfo] = []
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + prefix}
        if start_after is not None and self.ordered_listing:
            arguments["StartAfter"] = self.prefix + start_after
        if limit is not None and self.ordered_listing:
            arguments["MaxKeys"] = min(limit, 1000)
        while True:
            page = await self._call(lambda client: client.list_objects_v2(**arguments), prefix)
            # Listings give LastModified in whole seconds: the object was written before that second
            # ended, and ageing it from the end keeps compaction on the safe side of the grace period.
            found.extend(
                ObjectInfo(item["Key"][len(self.prefix) :], item["LastModified"].timestamp() + _LISTED_TIME_RESOLUTION)
                for item in page.get("Contents", ())
            )
            if not page.get("IsTruncated") or (limit is not None and self.ordered_listing and len(found) >= limit):
                break
            arguments["ContinuationToken"] = page["NextContinuationToken"]
        if self.ordered_listing:
            return found[:limit]
        # A directory bucket's listing: every key under the prefix, in no order.
        return sorted((info for info in found if start_after is None or info.key > start_after), key=lambda i: i.key)[
            :limit
        ]

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + prefix, "Delimiter": delimiter}
        if token is not None:
            arguments["ContinuationToken"] = token
        page = await self._call(lambda client: client.list_objects_v2(**arguments), prefix)
        return RolledPage(
            [item["Key"][len(self.prefix) :] for item in page.get("Contents", ())],
            [item["Prefix"][len(self.prefix) :] for item in page.get("CommonPrefixes", ())],
            page.get("NextContinuationToken") if page.get("IsTruncated") else None,
        )

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete in batches of 1000 (DeleteObjects' limit), a few batches at a time."""
        await gather_bounded(
            [keys[start : start + _DELETE_BATCH] for start in range(0, len(keys), _DELETE_BATCH)],
            self._delete_batch,
            limit=_DELETE_CONCURRENCY,
        )

    async def _delete_batch(self, keys: Sequence[str]) -> None:
        batch = {"Objects": [{"Key": self.prefix + key} for key in keys], "Quiet": True}
        response = await self._call(lambda client: client.delete_objects(Bucket=self.bucket, Delete=batch), keys[0])
        _check_deleted(response, self.prefix, self.location)

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        """Every content version under the prefix (delete markers left out), each key's oldest first.

        ListObjectVersions lists each key's versions newest first; an object written before
        versioning was turned on is the version "null".
        """
        by_key: dict[str, builtins.list[ObjectVersion]] = {}
        for version in await self.list_stored(prefix):
            if not version.marker:
                by_key.setdefault(version.key, []).append(version)
        return [version for versions in by_key.values() for version in reversed(versions)]

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        """Every version and delete marker under the prefix (ListObjectVersions, 1000 a page)."""
        found: builtins.list[ObjectVersion] = []
        arguments: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.prefix + prefix}
        while True:
            page = await self._call(lambda client: client.list_object_versions(**arguments), prefix, history=True)
            for kind, marker in (("Versions", False), ("DeleteMarkers", True)):
                found.extend(
                    ObjectVersion(
                        item["Key"][len(self.prefix) :],
                        item.get("VersionId") or "null",
                        item["LastModified"].timestamp(),
                        item.get("ETag", ""),
                        bool(item.get("IsLatest")) and not marker,
                        marker,
                        item.get("Size", 0),
                    )
                    for item in page.get(kind, ())
                )
            if not page.get("IsTruncated"):
                return found
            arguments["KeyMarker"], arguments["VersionIdMarker"] = page["NextKeyMarker"], page["NextVersionIdMarker"]

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        """Delete versions for good in batches of 1000 (DeleteObjects with version ids), a few at a time."""

        async def batch(chosen: Sequence[ObjectVersion]) -> None:
            named = [{"Key": self.prefix + version.key, "VersionId": version.version} for version in chosen]
            response = await self._call(
                lambda client: client.delete_objects(Bucket=self.bucket, Delete={"Objects": named, "Quiet": True}),
                chosen[0].key,
                history=True,
            )
            _check_deleted(response, self.prefix, self.location, history=True)

        await gather_bounded(
            [versions[start : start + _DELETE_BATCH] for start in range(0, len(versions), _DELETE_BATCH)],
            batch,
            limit=_DELETE_CONCURRENCY,
        )

    async def has_past(self, prefix: str) -> bool:
        page = await self._call(
            lambda client: client.list_object_versions(Bucket=self.bucket, Prefix=self.prefix + prefix, MaxKeys=1),
            prefix,
            history=True,
        )
        return bool(page.get("Versions") or page.get("DeleteMarkers"))

    async def delete_version(self, key: str, version: str) -> None:
        await self._call(
            lambda client: client.delete_object(Bucket=self.bucket, Key=self.prefix + key, VersionId=version),
            key,
            history=True,
        )

    async def versioning(self) -> Versioning:
        answer = await self._call(lambda client: client.get_bucket_versioning(Bucket=self.bucket), "", history=True)
        status = answer.get("Status")
        return "enabled" if status == "Enabled" else "suspended" if status == "Suspended" else "off"

    async def get_version(self, key: str, version: str) -> bytes | None:
        return await self._read(
            lambda client: client.get_object(Bucket=self.bucket, Key=self.prefix + key, VersionId=version),
            key,
            history=True,
        )

    async def now(self, *, ageing: bool = False) -> float:
        return self.clock.now()

    async def client(self) -> Any:
        """The client for the running event loop: the caller's, or the store's own for this loop."""
        loop = asyncio.get_running_loop()
        if self._given is not None:
            if self._given_loop is None:
                self._given_loop = weakref.ref(loop)
            elif self._given_loop() is not loop:
                raise MemoryStoreError(
                    "unavailable",
                    f"The S3 client given to the store of {self.location} belongs to another event loop. "
                    "Make the store without a client (it makes one per loop), or keep one loop (asyncio.Runner).",
                )
            return self._given
        held = self._clients.get(loop)
        if held is None:
            held = self._clients[loop] = shared_client(loop)
        return await held.client(self.location)

    async def aclose(self) -> None:
        """Let go of the shared client for the running loop: the last store to let go closes it
        (loops that ended closed theirs)."""
        held = self._clients.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held.release()

    async def _read(self, request: _Request, key: str, *, history: bool = False) -> bytes | None:
        """The body a GetObject request answers, or None for a missing key."""
        try:
            response = await self._call(request, key, history=history, absent_ok=True)
        except Missing:
            return None
        data: bytes = await self._guarded(lambda _: _body(response), key)  # a stream can fail too
        return data

    async def _call(self, request: _Request, key: str, *, history: bool = False, absent_ok: bool = False) -> Any:
        """One request through the error boundary, its reply's Date kept as the server's clock. A 404
        raises `Missing` where the caller asked (`absent_ok`), else it means a wrong endpoint."""
        try:
            response = await self._guarded(request, key, history=history)
        except Missing:
            if absent_ok:
                raise
            raise wrong_endpoint(self.location, key) from None
        self.clock.note(response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date"))
        return response

    async def _guarded(self, request: _Request, key: str, *, history: bool = False) -> Any:
        """The error boundary (`botocore_failure`): every failure becomes `TransientError`, a
        `MemoryStoreError`, or one of the answers `Missing` and `Exists`."""
        client = await self.client()
        try:
            # The whole request, body included: the SDK's timeouts bound each socket read only, so
            # an endpoint that drips a byte at a time would hold the request for ever.
            async with asyncio.timeout(self.request_timeout):
                return await request(client)
        except Exception as error:
            raise botocore_failure(error, self.location, key, history) from None


def _condition(mode: Create | IfMatch | Overwrite, location: str) -> dict[str, str]:
    """The PutObject headers of `mode`."""
    match mode:
        case Create():
            return {"IfNoneMatch": "*"}
        case IfMatch(tag):
            return {"IfMatch": tag}
        case Overwrite():
            return {}
        case _:  # a mode its type leaves out (`IfHolds`): a caller's bug, never a write
            raise TypeError(f"{location} does not keep {mode}")


def _check_deleted(response: Any, prefix: str, location: str, *, history: bool = False) -> None:
    """Raise what the first key a DeleteObjects reply lists as not deleted means (the reply is a 200
    whatever it refused)."""
    if errors := response.get("Errors"):
        first = errors[0]
        key = first.get("Key", "").removeprefix(prefix)  # the bucket's key: the location names the prefix
        raise s3_error(first.get("Code", ""), 0, f"{location}/{key}", first.get("Message"), history)


async def _body(response: Any) -> bytes:
    async with response["Body"] as body:
        data: bytes = await body.read()
    return data


async def _checksum(data: bytes) -> dict[str, str]:
    """The upload's CRC32, which the SDK would otherwise compute on the event loop (16 ms for a 32 MiB
    checkpoint), computed in a worker thread when the body is large."""
    crc = await off_loop(len(data), functools.partial(zlib.crc32, data))
    return {"ChecksumCRC32": base64.b64encode(crc.to_bytes(4, "big")).decode()}
