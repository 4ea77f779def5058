"""Nothing lost under faults: seeded random faults, crashes between steps, compaction, stale heads."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from a13n_harness.providers.memory import Changes, MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.connect import check_create_only
from bucket_memory.format.changes import Move, Write
from bucket_memory.format.wire_values import CHECKPOINT_PREFIX, LOG_PREFIX, checkpoint_key, log_key
from bucket_memory.objects.interface import (
    AlreadyExists,
    Create,
    IfHolds,
    ObjectStore,
    Overwrite,
    PutMode,
    TransientError,
)
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash

from .helpers import replay

ORIGIN = Origin(run_id="faults")
PATHS = ("a.md", "b.md", "c.md", "d/e.md")


@dataclass
class Outcomes:
    """What each writer was told: versions returned, and the unique texts of writes that raised."""

    written: dict[str, str] = field(default_factory=dict)  # text -> version
    moved: list[tuple[str, str, str]] = field(default_factory=list)  # (source, destination, version)
    refused: set[str] = field(default_factory=set)  # texts of writes that raised
    unconfirmed: set[str] = field(default_factory=set)


async def random_writer(store: LogFileStore, name: str, operations: int, seed: int, outcomes: Outcomes) -> None:
    chooser = random.Random(seed)
    for index in range(operations):
        path = chooser.choice(PATHS)
        text = f"{name}-{index}\n"
        try:
            current = {entry.path: entry.version for entry in await store.list()}
            action = chooser.random()
            if path not in current:
                outcomes.written[text] = await store.write(path, text, expected=None, origin=ORIGIN)
            elif action < 0.6:
                outcomes.written[text] = await store.write(path, text, expected=current[path], origin=ORIGIN)
            elif action < 0.8:
                destination = chooser.choice(PATHS)
                version = await store.move(path, destination, expected=current[path], origin=ORIGIN)
                outcomes.moved.append((path, destination, version))
            else:
                await store.delete(path, expected=current[path], origin=ORIGIN)
        except MemoryStoreError as error:
            (outcomes.unconfirmed if error.code == "write_unconfirmed" else outcomes.refused).add(text)


@pytest.mark.parametrize("seed", range(8))
async def test_random_faults_lose_nothing(seed: int) -> None:
    await run_random_faults(seed, writers=4, operations=25)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8, 208))
async def test_random_faults_lose_nothing_at_scale(seed: int) -> None:
    await run_random_faults(seed, writers=6, operations=60)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Audited(MemoryObjectStore):
    """A bucket with versioning, in effect: deleted objects stay readable to the audit."""

    def __init__(self, *, ordered_listing: bool = True) -> None:
        super().__init__(ordered_listing=ordered_listing)
        self.deleted: dict[str, bytes] = {}

    async def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            if key in self.objects:
                self.deleted[key] = self.objects[key][0]
        await super().delete(keys)

    def everything(self) -> MemoryObjectStore:
        """Every object ever created, live or deleted."""
        audit = MemoryObjectStore("audit")
        audit.objects = {key: (data, 0.0) for key, data in self.deleted.items()} | dict(self.objects)
        return audit


async def run_random_faults(seed: int, *, writers: int, operations: int) -> None:
    objects = Audited(ordered_listing=seed % 2 == 0)  # odd seeds catch up by probes, as on S3 Express
    clock = Clock()
    faults = Faults(fail_before=0.07, lose_reply=0.08, refuse=0.04, unmapped=0.02, max_delay=0.001)
    options = LogOptions(
        checkpoint_min_commits=3,
        checkpoint_max_commits=9,
        retain_commits=5,
        retain_seconds=0,
        grace_period=60,
        clock=clock,
    )
    outcomes = Outcomes()
    stores = [
        LogFileStore(FaultyObjectStore(objects, faults, seed=seed * 100 + i), options=options) for i in range(writers)
    ]

    async def compactor() -> None:
        for _ in range(15):
            # Time passes for the server and the writers alike, so checkpoints age past the grace period
            # and heads past half of it. The protocol assumes clocks that agree on the rate of time and
            # requests that finish well within half the grace period; steps of a sixth of it, one per
            # in-flight request at most, keep both true here (steps of half of it broke them).
            objects.clock += 10
            clock.now += 10
            await asyncio.sleep(0.002)
            with contextlib.suppress(MemoryStoreError):
                await stores[0].compact()

    await asyncio.gather(
        *(random_writer(store, f"w{i}", operations, seed * 100 + i, outcomes) for i, store in enumerate(stores)),
        compactor(),
    )
    state, commits = await replay(objects.everything())  # gap-free and hash-chained from seq 1
    texts = {change.text: commit.seq for commit in commits for change in commit.changes if isinstance(change, Write)}
    for text, version in outcomes.written.items():
        assert texts.get(text) == int(version), f"write {text!r} returned {version} but the log disagrees"
    for text in outcomes.refused:
        assert text not in texts, f"write {text!r} raised but happened"
    moves = {
        (change.source, change.destination, str(commit.seq))
        for commit in commits
        for change in commit.changes
        if isinstance(change, Move)
    }
    assert set(outcomes.moved) <= moves
    assert len(texts) == sum(isinstance(c, Write) for commit in commits for c in commit.changes), "each write once"
    fresh = LogFileStore(objects)
    assert {entry.path: entry.version for entry in await fresh.list()} == {
        path: str(live.version) for path, live in state.files.items()
    }
    for path, live in state.files.items():
        assert (await fresh.read(path)).text == live.text


async def test_an_endpoint_that_ignores_create_only_is_refused() -> None:
    class Careless(MemoryObjectStore):
        async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
            self.objects[key] = (data, self.clock)

    with pytest.raises(MemoryStoreError) as caught:
        await check_create_only(Careless())
    assert caught.value.code == "unavailable" and "does not enforce create-only" in str(caught.value)
    await check_create_only(MemoryObjectStore())


def crashing(operation: Operation, key_start: str, when: Fault) -> Faults:
    fired: list[bool] = []

    def script(op: Operation, key: str, n: int) -> Fault | None:
        if op == operation and key.startswith(key_start) and not fired:
            fired.append(True)
            return when
        return None

    return Faults(script=script)


async def test_a_writer_that_dies_after_its_commit_before_the_checkpoint_loses_nothing() -> None:
    objects = MemoryObjectStore()
    options = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=4)
    store = LogFileStore(
        FaultyObjectStore(objects, crashing("create", CHECKPOINT_PREFIX, "crash_before")), options=options
    )
    versions = [await store.write(f"f{i}.md", "x", expected=None, origin=ORIGIN) for i in range(3)]
    # Housekeeping runs after the caller has its result: the write is reported, then the writer dies.
    assert await store.write("f3.md", "x", expected=None, origin=ORIGIN) == "4"
    with pytest.raises(SimulatedCrash):
        await store.settle()
    assert await objects.list(CHECKPOINT_PREFIX) == []
    survivor = LogFileStore(objects, options=options)
    assert [entry.version for entry in await survivor.list()] == [*versions, "4"]
    for index in range(4, 8):
        await survivor.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
    # The survivor counts from the last checkpoint that exists, and writes the one that was missed.
    assert [info.key for info in await objects.list(CHECKPOINT_PREFIX)] == [checkpoint_key(5)]


@pytest.mark.parametrize("when", ["crash_before", "crash_after"])
async def test_a_compaction_that_dies_midway_leaves_a_loadable_memory(when: Fault) -> None:
    objects = MemoryObjectStore()
    options = LogOptions(
        checkpoint_min_commits=1000,
        checkpoint_max_commits=4,
        retain_commits=0,
        retain_seconds=0,
        grace_period=10,
        auto_compact=False,
    )
    store = LogFileStore(objects, options=options)
    for index in range(10):
        await store.write(f"f{index}.md", f"{index}", expected=None, origin=ORIGIN)
    objects.clock += 11
    dying = LogFileStore(FaultyObjectStore(objects, crashing("delete", "", when)), options=options)
    with pytest.raises(SimulatedCrash):
        await dying.compact()
    after = LogFileStore(objects, options=options)
    assert len(await after.list()) == 10
    result = await after.compact()
    assert result.floor == 8
    assert next(info.key for info in await objects.list(LOG_PREFIX)).endswith("00000000000000000008.json")
    assert len(await LogFileStore(objects, options=options).list()) == 10


async def test_a_stale_writer_and_reader_never_act_on_a_compacted_head() -> None:
    """A head older than half the grace period is re-confirmed by listing: a GET of the next seq
    would answer 404 for a compacted key and look fresh, and the writer would commit below the
    newest checkpoint where no reader looks."""
    objects = MemoryObjectStore()
    grace = 100.0
    clock = Clock()
    options = LogOptions(
        grace_period=grace,
        checkpoint_min_commits=1000,
        checkpoint_max_commits=5,
        retain_commits=0,
        retain_seconds=0,
        clock=clock,
    )
    sleeper = LogFileStore(objects, options=options)
    reader = LogFileStore(objects, options=options)
    await sleeper.write("shared.md", "v1", expected=None, origin=ORIGIN)
    cursor = (await reader.changes(None)).cursor
    assert (await reader.read("shared.md")).text == "v1"

    busy = LogFileStore(
        objects,
        options=LogOptions(
            grace_period=grace,
            checkpoint_min_commits=1000,
            checkpoint_max_commits=5,
            retain_commits=0,
            retain_seconds=0,
        ),
    )
    for index in range(12):
        await busy.write(f"other{index}.md", "x", expected=None, origin=ORIGIN)
    objects.clock += grace + 1
    await busy.write("late.md", "x", expected=None, origin=ORIGIN)
    assert (await busy.compact()).floor == 10
    assert await objects.get("log/00000000000000000002.json") is None, "the key after the sleepers' head is gone"

    clock.now += grace / 2 + 1  # both slept past half the grace period
    version = await sleeper.write("shared.md", "v2", expected="1", origin=ORIGIN)
    assert version == "15"
    feed = await reader.changes(cursor)
    assert isinstance(feed, Changes) and "shared.md" in feed.paths and "late.md" in feed.paths
    assert (await reader.read("shared.md")).text == "v2"
    assert (await LogFileStore(objects).read("shared.md")).version == "15"


class Recording(MemoryObjectStore):
    """A bucket that notes every key created again after a deletion: the deletion hazard, caught."""

    def __init__(self, *, ordered_listing: bool = True) -> None:
        super().__init__(ordered_listing=ordered_listing)
        self.deleted: set[str] = set()
        self.recreated: list[str] = []

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        await super().put(key, data, mode)
        if key in self.deleted:
            self.recreated.append(key)

    async def delete(self, keys: Sequence[str]) -> None:
        self.deleted.update(keys)
        await super().delete(keys)


class Gated(FaultyObjectStore):
    """One writer's view of a bucket where a request on `key` is held until `release` is set:
    a create that lands and then loses its reply, or a read answered late, as after retries."""

    def __init__(self, inner: ObjectStore, key: str, *, lose_create: bool) -> None:
        super().__init__(inner)
        self.key, self.lose_create = key, lose_create
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def put(self, key: str, data: bytes, mode: PutMode) -> None:
        if not (self.lose_create and key == self.key and not self.reached.is_set()):
            await super().put(key, data, mode)
            return
        with contextlib.suppress(AlreadyExists):
            await super().put(key, data, mode)
        self.reached.set()
        raise TransientError("reply lost")

    async def get(self, key: str) -> bytes | None:
        data = await super().get(key)
        if key == self.key and data is not None and not self.release.is_set():
            self.reached.set()
            await self.release.wait()
            if self.lose_create:
                raise TransientError("read-back failed")
        return data


OPTIONS = LogOptions(grace_period=60, checkpoint_min_commits=1000, checkpoint_max_commits=4, auto_compact=False)


async def test_a_commit_found_landed_later_confirms_the_head_only_as_of_its_first_attempt() -> None:
    """A create that landed with its reply lost, found on a retry after others committed and a
    checkpoint aged: the writer must not take its commit for the head as of the retry, or it
    re-creates keys that compaction deletes meanwhile (the deletion hazard)."""
    objects, clock = Recording(), Clock()
    gated = Gated(objects, log_key(2), lose_create=True)
    late = LogFileStore(gated, options=replace(OPTIONS, clock=clock))
    await late.write("a.md", "1", expected=None, origin=ORIGIN)
    pending = asyncio.create_task(late.write("b.md", "2", expected=None, origin=ORIGIN))
    await gated.reached.wait()
    others = LogFileStore(objects, options=replace(OPTIONS, clock=clock, retain_commits=0, retain_seconds=0))
    for index in range(3, 7):
        await others.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
    objects.clock += 61  # the checkpoint at 4 ages past the grace period, for server and writers alike
    clock.now += 61
    gated.release.set()
    assert await pending == "2"
    assert (await others.compact()).floor == 4
    await late.write("c.md", "3", expected=None, origin=ORIGIN)
    assert objects.recreated == []
    assert await MemoryAdmin(LogFileStore(objects)).verify() == []


async def test_a_probe_answered_after_half_the_grace_period_proves_nothing() -> None:
    """Catch-up by probes (S3 Express): a first window slowed past half the grace period while
    compaction removed the keys of the next window must not let a 404 there pass for the head."""
    objects, clock = Recording(ordered_listing=False), Clock()
    gated = Gated(objects, log_key(3), lose_create=False)
    late = LogFileStore(gated, options=replace(OPTIONS, clock=clock))
    await late.write("a.md", "1", expected=None, origin=ORIGIN)
    others = LogFileStore(objects, options=replace(OPTIONS, clock=clock, retain_commits=0, retain_seconds=0))
    version = None
    for index in range(2, 41):
        version = await others.write("f.md", f"{index}", expected=version, origin=ORIGIN)
    # Its write loses the race for 2, then catches up by probes from 3; that window is held up.
    pending = asyncio.create_task(late.write("b.md", "2", expected=None, origin=ORIGIN))
    await gated.reached.wait()
    objects.clock += 61  # the checkpoint at 40 ages past the grace period, for server and writers alike
    clock.now += 61
    assert (await others.compact()).floor == 40
    gated.release.set()
    assert await pending == "41"
    assert objects.recreated == []
    assert await MemoryAdmin(LogFileStore(objects)).verify() == []


class LateAnswer(FaultyObjectStore):
    """One reader's view of a bucket whose GET of `key` is answered only once `release` is set,
    with what the bucket holds by then."""

    def __init__(self, inner: ObjectStore, key: str) -> None:
        super().__init__(inner)
        self.key = key
        self.reached, self.release = asyncio.Event(), asyncio.Event()

    async def get(self, key: str) -> bytes | None:
        if key == self.key and not self.release.is_set():
            self.reached.set()
            await self.release.wait()
        return await super().get(key)


async def test_a_freshness_probe_answered_too_late_is_not_taken_for_the_head() -> None:
    """The next commit existed when the probe was sent and was compacted before it was answered:
    the 404 must not pass for "nothing newer", or the read serves a state long gone."""
    objects, clock = Recording(), Clock()
    slow = LateAnswer(objects, log_key(2))
    reader = LogFileStore(slow, options=replace(OPTIONS, clock=clock))
    writer = LogFileStore(objects, options=replace(OPTIONS, clock=clock, retain_commits=0, retain_seconds=0))
    version = await writer.write("f.md", "1", expected=None, origin=ORIGIN)
    assert (await reader.read("f.md")).text == "1"
    for index in range(2, 6):
        version = await writer.write("f.md", f"{index}", expected=version, origin=ORIGIN)
    clock.now += 1  # so the read probes
    pending = asyncio.create_task(reader.read("f.md"))
    await slow.reached.wait()
    objects.clock += 61  # the checkpoint at 4 ages past the grace period, for server and writers alike
    clock.now += 61
    assert (await writer.compact()).floor == 4
    slow.release.set()
    assert (await pending).text == "5"
