"""The object layer on Google Cloud Storage through a google-cloud-storage client."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import hashlib
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import requests
from a13n_harness.providers.memory import MemoryStoreError
from google.api_core import exceptions as api
from google.auth.exceptions import DefaultCredentialsError, RefreshError
from google.cloud import storage

from ..runtime.deadline import check_seconds
from .bulk import RolledPage
from .gcs_http import AbortableCall, make_abortable
from .interface import (
    AlreadyExists,
    Create,
    IfMatch,
    ObjectInfo,
    ObjectVersion,
    Overwrite,
    PreconditionFailed,
    Refused,
    TransientError,
    Versioning,
)
from .retry import FETCH_CONCURRENCY, gather_bounded
from .server_clock import ServerClock
from .urls import check_prefix

# The client's bucket-metadata cache fires a bucket GET in the background on first use and after
# every 404, which is what a fresh probe returns. The maintainers' opt-out is this variable.
BUCKET_METADATA_OPT_OUT = "DISABLE_GCS_PYTHON_CLIENT_OTEL_BUCKET_METADATA"
_TIMEOUT = (5.0, 20.0)
# The client blocks, so requests run in threads: enough for the log's concurrent fetches and deletes,
# shared by every store of the process (the default executor has as few as 5 on a small machine).
_WORKERS = ThreadPoolExecutor(max_workers=FETCH_CONCURRENCY, thread_name_prefix="bucket-memory-gcs")


class GCSObjectStore:
    """The objects under `gs://bucket/prefix/`: `put` is one upload, `Create` with
    `if_generation_match=0`, `IfMatch` with the generation, `Overwrite` with neither.

    The caller owns the client; its blocking calls run in worker threads, with the SDK's own
    retries off because the log retries (and settles ambiguous creates) itself. Each request,
    reply body included, ends within `request_timeout`: past it the request's sockets are shut
    down, so its thread is freed too. A 412 is reported as the mode's `Refused`; 409, 429, 5xx,
    lost connections and requests past their deadline as `TransientError`.
    """

    ordered_listing = True

    def __init__(self, client: storage.Client, *, bucket: str, prefix: str = "", request_timeout: float = 30.0) -> None:
        check_prefix(prefix.strip("/"), f"gs://{bucket}")
        os.environ.setdefault(BUCKET_METADATA_OPT_OUT, "true")
        self.clock = _clock_of(client)
        self.request_timeout = check_seconds("request_timeout", request_timeout)
        self.client = client
        self.bucket = client.bucket(bucket)
        self.prefix = f"{prefix.strip('/')}/" if prefix.strip("/") else ""

    @property
    def location(self) -> str:
        return f"gs://{self.bucket.name}/{self.prefix.rstrip('/')}".rstrip("/")

    async def get(self, key: str) -> bytes | None:
        return await self._run(self._get, key)

    async def put(self, key: str, data: bytes, mode: Create | IfMatch | Overwrite) -> None:
        match mode:
            case Create():
                generation: int | None = 0
            case IfMatch(tag):
                generation = int(tag)
            case Overwrite():
                generation = None
            case _:  # a mode its type leaves out (`IfHolds`): a caller's bug, never a write
                raise TypeError(f"{self.location} does not keep {mode}")
        await self._run(self._put, key, data, generation)

    async def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> builtins.list[ObjectInfo]:
        return await self._run(self._list, prefix, start_after, limit)

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        return await self._run(self._list_rolled, prefix, delimiter, token)

    async def delete(self, keys: Sequence[str]) -> None:
        await gather_bounded(keys, lambda key: self._run(self._delete, key))

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        """Every generation under the prefix, live or noncurrent (the bucket needs versioning on)."""
        return await self._run(self._list_versions, prefix)

    async def get_version(self, key: str, version: str) -> bytes | None:
        return await self._run(self._get, key, int(version))

    async def has_past(self, prefix: str) -> bool:
        return await self._run(self._has_past, prefix)

    async def delete_version(self, key: str, version: str) -> None:
        await self._run(self._delete, key, int(version))

    async def versioning(self) -> Versioning:
        return await self._run(self._versioning)

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        """Every generation under the prefix, live or noncurrent (GCS keeps no delete markers)."""
        return await self._run(self._list_versions, prefix)

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        await gather_bounded(versions, lambda version: self._run(self._delete, version.key, int(version.version)))

    async def now(self, *, ageing: bool = False) -> float:
        return self.clock.now()

    def _get(self, key: str, generation: int | None = None) -> bytes | None:
        try:
            blob = self.bucket.blob(self.prefix + key, generation=generation)
            data: bytes = blob.download_as_bytes(timeout=_TIMEOUT, retry=None)
        except api.NotFound:
            return None
        return data

    def _list(self, prefix: str, start_after: str | None, limit: int | None) -> builtins.list[ObjectInfo]:
        # GCS has an inclusive start offset, not start-after: skip the one key equal to it.
        offset = self.prefix + start_after if start_after is not None else None
        found: builtins.list[ObjectInfo] = []
        most = None if limit is None else limit + (offset is not None)
        for blob in self.client.list_blobs(
            self.bucket,
            prefix=self.prefix + prefix,
            start_offset=offset,
            max_results=most,
            timeout=_TIMEOUT,
            retry=None,
        ):
            if blob.name != offset:
                found.append(
                    ObjectInfo(blob.name[len(self.prefix) :], blob.updated.timestamp() if blob.updated else 0.0)
                )
        return sorted(found, key=lambda info: info.key)[:limit]

    def _list_rolled(self, prefix: str, delimiter: str, token: str | None) -> RolledPage:
        listing = self.client.list_blobs(
            self.bucket,
            prefix=self.prefix + prefix,
            delimiter=delimiter,
            page_token=token,
            max_results=1000,
            timeout=_TIMEOUT,
            retry=None,
        )
        page = next(listing.pages)  # one request
        keys = [blob.name[len(self.prefix) :] for blob in page]
        return RolledPage(keys, sorted(name[len(self.prefix) :] for name in page.prefixes), listing.next_page_token)

    def _list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        # The JSON API's own spelling: the client would send "True", which fake-gcs-server ignores.
        blobs = self.client.list_blobs(
            self.bucket, prefix=self.prefix + prefix, versions="true", timeout=_TIMEOUT, retry=None
        )
        found = [
            ObjectVersion(
                blob.name[len(self.prefix) :],
                str(blob.generation),
                blob.time_created.timestamp(),
                str(blob.generation),
                blob.time_deleted is None,  # a noncurrent generation has the time it stopped being live
                size=blob.size or 0,
            )
            for blob in blobs
        ]
        return sorted(found, key=lambda version: (version.key, int(version.version)))  # generations rise

    def _has_past(self, prefix: str) -> bool:
        blobs = self.client.list_blobs(
            self.bucket, prefix=self.prefix + prefix, versions="true", max_results=1, timeout=_TIMEOUT, retry=None
        )
        return any(True for _ in blobs)

    def _put(self, key: str, data: bytes, generation: int | None) -> None:
        try:
            self.bucket.blob(self.prefix + key).upload_from_string(
                data, content_type="application/json", if_generation_match=generation, timeout=_TIMEOUT, retry=None
            )
        except api.PreconditionFailed:
            if generation == 0:
                raise AlreadyExists(self.location, key, "the key holds an object (412)") from None
            raise PreconditionFailed(self.location, key, "the key holds another generation, or none (412)") from None

    def _versioning(self) -> Versioning:
        self.bucket.reload(timeout=_TIMEOUT, retry=None)
        return "enabled" if self.bucket.versioning_enabled else "off"

    def _delete(self, key: str, generation: int | None = None) -> None:
        with contextlib.suppress(api.NotFound):
            self.bucket.blob(self.prefix + key, generation=generation).delete(timeout=_TIMEOUT, retry=None)

    async def _run[**P, T](self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """One blocking call in a worker thread, through the error boundary, cut off at its deadline."""
        request = AbortableCall()
        try:
            async with asyncio.timeout(self.request_timeout):
                running = asyncio.get_running_loop().run_in_executor(
                    _WORKERS, request.run, functools.partial(call, *args, **kwargs)
                )
                try:
                    return await running
                except asyncio.CancelledError:  # the deadline, or the caller's own: free the thread
                    request.abort()
                    raise
        except TimeoutError:
            raise TransientError(f"no reply from {self.location} within {self.request_timeout:g} s") from None
        except Refused:
            raise
        except api.NotFound as error:
            raise MemoryStoreError(
                "unavailable",
                f"The bucket {self.bucket.name} does not exist ({error.message}): create it or fix the URL.",
            ) from None
        except (api.Forbidden, api.Unauthorized, DefaultCredentialsError, RefreshError) as error:
            raise MemoryStoreError(
                "forbidden",
                f"Access to {self.location} was denied ({_message(error)}). The store needs storage.objects.get, "
                "create, delete and list on the prefix; credentials come from the standard chain "
                "(GOOGLE_APPLICATION_CREDENTIALS, gcloud, the metadata server).",
            ) from None
        except (
            api.TooManyRequests,
            api.Conflict,
            api.ServerError,
            requests.ConnectionError,
            requests.Timeout,
        ) as error:
            raise TransientError(f"{type(error).__name__}: {_message(error)}") from None
        except api.GoogleAPICallError as error:
            if error.code == 408:  # Request Timeout: Google's retry guidance lists it with 429 and 5xx
                raise TransientError(_message(error)) from None
            raise MemoryStoreError(
                "unavailable", f"GCS refused a request for {self.location}: {error.message}"
            ) from None
        except Exception as error:  # transport, auth refresh, resumable-media: whatever nobody mapped may pass
            raise TransientError(f"{type(error).__name__}: {error}") from None


_CLOCKS: weakref.WeakKeyDictionary[storage.Client, ServerClock] = weakref.WeakKeyDictionary()
_CLOCKS_LOCK = threading.Lock()


def _clock_of(client: storage.Client) -> ServerClock:
    """The server's clock as the replies to `client` keep it, shared by every store on the client:
    compaction's safety argument is in server time, and every reply's Date header keeps the clock.
    One hook per client, not per store: a hook per store made each reply call every store's, and
    kept every store ever opened on a shared client alive."""
    with _CLOCKS_LOCK:
        clock = _CLOCKS.get(client)
        if clock is None:
            clock = _CLOCKS[client] = ServerClock()
            http = getattr(client, "_http", None)
            if isinstance(http, requests.Session):
                noted = clock  # the hook holds the clock, never the client or a store

                def note_date(response: requests.Response, *args: object, **kwargs: object) -> None:
                    noted.note(response.headers.get("date"))

                http.hooks.setdefault("response", []).append(note_date)
                make_abortable(http, pool_size=FETCH_CONCURRENCY)
        return clock


class SharedClients:
    """The process's google-cloud-storage clients, one per credentials (the GOOGLE_*, CLOUDSDK_*
    and STORAGE_EMULATOR_HOST variables), each held by the stores using it and closed when the last
    lets go. A client is not bound to an event loop: its calls run in worker threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, tuple[storage.Client, int]] = {}

    def acquire(self, make: Callable[[], storage.Client]) -> storage.Client:
        """The shared client for the environment's credentials (made by `make` when there is none), held once more."""
        settings = sorted(
            (name, value)
            for name, value in os.environ.items()
            if name.startswith(("GOOGLE_", "CLOUDSDK_")) or name == "STORAGE_EMULATOR_HOST"
        )
        key = hashlib.sha256(repr(settings).encode()).hexdigest()
        with self._lock:
            client, users = self._held.get(key) or (None, 0)
            if client is None:
                client = make()
            self._held[key] = (client, users + 1)
            return client

    def release(self, client: storage.Client) -> None:
        """Let go of `client`; the last holder closes it."""
        with self._lock:
            key = next((key for key, (held, _) in self._held.items() if held is client), None)
            if key is None:
                return
            users = self._held[key][1] - 1
            if users > 0:
                self._held[key] = (client, users)
                return
            del self._held[key]
        client.close()


SHARED = SharedClients()


def _message(error: Exception) -> str:
    """The server's own words, without the SDK's request dump."""
    if isinstance(error, api.GoogleAPICallError):
        details = [item.get("message") for item in error.errors or () if isinstance(item, dict)]
        reason = next((detail for detail in details if detail), None) or error.message.split(":", 1)[0]
        return f"HTTP {error.code}: {reason}"
    return str(error)
