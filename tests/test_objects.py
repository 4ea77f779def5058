"""The object interface's contract, on every backend (in-memory, versioned in-memory, a directory,
moto, moto through obstore, fake-gcs-server), for every mode of `put` each keeps: what a put whose
condition holds writes, what one whose condition fails answers and leaves, races, hostile bodies
(none, large), and the error rule: no `MemoryStoreError` once a request may have been written."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest
from _pytest.mark import ParameterSet
from a13n_harness.providers.memory import MemoryStoreError

from bucket_memory.objects import local as local_module
from bucket_memory.objects.bulk import DestroyableObjectStore
from bucket_memory.objects.interface import (
    CREATE,
    OVERWRITE,
    AlreadyExists,
    Create,
    IfHolds,
    IfMatch,
    ObjectStore,
    ObjectVersion,
    Overwrite,
    PreconditionFailed,
    PutMode,
    Refused,
    RewritableObjectStore,
    TransientError,
    VersionedObjectStore,
)
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.objects.s3 import S3ObjectStore
from bucket_memory.testing.faults import Faults, FaultyObjectStore
from bucket_memory.testing.proxy import Fault, Plan, fault_proxy

from .conftest import BUCKET, VERSIONED, made_objects, unique_prefix

BACKENDS = ["memory", "versioned-memory", "local", "s3", "s3-obstore", "gcs"]
type ModeKind = type[Create] | type[IfMatch] | type[IfHolds] | type[Overwrite]
MODES: list[ModeKind] = [Create, IfMatch, IfHolds, Overwrite]
UPDATES: list[ModeKind] = [IfMatch, IfHolds]
KEY = "log/00000000000000000001.json"
# Past GCS's 8 MiB multipart limit (a resumable upload) and the size checksums are taken off the loop at.
LARGE = bytes(range(256)) * (9 * 4096)


# The modes each backend keeps: the `objects` fixture holds this table to what the store's
# protocols say (`keeps`), so that each test is made for the pairs that apply and none is skipped.
KEEPS: dict[str, tuple[ModeKind, ...]] = {
    "memory": (Create, IfHolds, Overwrite),
    "versioned-memory": (Create, IfMatch, IfHolds, Overwrite),
    "local": (Create, IfHolds, Overwrite),
    "s3": (Create, IfMatch, Overwrite),
    "s3-obstore": (Create,),
    "gcs": (Create, IfMatch, Overwrite),
}


def pairs(kinds: list[ModeKind], *, kept: bool = True, backends: list[str] = BACKENDS) -> list[ParameterSet]:
    """`(backend, kind)` for each of `kinds` that each of `backends` keeps (or, not `kept`, does not)."""
    return [
        pytest.param(backend, kind, id=f"{backend}-{kind.__name__}")
        for backend in backends
        for kind in kinds
        if (kind in KEEPS[backend]) is kept
    ]


def keeping(kind: ModeKind) -> list[str]:
    """The backends that keep `kind`."""
    return [backend for backend in BACKENDS if kind in KEEPS[backend]]


@pytest.fixture(params=BACKENDS)
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> ObjectStore:
    """One fresh prefix on each backend (or those a test names); the clouds' in their bucket that keeps versions."""
    made = made_objects(request.param, request, tmp_path, bucket=VERSIONED)
    assert [kind for kind in MODES if keeps(made, kind)] == list(KEEPS[request.param]), "KEEPS is out of date"
    return made


def keeps(objects: ObjectStore, kind: ModeKind) -> bool:
    """Whether `objects` keeps the mode, as its protocols say."""
    if kind is IfMatch:
        return isinstance(objects, VersionedObjectStore)
    if kind is IfHolds:
        return isinstance(objects, RewritableObjectStore)
    if kind is Overwrite:
        return isinstance(objects, DestroyableObjectStore)
    return True


async def put(objects: ObjectStore, key: str, data: bytes, mode: PutMode) -> None:
    """`objects.put` in any mode: the test asks only what `keeps` says the store keeps."""
    await objects.put(key, data, mode)  # type: ignore[arg-type]


async def current_tag(objects: ObjectStore, key: str) -> str:
    assert isinstance(objects, VersionedObjectStore)
    return next(version.tag for version in await objects.list_versions(key) if version.key == key and version.current)


async def holding(objects: ObjectStore, key: str, kind: ModeKind) -> PutMode:
    """A mode of `kind` whose condition holds for `key` now."""
    if kind is IfMatch:
        return IfMatch(await current_tag(objects, key))
    if kind is IfHolds:
        held = await objects.get(key)
        assert held is not None
        return IfHolds(held)
    return OVERWRITE if kind is Overwrite else CREATE


@pytest.mark.parametrize("body", [b"", b'{"n": 1}'], ids=["zero-bytes", "small"])
@pytest.mark.parametrize(("objects", "kind"), pairs(MODES), indirect=["objects"])
async def test_a_put_whose_condition_holds_writes_its_bytes_whole(
    objects: ObjectStore, kind: ModeKind, body: bytes
) -> None:
    if kind is not Create:
        await objects.put(KEY, b"old", CREATE)
    await put(objects, KEY, body, await holding(objects, KEY, kind))
    assert await objects.get(KEY) == body  # zero bytes are an object, not a missing key


@pytest.mark.parametrize(("objects", "kind"), pairs([Create, *UPDATES]), indirect=["objects"])
async def test_a_large_body_is_written_whole(objects: ObjectStore, kind: ModeKind) -> None:
    if kind is not Create:
        await objects.put(KEY, LARGE[::-1], CREATE)
    await put(objects, KEY, LARGE, await holding(objects, KEY, kind))
    assert await objects.get(KEY) == LARGE


async def test_a_create_of_a_taken_key_is_refused_and_leaves_it(objects: ObjectStore) -> None:
    await objects.put(KEY, b"first", CREATE)
    for body in (b"second", b"", b"first"):  # the same bytes too: a create never overwrites
        with pytest.raises(AlreadyExists) as refused:
            await objects.put(KEY, body, CREATE)
        assert refused.value.key == KEY
    assert await objects.get(KEY) == b"first"


@pytest.mark.parametrize("objects", keeping(IfMatch), indirect=True)
async def test_an_update_naming_a_stale_version_is_refused_and_leaves_the_newer(objects: ObjectStore) -> None:
    await objects.put(KEY, b"one", CREATE)
    stale = await holding(objects, KEY, IfMatch)
    await put(objects, KEY, b"two", await holding(objects, KEY, IfMatch))
    with pytest.raises(PreconditionFailed):
        await put(objects, KEY, b"three", stale)
    assert await objects.get(KEY) == b"two"


@pytest.mark.parametrize("expected", [b"one ", b"", b"ONE"], ids=["longer", "zero-bytes", "same-length"])
@pytest.mark.parametrize("objects", keeping(IfHolds), indirect=True)
async def test_an_update_expecting_other_bytes_is_refused_and_leaves_them(
    objects: ObjectStore, expected: bytes
) -> None:
    await objects.put(KEY, b"one", CREATE)
    with pytest.raises(PreconditionFailed):
        await put(objects, KEY, b"two", IfHolds(expected))
    assert await objects.get(KEY) == b"one"


@pytest.mark.parametrize(("objects", "kind"), pairs(UPDATES), indirect=["objects"])
async def test_an_update_of_a_missing_key_is_refused_and_writes_nothing(objects: ObjectStore, kind: ModeKind) -> None:
    """Deleted since its version was read, or never there (expecting zero bytes is not expecting none)."""
    await objects.put(KEY, b"", CREATE)
    named = await holding(objects, KEY, kind)
    await objects.delete([KEY])
    for key, mode in ((KEY, named), ("log/never.json", named)):
        with pytest.raises(PreconditionFailed):
            await put(objects, key, b"x", mode)
        assert await objects.get(key) is None


@pytest.mark.parametrize("objects", keeping(Overwrite), indirect=True)
async def test_an_overwrite_writes_whatever_the_key_holds(objects: ObjectStore) -> None:
    await put(objects, KEY, b"first", OVERWRITE)  # absent: created
    await put(objects, KEY, b"second", OVERWRITE)
    assert await objects.get(KEY) == b"second"


@pytest.mark.parametrize(("objects", "kind"), pairs([Create, *UPDATES]), indirect=["objects"])
async def test_of_racing_puts_of_one_condition_exactly_one_lands(objects: ObjectStore, kind: ModeKind) -> None:
    if kind is not Create:
        await objects.put(KEY, b"base", CREATE)
    mode = await holding(objects, KEY, kind)
    bodies = [f"writer {n}".encode() for n in range(8)]
    answers = await asyncio.gather(*(put(objects, KEY, body, mode) for body in bodies), return_exceptions=True)
    landed = [body for body, answer in zip(bodies, answers, strict=True) if answer is None]
    refused = AlreadyExists if kind is Create else PreconditionFailed
    assert len(landed) == 1 and all(isinstance(answer, refused) for answer in answers if answer is not None)
    assert await objects.get(KEY) == landed[0]


@pytest.mark.parametrize(("objects", "kind"), pairs(MODES, kept=False), indirect=["objects"])
async def test_a_mode_a_store_does_not_keep_is_a_type_error_and_writes_nothing(
    objects: ObjectStore, kind: ModeKind
) -> None:
    """The protocols leave such a mode out of `put`'s type; a caller that cast it meets this."""
    mode = IfMatch("1") if kind is IfMatch else IfHolds(b"") if kind is IfHolds else OVERWRITE
    with pytest.raises(TypeError):
        await put(objects, KEY, b"x", mode)
    assert await objects.get(KEY) is None


# The error rule: once a request may have been written, an error is never a `MemoryStoreError`.


@pytest.mark.parametrize("kind", [Create, IfHolds, Overwrite], ids=lambda kind: kind.__name__)
async def test_a_local_put_whose_folder_sync_fails_after_it_landed_is_transient(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: ModeKind
) -> None:
    """The link or rename was made, then the folder's fsync failed (EIO on a network filesystem).
    Before, a rename's (`IfHolds`, `Overwrite`) was reported `unavailable`: "nothing was written"."""
    objects = LocalObjectStore(tmp_path / "memory")
    if kind is not Create:
        await objects.put(KEY, b"old", CREATE)
    mode = await holding(objects, KEY, kind)

    def failing_sync(directory: Path) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(local_module, "_fsync_directory", failing_sync)
    with pytest.raises(TransientError):
        await put(objects, KEY, b"new", mode)
    assert await objects.get(KEY) == b"new"


@pytest.mark.parametrize("kind", [Create, IfHolds, Overwrite], ids=lambda kind: kind.__name__)
async def test_a_local_put_refused_before_anything_was_written_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: ModeKind
) -> None:
    """The converse: a rename or link the filesystem refused outright left nothing, and says so."""
    objects = LocalObjectStore(tmp_path / "memory")
    if kind is not Create:
        await objects.put(KEY, b"old", CREATE)
    mode = await holding(objects, KEY, kind)

    def refusing(*_: object) -> None:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "link", refusing)
    monkeypatch.setattr(os, "replace", refusing)
    with pytest.raises(MemoryStoreError) as caught:
        await put(objects, KEY, b"new", mode)
    assert caught.value.code == "forbidden"
    assert await objects.get(KEY) == (None if kind is Create else b"old")


def first_write(fault: Fault) -> Plan:
    """`fault` for the first write request (S3 PUT, GCS upload POST), every other request passed."""
    seen: list[str] = []

    def plan(number: int, method: str, path: str) -> Fault | None:
        if method not in ("PUT", "POST") or seen:
            return None
        seen.append(path)
        return fault

    return plan


@pytest.mark.parametrize("fault", ["lose_reply", "cut_body"])
@pytest.mark.parametrize(("backend", "kind"), pairs([Create, IfMatch, Overwrite], backends=["s3", "s3-obstore", "gcs"]))
async def test_a_cloud_put_that_landed_and_lost_its_reply_is_never_a_store_error(
    backend: str, kind: ModeKind, fault: Fault, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fault proxy passes the put to the emulator, then drops or cuts its reply: the object is
    written, so the error must say it may have been (transient, or the refusal a resend of it met)."""
    endpoint = request.getfixturevalue("gcs_endpoint" if backend == "gcs" else "s3_endpoint")
    async with fault_proxy(endpoint, first_write(fault)) as (url, proxy):
        objects = _behind(backend, url, monkeypatch)
        try:
            if kind is not Create:
                proxy.plan = lambda *_: None
                await objects.put(KEY, b"old", CREATE)
                proxy.plan = first_write(fault)
            mode = await holding(objects, KEY, kind)
            try:
                await put(objects, KEY, b"new", mode)
            except MemoryStoreError as error:
                pytest.fail(f"a put that landed was reported unwritten: {error!r}")
            except (TransientError, Refused):
                pass  # may have been written; a transport's resend of it met the object it wrote
            assert [faulted for *_, faulted in proxy.faults] == [fault]
            proxy.plan = lambda *_: None
            assert await objects.get(KEY) == b"new"
        finally:
            await _closed(objects)


def _behind(backend: str, url: str, monkeypatch: pytest.MonkeyPatch) -> ObjectStore:
    """A fresh prefix on `backend`, reached through the proxy at `url` (short request timeouts)."""
    prefix = unique_prefix()
    if backend == "gcs":
        from google.cloud import storage

        from bucket_memory.objects.gcs import GCSObjectStore

        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        return GCSObjectStore(storage.Client(), bucket=VERSIONED, prefix=prefix, request_timeout=5.0)
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    if backend == "s3-obstore":
        from bucket_memory.objects.s3_obstore import ObstoreS3ObjectStore

        return ObstoreS3ObjectStore(bucket=BUCKET, prefix=prefix, request_timeout=5.0)
    from bucket_memory.objects.s3 import S3ObjectStore

    return S3ObjectStore(bucket=VERSIONED, prefix=prefix, request_timeout=5.0)


async def _closed(objects: ObjectStore) -> None:
    if (close := getattr(objects, "aclose", None)) is not None:
        await close()
    if (client := getattr(objects, "client", None)) is not None and hasattr(client, "close"):
        client.close()


async def test_a_refused_put_through_the_fault_wrapper_still_meets_its_reply_fault() -> None:
    """A refusal is a reply: the wrapper loses it as it loses any (the simulation's histories
    depend on it; before, a refusal skipped the reply's fault and latency)."""
    inner = MemoryObjectStore()
    await inner.put(KEY, b"first", CREATE)
    faulty = FaultyObjectStore(inner, Faults(script=lambda operation, key, n: "lose_reply"))
    with pytest.raises(TransientError):
        await faulty.put(KEY, b"second", CREATE)
    assert faulty.calls["create"] == 1 and await inner.get(KEY) == b"first"


async def test_an_s3_put_whose_reply_was_lost_is_not_sent_again_and_refused(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp sent a PUT whose reply was lost a second time, unseen by botocore; a 403 to that
    second send was `forbidden`, which `log/settle.py` takes for "did not land", though the first
    send had written the key. The store's client sends once: the lost reply is transient."""
    from bucket_memory.objects.s3 import S3ObjectStore

    def plan(number: int, method: str, path: str) -> Fault | None:
        return None if method != "PUT" else "lose_reply" if not proxy.faults else 403

    async with fault_proxy(request.getfixturevalue("s3_endpoint"), plan) as (url, proxy):
        monkeypatch.setenv("AWS_ENDPOINT_URL", url)
        objects = S3ObjectStore(bucket=VERSIONED, prefix=unique_prefix(), request_timeout=5.0)
        try:
            with pytest.raises(TransientError):
                await objects.put(KEY, b"landed", CREATE)
            assert [fault for *_, fault in proxy.faults] == ["lose_reply"]
            assert await objects.get(KEY) == b"landed"
        finally:
            await objects.aclose()


class _RefusingDeletes:
    """An S3 client whose DeleteObjects answers 200 with every key refused, as S3 does."""

    async def delete_objects(self, **_: object) -> dict[str, object]:
        return {"Errors": [{"Key": "memory/a.md", "Code": "AccessDenied", "Message": "Access Denied"}]}


@pytest.mark.parametrize("history", [False, True], ids=["current", "versions"])
async def test_an_s3_delete_whose_reply_lists_a_refused_key_raises_for_that_key(history: bool) -> None:
    """A 200 is no proof of deletion: the first key the reply lists is reported, named under the
    store's location, with the permission a versions' delete needs of its own."""
    objects = S3ObjectStore(_RefusingDeletes(), bucket="bucket", prefix="memory")
    deleting = (
        objects.delete_stored([ObjectVersion("a.md", "v1", 0.0, "", False, False, 1)])
        if history
        else objects.delete(["a.md"])
    )
    with pytest.raises(MemoryStoreError) as caught:
        await deleting
    assert caught.value.code == "forbidden"
    assert "s3://bucket/memory/a.md" in str(caught.value)
    assert ("old versions" in str(caught.value)) is history
