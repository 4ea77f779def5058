"""`open_store(url)`: a store on the backend a URL names, with its cloud client made and closed."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import re
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin

from .files.store import DEFAULT_MAX_BYTES, LogFileStore
from .format.tombstone import PROOF_KEY
from .log.options import LogOptions
from .objects.bulk import RollingObjectStore
from .objects.credentials import no_google_credentials
from .objects.interface import CREATE, AlreadyExists, ObjectStore
from .objects.retry import retrying
from .objects.urls import parse_url
from .records.analyzer import DEFAULT_LANGUAGE
from .records.embedding import DEFAULT_BATCH, embedder_named
from .records.ranking import Ranking
from .records.store import RECORD_CHARS, LogRecordStore
from .runtime.installing import install_hint

if TYPE_CHECKING:
    from pydantic_ai import Embedder

    from .objects.gcs import SharedClients
    from .objects.s3 import S3ObjectStore
    from .objects.s3_obstore import ObstoreS3ObjectStore

logger = logging.getLogger(__name__)


@asynccontextmanager
async def open_store(
    url: str | os.PathLike[str],
    *,
    format: FileFormat | None = None,
    options: LogOptions | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    read_only: bool = False,
    check_endpoint: bool = False,
    s3_layer: Literal["aiobotocore", "obstore"] = "aiobotocore",
) -> AsyncIterator[LogFileStore]:
    """The memory at `s3://bucket/prefix`, `gs://bucket/prefix`, `file:///abs/path` or a plain path.

    Cloud clients come from the standard credential chains and honour `AWS_ENDPOINT_URL` and
    `STORAGE_EMULATOR_HOST`; every store open at once shares one per credentials (and, on S3, per
    event loop), closed when the last of them exits, after the housekeeping its writes started
    (`StorePool` keeps many open within bounds). Opening sends no request; a `read_only` store refuses changes
    before any. `check_endpoint` first checks that the endpoint refuses a second create of one key
    (`check_create_only`, as `bucket-memory init` and `doctor` do). `s3_layer="obstore"` reaches S3
    through the `fast` extra, with less client CPU per request (`ObstoreS3ObjectStore`).
    """
    settings: dict[str, Any] = {"format": format, "options": options, "max_bytes": max_bytes, "read_only": read_only}
    where = parse_url(url)
    if where.scheme == "s3":
        objects = _s3_objects(where.bucket, where.prefix, s3_layer)
        try:
            store = LogFileStore(objects, **settings)
            if check_endpoint:
                await check_create_only(objects)
            yield store
            await store.settle()
        finally:
            await objects.aclose()
    elif where.scheme == "gs":
        client, shared = _gcs_client()
        try:
            store = LogFileStore.gcs(client, bucket=where.bucket, prefix=where.prefix, **settings)
            if check_endpoint:
                await check_create_only(store.objects)
            yield store
            await store.settle()
        finally:
            shared.release(client)
    else:
        assert where.path is not None
        store = LogFileStore.local(where.path, **settings)
        yield store
        await store.settle()


@asynccontextmanager
async def open_record_store(
    url: str | os.PathLike[str],
    *,
    embedder: Embedder | str | None = None,
    record_chars: int = RECORD_CHARS,
    origin: Origin | None = None,
    options: LogOptions | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    read_only: bool = False,
    embed_batch: int = DEFAULT_BATCH,
    ranking: Ranking = "hybrid",
    language: str | None = DEFAULT_LANGUAGE,
) -> AsyncIterator[LogRecordStore]:
    """The record memory at a URL of the forms `open_store` takes, its records' vectors made by
    `embedder` when given (an `Embedder`, or a name: "local" for the in-process model of the
    `local-embeddings` extra, or "provider:model"; `embed_batch` texts per call; ranked by BM25
    without one), ranked as `ranking` says with words stemmed for `language` (`LogRecordStore`),
    its changes attributed to `origin`."""
    made = embedder_named(embedder) if isinstance(embedder, str) else embedder
    async with open_store(url, options=options, max_bytes=max_bytes, read_only=read_only) as files:
        yield LogRecordStore(
            files,
            embedder=made,
            record_chars=record_chars,
            origin=origin,
            embed_batch=embed_batch,
            ranking=ranking,
            language=language,
        )


async def check_create_only(objects: ObjectStore) -> None:
    """Refuse an endpoint that does not enforce create-only writes, by creating one key twice.

    Some endpoints and emulators silently ignore conditional headers; on them two writers could
    both commit the same seq and one would vanish, so the store must not run there at all. Each
    create carries its own nonce and the key is read back, so a retried create whose first reply
    was lost (or a transport that sends it twice) is not taken for the endpoint's fault.
    """
    key = f"doctor/{secrets.token_hex(8)}.json"
    what = f"Checking {objects.location}"
    first, second = (json.dumps({"nonce": secrets.token_hex(8)}).encode() for _ in range(2))
    try:
        # Refusals are expected (the second put's is the point); what the key holds decides.
        with contextlib.suppress(AlreadyExists):
            await retrying(lambda: objects.put(key, first, CREATE), what=what)
        with contextlib.suppress(AlreadyExists):
            await retrying(lambda: objects.put(key, second, CREATE), what=what)
        held = await retrying(lambda: objects.get(key), what=what)
    finally:
        try:
            await retrying(lambda: objects.delete([key]), what=f"Cleaning up {objects.location}/{key}")
        except MemoryStoreError as error:
            logger.warning("could not delete %s/%s: %s", objects.location, key, error)
    if held != first:
        raise MemoryStoreError(
            "unavailable",
            f"{objects.location} does not enforce create-only writes: a second create of {key} was not refused. "
            "Concurrent writers would overwrite each other's commits there, so bucket-memory refuses to use it. "
            "Use an endpoint that honours If-None-Match: * (S3) or ifGenerationMatch=0 (GCS).",
        )


def _s3_objects(bucket: str, prefix: str, layer: str) -> S3ObjectStore | ObstoreS3ObjectStore:
    """The object layer `layer` names for `s3://bucket/prefix`, or the extra to install for it."""
    if layer == "obstore":
        try:
            from .objects.s3_obstore import ObstoreS3ObjectStore
        except ImportError:
            raise MemoryStoreError(
                "unavailable", f"s3_layer='obstore' needs obstore: {install_hint('fast')}."
            ) from None
        return ObstoreS3ObjectStore(bucket=bucket, prefix=prefix)
    if layer != "aiobotocore":
        raise MemoryStoreError("unavailable", f"Unknown S3 layer {layer!r}: use 'aiobotocore' or 'obstore'.")
    try:
        from .objects.s3 import S3ObjectStore
    except ImportError:
        raise MemoryStoreError("unavailable", f"s3:// needs aiobotocore: {install_hint('s3')}.") from None
    return S3ObjectStore(bucket=bucket, prefix=prefix)


def _gcs_client() -> tuple[Any, SharedClients]:
    """The process's shared client for the environment's credentials, held once more, and the
    registry to let go of it through."""
    try:
        from google.auth.exceptions import DefaultCredentialsError
        from google.cloud import storage

        from .objects.gcs import SHARED
    except ImportError:
        raise MemoryStoreError("unavailable", f"gs:// needs google-cloud-storage: {install_hint('gcs')}.") from None

    def made() -> Any:
        try:
            return storage.Client()
        except DefaultCredentialsError as error:
            raise no_google_credentials("Google Cloud Storage", error) from None

    return SHARED.acquire(made), SHARED


async def find_memories(url: str | os.PathLike[str], *, destroyed: bool = False) -> list[str]:
    """The URLs of the memories under a bucket, a prefix or a directory: each place that holds a log,
    and, with `destroyed`, those a `bucket-memory destroy` has begun on (its proof stored).

    On S3 and GCS one listing rolled up at each memory's log (`memory_prefixes`), not of every object.
    """
    where = parse_url(url)
    if where.scheme == "file":
        assert where.path is not None
        found = await asyncio.to_thread(_local_memories, Path(where.path), destroyed)
        return sorted(str(folder) for folder in found)
    base = f"{where.scheme}://{where.bucket}"
    async with open_store(url, read_only=True) as store:
        prefixes = await memory_prefixes(store.objects, attempts=store.options.request_attempts, destroyed=destroyed)
    return sorted(
        f"{base}/{'/'.join(part for part in (where.prefix, prefix) if part)}".rstrip("/") for prefix in prefixes
    )


async def memory_prefixes(objects: ObjectStore, *, attempts: int = 6, destroyed: bool = True) -> list[str]:
    """The prefixes, relative to `objects`' own ("" for the memory there), of the memories under it;
    without `destroyed`, less those whose destroy's proof (`format/tombstone.PROOF_KEY`) is stored.

    A listing rolled up at "log/" names each memory's log folder once, however long its log, so it
    costs one request per 1000 memories plus the objects memories keep beside their logs
    (checkpoints, intents, erasure records, the proof of a destroy: so it costs nothing more). A
    folder whose name ends in "log" (blog/) rolls up too and is listed again past it. A store that
    cannot roll up lists every object.
    """
    if not isinstance(objects, RollingObjectStore):
        listed = await retrying(lambda: objects.list(""), what=f"Listing {objects.location}", attempts=attempts)
        return _living(set(), {info.key for info in listed}, destroyed)
    rolled_up: set[str] = set()
    keys: set[str] = set()
    folders = [""]
    while folders:
        folder, token = folders.pop(), None
        while True:
            page = await retrying(
                functools.partial(objects.list_rolled, folder, "log/", token=token),
                what=f"Listing {objects.location}/{folder}",
                attempts=attempts,
            )
            for rolled in page.prefixes:
                if rolled == "log/" or rolled.endswith("/log/"):
                    rolled_up.add(rolled.removesuffix("log/").rstrip("/"))
                else:
                    folders.append(rolled)
            keys.update(page.keys)
            if (token := page.token) is None:
                break
    return _living(rolled_up, keys, destroyed)


_MEMORY_KEY = re.compile(r"(?:(.*)/)?(?:log|checkpoints)/\d{20}\.json")
_PROOF_KEY = re.compile(rf"(?:(.*)/)?{re.escape(PROOF_KEY)}")


def _living(rolled_up: set[str], keys: set[str], destroyed: bool) -> list[str]:
    """The memories whose logs were rolled up and those `keys` name by their commits and
    checkpoints; without `destroyed`, less those `keys` show holding a destroy's proof."""
    found = rolled_up | {match[1] or "" for key in keys if (match := _MEMORY_KEY.fullmatch(key))}
    if not destroyed:
        found -= {match[1] or "" for key in keys if (match := _PROOF_KEY.fullmatch(key))}
    return sorted(found)


def _local_memories(root: Path, destroyed: bool) -> list[Path]:
    return [
        Path(folder)
        for folder, children, files in os.walk(root)
        if "log" in children
        and any(_MEMORY_KEY.fullmatch(f"log/{name}") for name in os.listdir(Path(folder, "log")))
        and (destroyed or not Path(folder, PROOF_KEY).is_file())
    ]
