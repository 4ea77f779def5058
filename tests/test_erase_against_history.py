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
from pathlib import Path
from typing import Any

import pytest
from a13n_harness.providers.memory import MemoryStoreError

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.format.wire_values import key_seq
from bucket_memory.history.erased_paths import ErasedPaths
from bucket_memory.history.rewriting import Rewriting
from bucket_memory.history.versions import StoredVersions
from bucket_memory.objects.interface import IfMatch
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore
from bucket_memory.transfer import export_snapshot

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
            await objects.put(key, first, IfMatch(objects.stored[key][-1][0]))
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


async def stopped_after_the_erasure_commit(objects: VersionedMemoryObjectStore) -> None:
    """An erase that committed its erasure and stopped before rewriting any object: every current
    object below the erasure still holds the texts."""

    def stop_at_the_first_rewrite(operation: Operation, key: str, n: int) -> Fault | None:
        return "crash_before" if operation == "update" else None

    dying = LogFileStore(FaultyObjectStore(objects, Faults(script=stop_at_the_first_rewrite)), options=OFTEN)
    with contextlib.suppress(SimulatedCrash):
        await MemoryAdmin(dying).erase("people/alice.md", origin=DPO)
    assert leaks([data for data, _ in objects.objects.values()]) == FRAGMENTS


async def test_rollback_restore_and_import_never_write_an_erased_text_back(tmp_path: Path) -> None:
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    await remembered(store)
    await store.settle()
    exported = tmp_path / "old-export"
    await export_snapshot(store, exported)  # made before the erasure: it holds archive/alice.md
    head = (await store.state()).head
    before = await store.read("notes/keep.md")
    kept = before.text
    await store.write("notes/keep.md", "changed after the export\n", expected=before.version, origin=DPO)
    await stopped_after_the_erasure_commit(objects)
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    erased = {"people/alice.md", "archive/alice.md"}
    preview = await admin.preview_rollback(head)
    assert not erased & {*preview.written, *preview.deleted} and preview.written == ("notes/keep.md",)
    assert await admin.rollback(head, origin=DPO) is not None
    with pytest.raises(MemoryStoreError) as caught:
        await admin.restore("archive/alice.md", str(head), origin=DPO)
    assert caught.value.code == "not_found" and "erased by commit" in str(caught.value)
    files = {path.relative_to(exported).as_posix(): path.read_text() for path in exported.rglob("*.md")}
    assert "archive/alice.md" in files
    await admin.put_files(files, replace=False, origin=DPO)  # what `import` does with an old export
    fresh = LogFileStore(objects, options=OFTEN)
    assert not erased & {entry.path for entry in await fresh.list()}
    assert (await fresh.read("notes/keep.md")).text == kept, "the rollback landed, without the erased file"
    await MemoryAdmin(fresh).erase("people/alice.md", origin=DPO)  # finishing the stopped erase
    assert leaks(every_stored_version(objects)) == []


async def test_an_erasure_that_lands_while_a_bulk_write_is_planned_is_made_good(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bulk write read the log before the erasure landed and wrote the file's old text after it:
    the write looks again once it has landed and erases what came back."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    await remembered(store)
    await store.settle()
    old = (await store.read("archive/alice.md")).text
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("people/alice.md", origin=DPO)
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    real = ErasedPaths.names
    calls = []

    async def read_before_the_erasure(self: ErasedPaths) -> frozenset[str]:
        calls.append(1)
        return frozenset() if len(calls) == 1 else await real(self)

    monkeypatch.setattr(ErasedPaths, "names", read_before_the_erasure)
    await admin.put_files({"archive/alice.md": old}, replace=False, origin=DPO)
    fresh = LogFileStore(objects, options=OFTEN)
    assert "archive/alice.md" not in {entry.path for entry in await fresh.list()}
    assert leaks(every_stored_version(objects)) == []


@pytest.mark.timeout(300)
# One point in `make test`, the others in `make test-slow` (each spawns a process: about 5 s).
@pytest.mark.parametrize("kill_at", [None, *(pytest.param(point, marks=pytest.mark.slow) for point in (1, 2, 4, 8))])
def test_a_recover_process_racing_an_erase_leaves_no_text_even_killed(s3_endpoint: str, kill_at: int | None) -> None:
    """The issue's order, in real processes on moto: a recover lists the versions; an erase (in this
    process) commits and rewrites the current objects; the recover puts back what it listed (killed
    with SIGKILL after its `kill_at`-th change, or not); the erase deletes old versions and looks
    once more. Whatever the recover did, `verify` then finds nothing or names the erased text that
    is back, and a recover run again leaves none."""
    import multiprocessing

    from bucket_memory import LogOptions, open_store

    from .conftest import VERSIONED, unique_prefix
    from .races import recover_after_an_erase
    from .test_erase import every_stored_version_at

    url = f"s3://{VERSIONED}/{unique_prefix()}"
    options = LogOptions(checkpoint_min_commits=2, checkpoint_max_commits=3)

    async def seed() -> None:
        async with open_store(url, options=options) as store:
            await remembered(store)
            await store.settle()

    asyncio.run(seed())
    context = multiprocessing.get_context("spawn")
    listed, go = context.Event(), context.Event()
    process = context.Process(target=recover_after_an_erase, args=(url, listed, go, kill_at))
    process.start()
    try:
        assert listed.wait(timeout=120), "the recover listed the versions"

        original, waited = Rewriting.delete_versions, list[bool]()

        async def after_the_recover(self: Rewriting, versions: Any) -> None:
            if not waited:  # the erase has rewritten the current objects: the recover puts back now
                waited.append(True)
                go.set()
                await asyncio.to_thread(process.join, 240)
            await original(self, versions)

        async def erase() -> None:
            async with open_store(url, options=options) as store:
                await MemoryAdmin(store).erase("people/alice.md", origin=DPO)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Rewriting, "delete_versions", after_the_recover)
            asyncio.run(erase())
    finally:
        go.set()
        process.join(timeout=240)
    assert process.exitcode in ((0, 1) if kill_at is None else (0, 1, -9)), process.exitcode

    async def check() -> list[str]:
        async with open_store(url, options=options) as store:
            problems = await MemoryAdmin(store).verify()
            named = [problem.key for problem in problems if "erased" in problem.message]
            assert leaks(every_stored_version_at(url)) == [] or named, "an erased text back is named by verify"
            if problems:
                await MemoryAdmin(store).recover(None, origin=DPO)
        async with open_store(url, options=options) as store:
            assert await MemoryAdmin(store).verify() == []
        return named

    asyncio.run(check())
    assert leaks(every_stored_version_at(url)) == []


async def test_an_erase_past_a_commit_deleted_by_hand_says_so_and_finishes_after_recover() -> None:
    """The agent deletes the newest commit after the operator's process read it (seeds 156 and 237
    of the simulator): the erasure lands past the gap, and the erase cannot follow the file's
    history. It answers `unavailable` naming the gap and what to run, never an AssertionError; after
    `recover` the erase run again finishes."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=OFTEN)
    kept = await remembered(store)
    await store.settle()
    newest = max(key for key in objects.objects if key_seq(key) is not None)
    await objects.delete([newest])  # the agent's grants allow it; the version stays
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(store).erase("people/alice.md", origin=DPO)
    assert caught.value.code == "unavailable"
    assert newest in str(caught.value) and "recover" in str(caught.value)
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).recover(None, origin=DPO)
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("people/alice.md", origin=DPO)
    assert leaks(every_stored_version(objects)) == []
    admin = MemoryAdmin(LogFileStore(objects, options=OFTEN))
    assert await admin.verify() == []
    await check_other_history(admin, kept)


async def test_an_erase_never_lands_where_a_commit_others_read_was_deleted() -> None:
    """Seed 144 of the simulator: a warm reader applied the newest commit; the agent deletes it; an
    operator whose process never read it erases. Made in the deleted commit's place, the erasure is
    one the warm reader never applies (it takes that seq as read), so it went on serving the text
    the erase reported erased. The erase refuses until `recover`, then finishes."""
    objects = VersionedMemoryObjectStore()
    warm = LogFileStore(objects, options=OFTEN)
    await remembered(warm)
    await warm.write("notes/last.md", "the newest commit\n", expected=None, origin=DPO)
    newest = max(key for key in objects.objects if key_seq(key) is not None)
    await objects.delete([newest])
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("archive/alice.md", origin=DPO)
    assert caught.value.code == "unavailable" and newest in str(caught.value)
    assert "archive/alice.md" in {entry.path for entry in await warm.list()}, "nothing was erased"
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).recover(None, origin=DPO)
    await MemoryAdmin(LogFileStore(objects, options=OFTEN)).erase("archive/alice.md", origin=DPO)
    assert "archive/alice.md" not in {entry.path for entry in await warm.list()}
    assert leaks(every_stored_version(objects)) == []


async def test_an_erase_on_a_local_memory_past_a_deleted_commit_names_the_gap(tmp_path: Path) -> None:
    """A local memory keeps no versions, so the deletion is found only once the erasure has landed
    past the gap (the process held the deleted commit): the erase says so, never AssertionError."""
    objects = LocalObjectStore(tmp_path / "memory")
    store = LogFileStore(objects, options=OFTEN)
    await remembered(store)
    newest = max(info.key for info in await objects.list("log/") if key_seq(info.key) is not None)
    await objects.delete([newest])
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(store).erase("people/alice.md", origin=DPO)
    missing = key_seq(newest)
    assert caught.value.code == "unavailable" and f"commits {missing} to {missing} are missing" in str(caught.value)
    assert "running `erase` again finishes it" in str(caught.value)
