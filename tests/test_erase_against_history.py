"""Erasure against the other history commands (issue 43): a recover that listed the stored versions
before an erase, a recover to a moment before a stopped erase, and `verify` on a text put back.

What a broken implementation would get wrong: the recover puts the erased text back (it takes
the rewritten objects for damage and restores their first versions, which hold the text) and
the erase reports success; `recover --as-of` writes an erased file back as a live file; `verify`
says only that files differ, or nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.rewriting import Rewriting
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore
from bucket_memory.versions import StoredVersions

from .test_erase import DPO, FRAGMENTS, OFTEN, check_other_history, every_stored_version, leaks, remembered


def paused_after_listing(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, asyncio.Event]:
    """Make the next full listing of stored versions (a recover's) wait, once it has listed, until
    `resume` is set; `listed` is set when it has."""
    listed, resume = asyncio.Event(), asyncio.Event()
    original = StoredVersions.listed.__func__  # type: ignore[attr-defined]

    async def pausing(cls: Any, objects: Any, format: Any, prefix: str = "") -> StoredVersions:
        found: StoredVersions = await original(cls, objects, format, prefix)
        if prefix == "" and not listed.is_set():
            listed.set()
            await resume.wait()
        return found

    monkeypatch.setattr(StoredVersions, "listed", classmethod(pausing))
    return listed, resume


async def test_a_recover_that_listed_before_an_erase_never_puts_the_text_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The order of the issue: recover lists; erase commits, rewrites the current objects and stops
    before deleting old versions; recover puts back what it listed; erase deletes old versions."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    kept = await remembered(store)
    await store.settle()
    listed, resume = paused_after_listing(monkeypatch)
    rewritten, deleting = asyncio.Event(), asyncio.Event()
    original = Rewriting.delete_versions

    async def after_recover(self: Rewriting, versions: Any) -> None:
        if not rewritten.is_set():  # the erase's own deletion waits for the recover; the recover's pass does not
            rewritten.set()
            await deleting.wait()
        await original(self, versions)

    monkeypatch.setattr(Rewriting, "delete_versions", after_recover)
    recovering = asyncio.create_task(MemoryAdmin(LogFileStore(objects, options=OFTEN)).recover(None, origin=DPO))
    await listed.wait()
    erasing = asyncio.create_task(
        MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("people/alice.md", origin=DPO)
    )
    await rewritten.wait()
    resume.set()
    with contextlib.suppress(MemoryStoreError):  # a version it listed vanished: it says so
        await recovering
    deleting.set()
    await erasing
    assert leaks(every_stored_version(objects)) == [], "nothing the erase removed is back"
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    assert await admin.verify() == []
    await check_other_history(admin, kept)


async def test_an_erase_that_ran_after_a_recover_listed_finds_what_it_put_back() -> None:
    """The other order of the same race, without the recover's own pass: the erase's last look."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    await remembered(store)
    await store.settle()
    firsts = {
        key: first
        for key, versions in objects.stored.items()
        if key.startswith(("log/", "checkpoints/"))
        and (first := next((data for _, data, _ in versions if data is not None), None)) is not None
    }
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    await admin.erase("people/alice.md", origin=DPO)
    # What a recover that listed before the erasure puts back: the first versions, over the rewrites.
    for key, first in firsts.items():
        if key in objects.objects:
            await objects.replace(key, first, tag=objects.stored[key][-1][0])
    assert leaks([data for data, _ in objects.objects.values()]) != []
    problems = await MemoryAdmin(LogFileStore(objects, options=OFTEN)).verify()
    erased_back = [problem for problem in problems if "which commit" in problem.message and "erased" in problem.message]
    assert erased_back, problems
    assert all("people/alice.md" in problem.message or "archive/alice.md" in problem.message for problem in erased_back)
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("people/alice.md", origin=DPO)
    assert leaks(every_stored_version(objects)) == []


async def test_recover_as_of_a_moment_before_a_stopped_erase_never_writes_the_text_back() -> None:
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    await remembered(store)
    await store.settle()
    before = datetime.now(UTC)
    objects.clock += 10  # the erasure is made later than `before`
    await asyncio.sleep(0)

    def stop_before_deleting(operation: Operation, key: str, n: int) -> Fault | None:
        return "crash_before" if operation == "delete_version" and not key.startswith("doctor/") else None

    dying = LogFileStore(FaultyObjectStore(objects, Faults(script=stop_before_deleting)), options=OFTEN)
    with contextlib.suppress(SimulatedCrash):
        await MemoryAdmin(dying).erase("people/alice.md", origin=DPO)
    assert leaks(every_stored_version(objects)) == FRAGMENTS, "the stopped erase left the old versions"
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    preview = await admin.preview_recover_as_of(before)
    assert not {"people/alice.md", "archive/alice.md"} & set(preview.written)
    await admin.recover(before, origin=DPO)
    fresh = LogFileStore(objects, options=OFTEN)
    assert not {"people/alice.md", "archive/alice.md"} & {entry.path for entry in await fresh.list()}
    assert leaks([data for data, _ in objects.objects.values()]) == []
    assert leaks(every_stored_version(objects)) == [], "the recover finished the stopped erase"
