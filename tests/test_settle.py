"""The commit path's outcomes are true and its reads fresh: one regression test per case of issue 25.

Each test builds the exact interleaving that once went wrong: a read served from a head proven
too late, a first commit taken for a deleted memory's past, a landed write reported as not
written, a date no calendar has.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.connect import check_create_only
from bucket_memory.format.canonical_json import digest
from bucket_memory.format.codec import GENESIS_HASH, Commit
from bucket_memory.format.wire_values import log_key
from bucket_memory.log.settle import FENCE_RUN
from bucket_memory.objects import interface as objects_module
from bucket_memory.objects import local as local_module
from bucket_memory.objects.interface import (
    CREATE,
    AlreadyExists,
    Create,
    IfHolds,
    ObjectStore,
    ObjectVersion,
    Overwrite,
    PutMode,
    TransientError,
)
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.faults import Faults, FaultyObjectStore

from .conftest import VERSIONED, unique_prefix
from .races import first_writes, run_processes
from .test_faults import Clock

ORIGIN = Origin(run_id="settle")


class HeldReadBack(FaultyObjectStore):
    """One writer's view of a bucket where its create of `key` lands and loses its reply, and every
    read of `key` fails until the fence's create; the first failing read waits for `release`."""

    def __init__(self, inner: ObjectStore, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.held, self.release = asyncio.Event(), asyncio.Event()
        self.fenced = False

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        if key != self.key:
            await super().put(key, data, mode)
        elif FENCE_RUN in data.decode():
            try:
                await super().put(key, data, mode)
            finally:
                self.fenced = True
        else:
            with contextlib.suppress(AlreadyExists):
                await super().put(key, data, mode)
            raise TransientError("reply lost")

    async def get(self, key: str) -> bytes | None:
        if key == self.key and not self.fenced:
            if not self.held.is_set():
                self.held.set()
                await self.release.wait()
            raise TransientError("read-back failed")
        return await super().get(key)


async def test_a_commit_found_by_the_fence_serves_no_read_that_began_before_the_fence() -> None:
    """Our create lands with its reply lost and read-backs fail; another writer commits after ours;
    a read begins; only then the fence is sent, is refused, and finds our commit and theirs. The
    read began after their commit landed, so it must see it (it was served from our commit alone,
    as proven at the fence's first attempt, and answered `not_found`)."""
    objects, clock = MemoryObjectStore(), Clock()
    held = HeldReadBack(objects, log_key(2))
    late = LogFileStore(held, options=LogOptions(request_attempts=1, clock=clock))
    other = LogFileStore(objects)
    await late.write("a.md", "1", expected=None, origin=ORIGIN)
    writing = asyncio.create_task(late.write("b.md", "2", expected=None, origin=ORIGIN))
    await held.held.wait()  # our commit 2 landed; its reply was lost and its read-back is held
    assert await other.write("c.md", "3", expected=None, origin=ORIGIN) == "3"
    clock.now += 1
    began = asyncio.Event()

    async def read_c() -> str:
        began.set()
        return (await late.read("c.md")).text

    reading = asyncio.create_task(read_c())
    await began.wait()  # the read has noted when it began, and waits for the commit's lock
    clock.now += 1
    held.release.set()
    assert await writing == "2"
    assert await reading == "3"


class RacedFirstCommit(MemoryObjectStore):
    """A bucket with versioning where another writer's first commit lands between our listing of
    the empty log and our question whether the log has a past."""

    def __init__(self) -> None:
        super().__init__()
        self.other: LogFileStore | None = None

    async def has_past(self, prefix: str) -> bool:
        if self.other is not None:
            other, self.other = self.other, None
            await other.write("theirs.md", "t", expected=None, origin=ORIGIN)
        return any(key.startswith(prefix) for key in self.objects)

    async def list_versions(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [ObjectVersion(key, "1", modified, "1") for key, (_, modified) in self.objects.items()]

    async def get_version(self, key: str, version: str) -> bytes | None:
        return await self.get(key)

    async def delete_version(self, key: str, version: str) -> None:
        raise AssertionError("not used")

    async def versioning(self) -> objects_module.Versioning:
        return "enabled"


async def test_a_first_commit_made_during_a_cold_start_is_not_taken_for_a_deleted_memory() -> None:
    objects = RacedFirstCommit()
    objects.other = LogFileStore(objects)
    assert await LogFileStore(objects).write("ours.md", "o", expected=None, origin=ORIGIN) == "2"


async def test_a_deleted_memory_is_still_refused() -> None:
    objects = RacedFirstCommit()
    await LogFileStore(objects).write("a.md", "1", expected=None, origin=ORIGIN)
    past = dict(objects.objects)
    objects.objects.clear()
    objects.has_past = lambda prefix: _true(past)  # type: ignore[method-assign]
    with pytest.raises(MemoryStoreError) as refused:
        await LogFileStore(objects).read("a.md")
    assert refused.value.code == "memory_deleted"


async def _true(past: object) -> bool:
    return bool(past)


@pytest.mark.parametrize("round_", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_a_fleet_cold_starting_a_new_memory_on_versioned_s3_never_sees_it_deleted(
    round_: int, s3_endpoint: str
) -> None:
    """Six processes (six Lambdas of a first deploy) cold-open one new memory at once and each
    writes; a quarter of such writes raised `memory_deleted`."""
    urls = [f"s3://{VERSIONED}/{unique_prefix()}" for _ in range(3)]
    written = run_processes(first_writes, [(urls, f"p{number}") for number in range(6)])
    assert all(versions == ["ok"] * len(urls) for versions in written), written


async def test_a_create_sent_twice_whose_holder_cannot_be_read_is_unconfirmed_not_unavailable() -> None:
    """The transport repeats our create; the repeat is refused by our own commit; reading the key
    then fails. The write landed, so the caller must not be told `unavailable` (nothing written)."""
    objects = MemoryObjectStore()
    resent = FaultyObjectStore(
        objects,
        Faults(script=lambda operation, key, count: "resend" if operation == "create" and count == 0 else None),
    )
    store = LogFileStore(resent, options=LogOptions(request_attempts=2))
    reads_fail = Faults(
        script=lambda operation, key, count: "fail_before" if operation == "get" and key == log_key(1) else None
    )
    resent.faults = replace(resent.faults, script=_both(resent.faults, reads_fail))  # type: ignore[arg-type]
    with pytest.raises(MemoryStoreError) as raised:
        await store.write("a.md", "1", expected=None, origin=ORIGIN)
    assert raised.value.code == "write_unconfirmed"
    assert (await LogFileStore(objects).read("a.md")).text == "1"


def _both(first: Faults, second: Faults) -> object:
    def script(operation: str, key: str, count: int) -> object:
        assert first.script is not None and second.script is not None
        return first.script(operation, key, count) or second.script(operation, key, count)  # type: ignore[arg-type]

    return script


async def test_a_create_sent_twice_is_found_landed() -> None:
    objects = MemoryObjectStore()
    resent = FaultyObjectStore(objects, Faults(script=lambda operation, key, count: "resend"))
    store = LogFileStore(resent)
    assert await store.write("a.md", "1", expected=None, origin=ORIGIN) == "1"
    assert await store.write("a.md", "2", expected="1", origin=ORIGIN) == "2"
    assert [key for key in objects.objects if key.startswith("log/")] == [log_key(1), log_key(2)]


async def test_a_local_write_whose_directory_sync_fails_after_the_link_is_not_reported_unwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS and EFS can fail the directory fsync after the link made the object visible."""
    synced: list[Path] = []

    def failing_sync(directory: Path) -> None:
        synced.append(directory)
        if len(synced) == 1:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(local_module, "_fsync_directory", failing_sync)
    store = LogFileStore(LocalObjectStore(tmp_path / "memory"))
    assert await store.write("a.md", "1", expected=None, origin=ORIGIN) == "1"
    assert (await LogFileStore(LocalObjectStore(tmp_path / "memory")).read("a.md")).version == "1"


class LandsThenFails(MemoryObjectStore):
    """A backend that breaks the create contract once: its first commit lands, then the call raises
    `unavailable`, as a failure mapped wrongly after the request reached the server would."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        await super().put(key, data, mode)
        if key.startswith("log/") and not self.failed:
            self.failed = True
            raise MemoryStoreError("unavailable", "S3 request failed after it was sent")


async def test_a_create_that_landed_and_then_raised_unavailable_is_read_back_not_reported_unwritten() -> None:
    """`settle` reads the key back after any error from a create but `forbidden` or the deadline's
    (before: any `MemoryStoreError` was taken for "did not land", and a landed write was reported
    as failed, its caller free to write it again)."""
    objects = LandsThenFails()
    store = LogFileStore(objects)
    assert await store.write("a.md", "1", expected=None, origin=ORIGIN) == "1"
    assert objects.failed and [key for key in objects.objects if key.startswith("log/")] == [log_key(1)]


async def test_a_local_link_that_fails_after_it_was_made_is_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A network filesystem can fail a link (EIO, a timeout) it made: the create is transient, so
    the log reads the key back (before: `unavailable`, a landed write reported as not written)."""
    linked: list[str] = []
    real_link = os.link

    def link_then_fail(source: str, target: str) -> None:
        real_link(source, target)
        linked.append(target)
        if len(linked) == 1:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "link", link_then_fail)
    objects = LocalObjectStore(tmp_path / "memory")
    with pytest.raises(TransientError):
        await objects.put("doctor/x", b"x", CREATE)
    assert await objects.get("doctor/x") == b"x"
    store = LogFileStore(LocalObjectStore(tmp_path / "memory"))
    assert await store.write("a.md", "1", expected=None, origin=ORIGIN) == "1"


def signed_commit(seq: int, time: str) -> bytes:
    """Commit `seq` of one write, at `time`, with a valid hash: what a hostile writer can put there."""
    body = {
        "changes": [{"op": "write", "path": f"f{seq}.md", "text": "x"}],
        "format": 1,
        "id": "ab" * 16,
        "kind": "commit",
        "origin": {"principal_id": None, "run_id": None, "tool_call_id": None},
        "prev": GENESIS_HASH,
        "seq": seq,
        "time": time,
    }
    return json.dumps({**body, "hash": digest(body)}, sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("time", ["2026-13-45T99:99:99.000Z", "2026-02-30T00:00:00.000Z", "0000-01-01T00:00:00.000Z"])
async def test_a_commit_with_an_impossible_date_is_corruption(time: str) -> None:
    objects = MemoryObjectStore()
    await objects.put(log_key(1), signed_commit(1, time), CREATE)
    good = signed_commit(1, "2026-02-28T00:00:00.000Z")
    assert Commit.decode("m", log_key(1), good).time == "2026-02-28T00:00:00.000Z"
    store = LogFileStore(objects)
    for attempt in (store.read("f1.md"), store.list(), store.write("g.md", "y", expected=None, origin=ORIGIN)):
        with pytest.raises(MemoryStoreError) as raised:
            await attempt
        assert raised.value.code == "unavailable" and "is corrupt" in str(raised.value)
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert any(problem.key == log_key(1) and "time" in problem.message for problem in problems), problems


async def test_one_commit_attempt_still_answers_a_refusal() -> None:
    store = LogFileStore(MemoryObjectStore(), options=LogOptions(commit_attempts=1))
    await store.write("a.md", "1", expected=None, origin=ORIGIN)
    store._log.head.forget()  # the refusal must be proven on a fresh head first
    with pytest.raises(MemoryStoreError) as refused:
        await store.write("a.md", "2", expected="9", origin=ORIGIN)
    assert refused.value.code == "version_mismatch"


class LostFirstReply(MemoryObjectStore):
    """An endpoint that honours create-only, whose reply to the first create is lost."""

    def __init__(self) -> None:
        super().__init__()
        self.creates = 0

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        self.creates += 1
        if self.creates > 1:
            await super().put(key, data, mode)
            return
        with contextlib.suppress(AlreadyExists):
            await super().put(key, data, mode)
        raise TransientError("reply lost")


class IgnoresCreateOnly(MemoryObjectStore):
    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        self.objects[key] = (data, self.clock)


async def test_the_create_only_check_survives_a_lost_first_reply() -> None:
    await check_create_only(LostFirstReply())
    with pytest.raises(MemoryStoreError) as refused:
        await check_create_only(IgnoresCreateOnly())
    assert "does not enforce create-only" in str(refused.value)


async def test_a_404_from_a_listing_is_a_mapped_error(request: pytest.FixtureRequest) -> None:
    """A 404 without NoSuchBucket (a wrong endpoint path) to a listing: a message, not a private exception."""
    from .test_fault_proxy import UNHURRIED, behind_proxy

    async with behind_proxy(request, "s3", lambda number, method, path: 404, request_timeout=UNHURRIED) as (objects, _):
        for attempt in (objects.list("log/"), objects.delete(["log/x"])):
            with pytest.raises(MemoryStoreError) as raised:
                await attempt
            assert raised.value.code == "unavailable" and "404" in str(raised.value)


def test_a_memory_inside_another_memorys_log_folder_stays_reachable(tmp_path: Path) -> None:
    """A memory at P/log, then one at P: the second would make the first unreachable, so it is refused."""
    inner = LocalObjectStore(tmp_path / "log")
    asyncio.run(LogFileStore(inner).write("a.md", "1", expected=None, origin=ORIGIN))
    with pytest.raises(MemoryStoreError) as refused:
        LocalObjectStore(tmp_path)
    assert refused.value.code == "invalid_path" and "log" in str(refused.value)
    assert asyncio.run(LogFileStore(LocalObjectStore(tmp_path / "log")).read("a.md")).text == "1"


async def test_a_record_with_an_impossible_date_is_skipped_like_any_garbage_record() -> None:
    from bucket_memory import LogRecordStore

    records = LogRecordStore(LogFileStore(MemoryObjectStore()))
    kept = (await records.add("green tea")).id
    body = json.dumps({"text": "bad", "updated_at": "2026-13-45T99:99:99.000Z"}, separators=(",", ":"), sort_keys=True)
    await records.files.write(f"{'e' * 32}.json", body, expected=None, origin=ORIGIN)
    assert [record.id for record in (await records.list(limit=10)).records] == [kept]
    assert [record.id for record in await records.search("bad green tea", limit=10)] == [kept]
