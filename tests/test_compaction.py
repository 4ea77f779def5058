"""Compaction and purge racing live writers and change-feed readers on the moto server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from a13n_harness.providers.memory import FullResync, MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions
from bucket_memory.format.wire_values import LOG_PREFIX, key_seq
from bucket_memory.objects.memory import MemoryObjectStore

from .conftest import BUCKET, unique_prefix

ORIGIN = Origin(run_id="compaction")
GRACE = 1.0


class View:
    """What a harness context keeps of a memory: files brought up to date through `changes`."""

    def __init__(self, store: LogFileStore) -> None:
        self.store = store
        self.cursor: str | None = None
        self.files: dict[str, str] = {}

    async def sync(self) -> None:
        feed = await self.store.changes(self.cursor)
        if isinstance(feed, FullResync):
            self.files = {}
            paths: tuple[str, ...] = tuple(entry.path for entry in await self.store.list())
        else:
            paths = feed.paths
        for path in paths:
            try:
                self.files[path] = (await self.store.read(path)).text
            except MemoryStoreError as error:
                if error.code != "not_found":
                    raise
                self.files.pop(path, None)
        self.cursor = feed.cursor


async def write_own_file(store: LogFileStore, path: str, rounds: int) -> None:
    for round in range(rounds):
        while True:
            try:
                current = await store.read(path)
                await store.write(path, f"{path} {round}", expected=current.version, origin=ORIGIN)
            except MemoryStoreError as error:
                if error.code == "not_found":  # purged meanwhile
                    try:
                        await store.write(path, f"{path} {round}", expected=None, origin=ORIGIN)
                    except MemoryStoreError as again:
                        if again.code != "version_mismatch":
                            raise
                        continue
                elif error.code == "version_mismatch":
                    continue
                else:
                    raise
            break


async def follow(view: View, rounds: int) -> None:
    for _ in range(rounds):
        await view.sync()


async def test_compaction_and_purge_race_live_writers_and_readers(s3_client: Any) -> None:
    prefix = unique_prefix()
    options = LogOptions(
        grace_period=GRACE, checkpoint_min_commits=2, checkpoint_max_commits=4, retain_commits=0, retain_seconds=0
    )

    def open_memory() -> LogFileStore:
        return LogFileStore.s3(s3_client, bucket=BUCKET, prefix=prefix, options=options)

    sleeper = open_memory()
    await sleeper.write("sleeper.md", "v1", expected=None, origin=ORIGIN)
    sleeping_reader = View(open_memory())
    await sleeping_reader.sync()
    views = [View(open_memory()) for _ in range(2)]

    async def phase(purge: bool) -> None:
        async def purge_midway() -> None:
            purger = open_memory()
            await write_own_file(purger, "purger.md", 3)
            if purge:
                await purger.purge()

        await asyncio.gather(
            write_own_file(open_memory(), "a.md", 10),
            write_own_file(open_memory(), "dir/b.md", 10),
            purge_midway(),
            *(follow(view, 8) for view in views),
        )

    await phase(purge=False)
    # Not synchronization: time must pass for the checkpoints to age past the grace period and
    # for the sleepers' heads to age past half of it, as a Lambda frozen for an hour would.
    await asyncio.sleep(GRACE * 1.5)
    await phase(purge=True)

    # The first commit key, not the first key: a run stored by a writer that listed before another's
    # compaction deleted runs may sit below the first commit until the next compaction (CI met one).
    kept = [seq for info in await sleeper.objects.list(LOG_PREFIX) if (seq := key_seq(info.key)) is not None]
    first_kept = kept[0] if kept else None
    assert first_kept is not None and first_kept > 2, "compaction removed the commits after the sleepers' heads"

    version = await sleeper.write("sleeper.md", "v2", expected=None, origin=ORIGIN)  # purged: a create
    truth = open_memory()
    assert (await truth.read("sleeper.md")).version == version
    assert int(version) > first_kept
    expected = {entry.path: (await truth.read(entry.path)).text for entry in await truth.list()}
    for view in (*views, sleeping_reader):
        await view.sync()
        assert view.files == expected, "a reader following the change feed missed a change"


class StuckDeletes(MemoryObjectStore):
    """Deletes wait until the test lets them go: compaction held mid-way, as by a slow bucket."""

    def __init__(self) -> None:
        super().__init__()
        self.deleting = asyncio.Event()
        self.go = asyncio.Event()

    async def delete(self, keys: Sequence[str]) -> None:
        self.deleting.set()
        await self.go.wait()
        await super().delete(keys)


async def test_compaction_stuck_in_its_deletes_holds_no_write_or_read() -> None:
    objects = StuckDeletes()
    options = LogOptions(
        checkpoint_min_commits=1, checkpoint_max_commits=2, grace_period=0, retain_commits=1, retain_seconds=0
    )
    store = LogFileStore(objects, options=options)
    for n in range(4):
        await store.write(f"f{n}.md", "x", expected=None, origin=ORIGIN)
    await objects.deleting.wait()  # housekeeping of those commits is stuck deleting
    # The same process writes and reads on while it is.
    version = await store.write("after.md", "y", expected=None, origin=ORIGIN)
    assert (await store.read("after.md")).version == version
    assert {entry.path for entry in await store.list()} == {"f0.md", "f1.md", "f2.md", "f3.md", "after.md"}
    objects.go.set()
    await store.settle()
    assert not any(key_seq(key) == 1 for key in objects.objects if key.startswith(LOG_PREFIX))
