"""The object layer on S3 through obstore (Rust's `object_store`): the `fast` extra."""

from __future__ import annotations

import asyncio
import builtins
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from a13n_harness.providers.memory import MemoryStoreError

from ..runtime.deadline import check_seconds
from .credentials import no_aws_credentials
from .interface import CREATE, AlreadyExists, Create, ObjectInfo, TransientError
from .s3_errors import Exists, Missing, S3Reply, s3_client_error, s3_error, wrong_endpoint
from .urls import check_prefix

if TYPE_CHECKING:
    from obstore.store import S3Credential, S3Store

_LISTED_TIME_RESOLUTION = 1.0
# Credentials without an expiry of their own are asked for again this often (obstore asks again once
# fewer than 5 minutes are left); botocore refreshes expiring ones itself.
_CREDENTIALS_TTL = timedelta(minutes=15)
_RESTAMP_SECONDS = 600.0
_STATUS = re.compile(r"status code: (\d{3})")
# An error reply's body ("<Code>AccessDenied</Code>"), or a DeleteObjects key's error ("(code: AccessDenied)").
_CODE = re.compile(r"<Code>([A-Za-z0-9]{1,64})</Code>|\(code: ([A-Za-z0-9]{1,64})\)")


class ObstoreS3ObjectStore:
    """The objects under `s3://bucket/prefix/` through obstore, for the log's own requests.

    `put` keeps `Create` only: obstore's create mode (`PutObject` with `If-None-Match: *`). obstore makes
    one attempt per request, since the log retries and settles ambiguous creates itself; its
    errors carry only a message, so the status and S3 error code are read from it and mapped as
    for aiobotocore. Of old versions it only tells whether there are any (`has_past`, through
    botocore); recovery and erasure use `S3ObjectStore`.
    """

    def __init__(self, *, bucket: str, prefix: str = "", request_timeout: float = 30.0) -> None:
        check_prefix(prefix.strip("/"), f"s3://{bucket}")
        self.request_timeout = check_seconds("request_timeout", request_timeout)
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.ordered_listing = not bucket.endswith("--x-s3")
        self.clock = CreateClock()
        self._store: S3Store | None = None
        self._history: Any = None

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    async def get(self, key: str) -> bytes | None:
        import obstore

        async def read(store: S3Store) -> bytes:
            found = await obstore.get_async(store, key)
            return bytes(await found.bytes_async())

        try:
            return await self._guarded(read, key, absent_ok=True)
        except Missing:
            return None

    async def put(self, key: str, data: bytes, mode: Create) -> None:
        import obstore

        if not isinstance(mode, Create):  # a mode its type leaves out: a caller's bug, never a write
            raise TypeError(f"{self.location} does not keep {mode}")
        try:
            await self._guarded(lambda store: obstore.put_async(store, key, data, mode="create"), key)
        except Exists:
            raise AlreadyExists(self.location, key, "the key holds an object (412)") from None
        self.clock.created(key, time.time())

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        import obstore

        # obstore lists by whole path segments: a prefix that ends mid-name lists its folder, filtered.
        folder = prefix if not prefix or prefix.endswith("/") else prefix.rpartition("/")[0]
        offset = start_after if self.ordered_listing else None

        async def listing(store: S3Store) -> builtins.list[ObjectInfo]:
            found: builtins.list[ObjectInfo] = []
            async for chunk in obstore.list(store, folder or None, offset=offset):
                # Listings give LastModified in whole seconds: ageing an object from the end of its
                # second keeps compaction on the safe side of the grace period.
                found.extend(
                    ObjectInfo(item["path"], item["last_modified"].timestamp() + _LISTED_TIME_RESOLUTION)
                    for item in chunk
                    if item["path"].startswith(prefix)
                )
                if limit is not None and self.ordered_listing and len(found) >= limit:
                    break  # in key order: the pages after it are never requested
            return found

        found = await self._guarded(listing, prefix)
        if self.ordered_listing:
            return found[:limit]
        return sorted((info for info in found if start_after is None or info.key > start_after), key=lambda i: i.key)[
            :limit
        ]

    async def delete(self, keys: Sequence[str]) -> None:
        import obstore

        if keys:
            await self._guarded(lambda store: obstore.delete_async(store, builtins.list(keys)), keys[0])

    async def now(self, *, ageing: bool = False) -> float:
        return await self.clock.now(self, ageing=ageing)

    async def has_past(self, prefix: str) -> bool:
        """Whether any version or delete marker is stored under `prefix`: asked only when a cold
        open finds no log, to tell a wiped memory from a new one. obstore cannot list versions, so
        this one request goes through botocore (made then, in a worker thread)."""
        key = f"{self.prefix}/{prefix}" if self.prefix else prefix

        from botocore.exceptions import BotoCoreError, ClientError

        try:
            # Making the client is CPU (botocore parses its models), not a request: a busy machine
            # can take longer over it than a request may, so only the request is bounded by its timeout.
            if self._history is None:
                self._history = await asyncio.to_thread(self._botocore)
            client = self._history

            def probe() -> bool:
                page = client.list_object_versions(Bucket=self.bucket, Prefix=key, MaxKeys=1)
                return bool(page.get("Versions") or page.get("DeleteMarkers"))

            async with asyncio.timeout(self.request_timeout):
                return await asyncio.to_thread(probe)
        except ClientError as error:
            reply = S3Reply.of(error)
            where = f"{self.location}/{prefix}"
            raise s3_error(reply.code, reply.status, where, reply.message, history=True) from None
        except (BotoCoreError, TimeoutError) as error:
            raise TransientError(f"listing versions under {self.location}/{prefix}: {error}") from None
        except Exception as error:  # whatever nobody mapped may pass
            raise TransientError(f"{type(error).__name__} listing versions under {self.location}/{prefix}") from None

    def _botocore(self) -> Any:
        """A plain botocore S3 client for the one request obstore cannot send. Two first probes at
        once may both make one; either serves."""
        import botocore.session
        from botocore.config import Config

        return botocore.session.get_session().create_client(
            "s3",
            config=Config(connect_timeout=5, read_timeout=self.request_timeout, retries={"total_max_attempts": 1}),
        )

    async def aclose(self) -> None:
        """Nothing to close: obstore's client is bound to no event loop, and its connections close
        with it when the store is collected."""

    async def last_modified(self, key: str) -> float | None:
        """When the server last wrote `key`, in whole seconds, or None when it is gone."""
        import obstore

        try:
            meta = await self._guarded(lambda store: obstore.head_async(store, key), key, absent_ok=True)
        except Missing:
            return None
        modified: datetime = meta["last_modified"]
        return modified.timestamp()

    async def _guarded[T](self, request: Callable[[S3Store], Awaitable[T]], key: str, *, absent_ok: bool = False) -> T:
        """The error boundary: every failure becomes `TransientError`, a `MemoryStoreError`, or one
        of the private answers "missing" (where the caller asked: `absent_ok`) and "exists"."""
        try:
            store = await self._client()
            # The whole request, body included, within the store's deadline (obstore's own timeout
            # bounds it too; this one also covers the wait for its runtime).
            async with asyncio.timeout(self.request_timeout):
                return await request(store)
        except Exception as error:
            mapped = _mapped(error, f"{self.location}/{key}")
        if isinstance(mapped, Missing) and not absent_ok:
            raise wrong_endpoint(self.location, key)
        raise mapped

    async def _client(self) -> S3Store:
        if self._store is None:
            # botocore reads its config files and the chain's environment: in a thread, not on the
            # loop. Two first requests at once may both make one; either serves.
            self._store = await asyncio.to_thread(self._make_client)
        return self._store

    def _make_client(self) -> S3Store:
        import botocore.session
        from botocore.exceptions import BotoCoreError, ProfileNotFound
        from obstore.store import S3Store

        try:
            session = botocore.session.get_session()
            credentials = session.get_credentials()
            region = session.get_config_variable("region") or "us-east-1"
            endpoint = _endpoint(session)
        except (ProfileNotFound, BotoCoreError) as error:
            raise s3_client_error(error, self.location) from None
        if credentials is None:
            raise no_aws_credentials(self.location)
        config: dict[str, Any] = {"region": region}
        if endpoint:
            config["endpoint"] = endpoint
        if not self.ordered_listing:
            config["s3_express"] = True
        seconds = f"{self.request_timeout}s"
        return S3Store(
            self.bucket,
            prefix=self.prefix or None,
            config=config,  # type: ignore[arg-type]
            client_options={"timeout": seconds, "connect_timeout": "5s", "allow_http": bool(endpoint)},
            retry_config={"max_retries": 0, "retry_timeout": timedelta(seconds=self.request_timeout)},
            credential_provider=_ChainCredentials(credentials),
        )


def _endpoint(session: Any) -> str | None:
    """The endpoint aws-cli would use for S3: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, then the
    profile's endpoint_url, unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is set."""
    if os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").lower() == "true":
        return None
    found: str | None = (
        os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
        or session.get_scoped_config().get("endpoint_url")
    )
    return found


class CreateClock:
    """The server's clock for a client that sees no `Date` header: the local clock, offset by how
    the server stamped an object this store created (one HEAD after its first create, and again
    after ten minutes of creates).

    A stamp has whole seconds and the write happened before its reply, so the offset taken is the
    smallest consistent with both, and a small positive one is taken as none: the clock never runs
    ahead of the server's, and compaction ages objects on the safe side. Asked for `ageing` before
    anything is stamped, it stamps an object of its own; otherwise it is the local clock until the
    first stamp, as a client that has had no reply yet has.
    """

    def __init__(self) -> None:
        self.offset = 0.0
        self._stamped_at: float | None = None  # time.monotonic() of the last stamp
        self._pending: tuple[str, float] | None = None  # a created key, and when its reply came

    def created(self, key: str, answered: float) -> None:
        """Note that `key` was created, its reply seen at local time `answered`."""
        if self._stamped_at is None or time.monotonic() - self._stamped_at > _RESTAMP_SECONDS:
            self._pending = (key, answered)

    async def now(self, objects: ObstoreS3ObjectStore, *, ageing: bool) -> float:
        await self._stamp(objects)
        if ageing and self._stamped_at is None:
            key = f"doctor/clock-{secrets.token_hex(8)}.json"
            try:
                await objects.put(key, b"{}", CREATE)  # noted by `created`
                await self._stamp(objects)
            finally:
                await objects.delete([key])
            if self._stamped_at is None:
                raise TransientError(f"{objects.location} did not say when it stamped {key}")
        return time.time() + self.offset

    async def _stamp(self, objects: ObstoreS3ObjectStore) -> None:
        """Set the offset from the pending created key's stamp. A failed HEAD waits for the next
        create, so a store whose HEADs fail sends one per create, not one per call."""
        if self._pending is None:
            return
        key, answered = self._pending
        self._pending = None
        try:
            modified = await objects.last_modified(key)
        except (MemoryStoreError, TransientError):
            return
        if modified is None:
            return  # deleted meanwhile
        offset = modified - answered
        self.offset = offset if offset > 2.0 else min(offset, 0.0)
        self._stamped_at = time.monotonic()


class _ChainCredentials:
    """obstore's credential provider over botocore's standard chain (environment, profile, SSO,
    container and instance roles), so both S3 layers find the same credentials."""

    def __init__(self, credentials: Any) -> None:
        self._credentials = credentials

    def __call__(self) -> S3Credential:
        frozen = self._credentials.get_frozen_credentials()
        # Static keys never expire; refreshable ones are asked for again before botocore's expiry.
        expiry: datetime | None = getattr(self._credentials, "_expiry_time", None)
        if expiry is None and hasattr(self._credentials, "refresh_needed"):
            expiry = datetime.now(UTC) + _CREDENTIALS_TTL
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expiry,
        }


def _mapped(error: Exception, where: str) -> Exception:
    """What an obstore failure means. Its exceptions carry the reply's status and body only in the
    message, so those are read from it: a 409 (a concurrent conditional write) raised as "already
    exists" is transient, and a missing bucket raised as "not found" is not a missing key."""
    from obstore.exceptions import (
        AlreadyExistsError,
        InvalidPathError,
        NotFoundError,
        PermissionDeniedError,
        PreconditionError,
        UnauthenticatedError,
    )

    if isinstance(error, MemoryStoreError | TransientError):
        return error
    if isinstance(error, TimeoutError):
        return TransientError(f"no answer within the request timeout from {where}")
    text = str(error)
    status = int(found[1]) if (found := _STATUS.search(text)) else 0
    code = (found[1] or found[2]) if (found := _CODE.search(text)) else ""
    # obstore raises a 404 as the built-in FileNotFoundError.
    if isinstance(error, NotFoundError | FileNotFoundError) and code != "NoSuchBucket":
        return Missing()
    if isinstance(error, AlreadyExistsError | PreconditionError) and status == 412:
        return Exists()
    if status or code:
        return s3_error(code, status, where, code or f"HTTP {status}")
    if isinstance(error, UnauthenticatedError | PermissionDeniedError):
        # The credential chain failed (an expired SSO login, a role that cannot be assumed).
        return MemoryStoreError(
            "forbidden", f"No usable AWS credentials for {where}: {text.partition(chr(10))[0][:300]}"
        )
    if isinstance(error, InvalidPathError):
        return MemoryStoreError(
            "unavailable",
            f"A key under {where} has an empty or '.' segment, which obstore cannot list: remove that object "
            "(the memory never writes one), or open the memory with the default S3 layer.",
        )
    if "redirect" in text.lower():
        return MemoryStoreError(
            "unavailable",
            f"S3 redirected a request for {where}: the bucket is in another region. Set AWS_REGION to the "
            "bucket's region.",
        )
    # A request that never got a reply: refused, reset or timed out connections.
    return TransientError(f"{type(error).__name__} for {where}: {text.partition(chr(10))[0][:300]}")
