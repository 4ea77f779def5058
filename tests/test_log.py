"""The commit log protocol: request counts, catch-up, checkpoints, ambiguity, and integrity."""

from __future__ import annotations

import asyncio
import json

import pytest
from a13n_harness.providers.memory import Changes, FullResync, MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format.codec import Commit
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import CHECKPOINT_PREFIX, checkpoint_key, log_key
from bucket_memory.log.batch import Lost, Request
from bucket_memory.log.committer import Committed
from bucket_memory.objects.interface import Create, IfHolds, Overwrite
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.state.operations import WriteOp
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore

from .helpers import replay

ORIGIN = Origin(run_id="run", principal_id="me", tool_call_id="call")


async def warm(counted: FaultyObjectStore, **options: object) -> LogFileStore:
    store = LogFileStore(counted, options=LogOptions(**options))  # type: ignore[arg-type]
    await store.list()
    counted.calls.clear()
    return store


async def test_uncontended_write_is_one_create_and_fresh_read_one_get() -> None:
    counted = FaultyObjectStore(MemoryObjectStore())
    store = await warm(counted)
    version = await store.write("a.md", "a", expected=None, origin=ORIGIN)
    assert dict(counted.calls) == {"create": 1}
    await store.write("a.md", "b", expected=version, origin=ORIGIN)
    assert dict(counted.calls) == {"create": 2}
    for read in (
        store.list(),
        store.read("a.md"),
        store.changes("1"),
        store.search("b", regex=False, case_sensitive=False, path="", limit=5),
    ):
        counted.calls.clear()
        await read
        assert dict(counted.calls) == {"get": 1}, "a fresh read is one probe of the next seq"


async def test_bounded_staleness_skips_the_probe() -> None:
    counted = FaultyObjectStore(MemoryObjectStore())
    store = await warm(counted, max_staleness=3600)
    await store.list()
    await store.changes("0")
    assert counted.requests == 0


async def test_a_lost_race_catches_up_and_commits_next() -> None:
    """The log alone (without fleet commit, whose losers go on as intents: tests/test_fleet.py)."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    one, two = LogFileStore(objects), await warm(counted, fleet_commit=False)
    await one.write("a.md", "a", expected=None, origin=ORIGIN)
    await one.write("b.md", "b", expected=None, origin=ORIGIN)
    assert await two.write("c.md", "c", expected=None, origin=ORIGIN) == "3"
    # lose at 1, read it and the three keys after it (2 is there, 3 is not), create at 3
    assert dict(counted.calls) == {"create": 2, "get": 4}


async def test_one_attempt_answers_a_lost_race_and_creates_once() -> None:
    """`Committer.attempt` makes one create and says what became of it: a loss is answered (the
    winner applied to the head), never planned again inside it; the caller's next attempt lands."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    one, two = LogFileStore(objects), await warm(counted)
    await one.write("a.md", "a", expected=None, origin=ORIGIN)
    loop = asyncio.get_running_loop()

    def request() -> Request:
        plan = WriteOp(path="b.md", text="b", expected=None, max_bytes=1 << 20).plan
        return Request(plan, ORIGIN, loop.create_future(), deadline=loop.time() + 60)

    lost = request()
    async with two._log.exclusive():
        assert await two._log.committer.attempt([lost], since=0.0, replanning=False) == Lost()
    assert counted.calls["create"] == 1 and not lost.outcome.done()
    assert two._log.head.seq == 1, "the winner is applied to the head"
    landed = request()
    async with two._log.exclusive():
        attempt = await two._log.committer.attempt([landed], since=0.0)
    assert isinstance(attempt, Committed) and attempt.commit.seq == 2 and landed.outcome.result() == 2


async def test_a_fleet_write_that_loses_its_race_is_answered_not_planned_again() -> None:
    """`try_commit` hands a lost race back to its caller (the fleet, which goes on as an intent); a
    plain `commit` in the same log is planned again and lands."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    one, two = LogFileStore(objects), await warm(counted)
    await one.write("a.md", "a", expected=None, origin=ORIGIN)
    operation = WriteOp(path="b.md", text="b", expected=None, max_bytes=1 << 20)
    assert await two._log.try_commit(operation, ORIGIN) == Lost()
    assert dict(counted.calls) == {"create": 1, "get": 2}, "the winner and one key after it, no catch-up"
    await one.write("c.md", "c", expected=None, origin=ORIGIN)
    assert await two._log.commit(operation.plan, ORIGIN, operation=operation) == 3


@pytest.mark.parametrize("fault", ["fail_before", "lose_reply"])
async def test_an_ambiguous_create_is_settled_by_the_commit_id(fault: Fault) -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects, Faults(script=lambda operation, key, n: fault if (operation, n) == ("create", 0) else None)
    )
    store = LogFileStore(faulty)
    assert await store.write("a.md", "a", expected=None, origin=ORIGIN) == "1"
    assert await store.write("a.md", "b", expected="1", origin=ORIGIN) == "2"
    state, commits = await replay(objects)
    assert [commit.seq for commit in commits] == [1, 2]
    assert state.files["a.md"].text == "b"


async def test_a_commit_that_never_confirms_is_fenced_and_reported_as_not_written() -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects, Faults(script=lambda operation, key, n: "fail_before" if operation == "create" and n < 6 else None)
    )
    store = LogFileStore(faulty)
    with pytest.raises(MemoryStoreError) as caught:
        await store.write("a.md", "a", expected=None, origin=ORIGIN)
    assert caught.value.code == "unavailable"
    state, commits = await replay(objects)
    assert state.files == {} and commits[0].changes == (), "a fence, not our write, holds seq 1"
    assert await store.write("a.md", "a", expected=None, origin=ORIGIN) == "2"


async def test_a_write_whose_reply_is_always_lost_is_still_reported_done() -> None:
    objects = MemoryObjectStore()
    faulty = FaultyObjectStore(
        objects,
        Faults(script=lambda operation, key, n: "lose_reply" if (operation, key) == ("create", log_key(1)) else None),
    )
    store = LogFileStore(faulty)
    assert await store.write("a.md", "a", expected=None, origin=ORIGIN) == "1"
    assert [commit.seq for commit in (await replay(objects))[1]] == [1]


async def test_checkpoints_bound_the_cold_start() -> None:
    objects = MemoryObjectStore()
    options = LogOptions(checkpoint_min_commits=4, checkpoint_max_commits=10)
    store = LogFileStore(objects, options=options)
    version = await store.write("big.md", "x" * 1000, expected=None, origin=ORIGIN)
    for round in range(25):
        version = await store.write("big.md", f"{round}" * 1000, expected=version, origin=ORIGIN)
    checkpoints = [info.key for info in await objects.list(CHECKPOINT_PREFIX)]
    assert checkpoints, "rewriting the live size several times over writes checkpoints"
    newest = int(checkpoints[-1].rpartition("/")[2].split(".")[0])
    counted = FaultyObjectStore(objects)
    cold = LogFileStore(counted, options=options)
    assert (await cold.read("big.md")).text == "24" * 1000
    commits_after = 26 - newest
    assert counted.calls == {"list": 2, "get": 1 + commits_after}


async def test_small_writes_to_a_large_memory_keep_its_cold_start_short() -> None:
    """A memory whose small writes never add up to its live size (the byte rule never fires) is
    still checkpointed every `checkpoint_max_commits` (32): a cold start after any number of writes
    sends at most 2 LISTs and 32 GETs (after 300 small writes it sent 303, replaying them)."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await MemoryAdmin(store).put_files(
        {f"notes/{n}.md": "a settled note\n" * 60 for n in range(200)}, replace=False, origin=ORIGIN
    )
    version = await store.write("todo.md", "0", expected=None, origin=ORIGIN)
    worst = 0
    for round_ in range(1, 100):
        version = await store.write("todo.md", f"{round_}", expected=version, origin=ORIGIN)
        await store.settle()
        counted = FaultyObjectStore(objects)
        assert (await LogFileStore(counted).read("todo.md")).text == f"{round_}"
        assert counted.calls["list"] == 2
        worst = max(worst, counted.calls["get"])
    assert worst <= 32  # a checkpoint and the 31 commits after it, at most
    assert len(await objects.list(CHECKPOINT_PREFIX)) == 3  # one per 32 small commits, no more


async def test_a_young_memory_does_not_checkpoint_every_commit() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    for index in range(20):
        await store.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
    assert await objects.list(CHECKPOINT_PREFIX) == []


async def test_an_import_is_checkpointed_at_once() -> None:
    """A commit of more than 1 MiB would otherwise be replayed, every file described again, by
    every cold start until 31 more commits came."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("small.md", "x", expected=None, origin=ORIGIN)
    files = {f"notes/{n:04d}.md": f"---\ndescription: note {n}\n---\n" + "y" * 2000 for n in range(600)}
    await MemoryAdmin(store).put_files(files, replace=False, origin=ORIGIN)
    await store.settle()
    assert [info.key for info in await objects.list(CHECKPOINT_PREFIX)] == [checkpoint_key(2)]
    counted = FaultyObjectStore(objects)
    assert len(await LogFileStore(counted).list()) == 601
    assert counted.calls == {"list": 2, "get": 1}


async def test_purge_writes_a_checkpoint_and_cold_start_uses_it() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    await store.purge()
    assert [info.key for info in await objects.list(CHECKPOINT_PREFIX)] == [checkpoint_key(2)]
    cold = LogFileStore(objects)
    assert await cold.list() == []
    assert isinstance(await cold.changes("1"), FullResync)
    cursor = (await store.changes(None)).cursor
    assert await cold.changes(cursor) == Changes(cursor=cursor, paths=())


async def test_dropped_tombstones_raise_the_floor() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(
        objects, options=LogOptions(max_tombstones=2, checkpoint_min_commits=1000, checkpoint_max_commits=8)
    )
    for index in range(4):
        version = await store.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
        await store.delete(f"f{index}.md", expected=version, origin=ORIGIN)
    await store.settle()
    name = (await store.changes(None)).cursor.partition("~")[2]
    cold = LogFileStore(objects)
    assert isinstance(await cold.changes(f"3~{name}"), FullResync), "the tombstone of f1 (seq 4) was dropped"
    feed = await cold.changes(f"6~{name}")
    assert isinstance(feed, Changes) and feed.paths == ("f3.md",)


def corrupt_cases() -> list[tuple[str, bytes]]:
    return [("truncated", b'{"kind": "commit", "form'), ("not json", b"\x00\xff garbage"), ("empty", b"")]


@pytest.mark.parametrize(("case", "payload"), corrupt_cases())
async def test_a_corrupt_commit_is_refused_by_name(case: str, payload: bytes) -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    objects.objects[log_key(2)] = (payload, objects.clock)
    await assert_refused(objects, log_key(2))


async def test_a_tampered_commit_fails_its_hash() -> None:
    objects = MemoryObjectStore()
    await LogFileStore(objects).write("a.md", "a", expected=None, origin=ORIGIN)
    body = json.loads(objects.objects[log_key(1)][0])
    body["changes"][0]["text"] = "evil"
    objects.objects[log_key(1)] = (json.dumps(body).encode(), objects.clock)
    await assert_refused(objects, log_key(1))


async def test_a_foreign_or_out_of_chain_commit_is_refused() -> None:
    mine, theirs = MemoryObjectStore(), MemoryObjectStore()
    for objects, text in ((mine, "mine"), (theirs, "theirs")):
        store = LogFileStore(objects)
        await store.write("a.md", text, expected=None, origin=ORIGIN)
        await store.write("b.md", text, expected=None, origin=ORIGIN)
    mine.objects[log_key(2)] = theirs.objects[log_key(2)]  # valid on its own, but follows another commit 1
    await assert_refused(mine, log_key(2))
    mine.objects[log_key(2)] = mine.objects[log_key(1)]  # a commit under the wrong key
    await assert_refused(mine, log_key(2))
    mine.objects[log_key(3)] = mine.objects.pop(log_key(2))  # past a gap: a stray, read by no one
    cold = LogFileStore(mine)
    assert [entry.path for entry in await cold.list()] == ["a.md"]
    assert await cold.write("c.md", "c", expected=None, origin=ORIGIN) == "2"
    assert log_key(3) in {problem.key for problem in await MemoryAdmin(LogFileStore(mine)).verify()}


async def test_a_stray_key_under_log_is_ignored_and_reported() -> None:
    objects = MemoryObjectStore()
    await LogFileStore(objects).write("a.md", "a", expected=None, origin=ORIGIN)
    objects.objects["log/notes.txt"] = (b"hello", objects.clock)
    objects.objects["log/"] = (b"", objects.clock)  # a console's "create folder" placeholder
    cold = LogFileStore(objects)
    assert [entry.path for entry in await cold.list()] == ["a.md"]
    assert await cold.write("b.md", "b", expected=None, origin=ORIGIN) == "2"
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert sorted(problem.key for problem in problems) == ["log/", "log/notes.txt"]
    assert "log/notes.txt" in objects.objects, "verify reports, never deletes"


async def test_a_corrupt_checkpoint_is_refused_where_the_log_below_is_compacted() -> None:
    """Where the log reaches past it, a cold start passes a corrupt checkpoint over (tests/test_hostile.py);
    where compaction left nothing else that holds its state, it refuses it."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    await store.purge()
    data, modified = objects.objects[checkpoint_key(2)]
    objects.objects[checkpoint_key(2)] = (data.replace(b'"floor":2', b'"floor":0'), modified)
    assert [entry.path for entry in await LogFileStore(objects).list()] == []
    del objects.objects[log_key(1)]  # as compaction below it would
    await assert_refused(objects, checkpoint_key(2))


async def assert_refused(objects: MemoryObjectStore, key: str) -> None:
    """A fresh store serves nothing past the corrupt object and writes nothing over history."""
    before = dict(objects.objects)
    store = LogFileStore(objects)
    for operation in (store.list(), store.write("new.md", "n", expected=None, origin=ORIGIN)):
        with pytest.raises(CorruptObjectError) as caught:
            await operation
        assert caught.value.code == "unavailable"
        assert caught.value.key == key and key in str(caught.value)
    assert objects.objects == before


async def test_a_warm_store_refuses_a_corrupt_successor() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects)
    await store.write("a.md", "a", expected=None, origin=ORIGIN)
    objects.objects[log_key(2)] = (b"{}", objects.clock)
    with pytest.raises(CorruptObjectError):
        await store.write("a.md", "b", expected="1", origin=ORIGIN)
    with pytest.raises(CorruptObjectError):
        await store.read("a.md")
    assert objects.objects[log_key(2)][0] == b"{}"


def test_commit_encoding_round_trips() -> None:
    from bucket_memory.format.changes import Delete, Move, Purge, Write

    changes = (Write(path="é.md", text="ü\n"), Delete(path="x"), Move(source="a", destination="b"), Purge())
    commit = Commit.create(7, "ab" * 32, changes, ORIGIN, at=1_700_000_000.123)
    decoded = Commit.decode("memory://t", log_key(7), commit.encode())
    assert decoded == commit


async def test_concurrent_writes_of_one_process_share_commits() -> None:
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects, Faults(latency=0.01))
    store = LogFileStore(counted)
    await store.list()
    counted.calls.clear()
    writers = [Origin(principal_id=f"agent-{index}") for index in range(20)]
    versions = await asyncio.gather(
        *(store.write(f"f{index}.md", f"{index}", expected=None, origin=origin) for index, origin in enumerate(writers))
    )
    assert counted.calls["create"] < 5, "twenty concurrent writes went out in a few group commits"
    state, commits = await replay(objects)
    for index, version in enumerate(versions):
        assert state.files[f"f{index}.md"].version == int(version)
    assert [commit.seq for commit in commits] == list(range(1, len(commits) + 1))
    history = {revision.path: revision.origin.principal_id for revision in await MemoryAdmin(store).revisions()}
    assert history == {f"f{index}.md": f"agent-{index}" for index in range(20)}, "each change keeps its caller"


async def test_a_group_commit_orders_its_callers() -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(FaultyObjectStore(objects, Faults(latency=0.01)))
    base = await store.write("base.md", "b", expected=None, origin=ORIGIN)
    outcomes = await asyncio.gather(
        store.write("same.md", "first", expected=None, origin=ORIGIN),
        store.write("same.md", "second", expected=None, origin=ORIGIN),
        store.write("base.md", "b2", expected=base, origin=ORIGIN),
        store.delete("base.md", expected=base, origin=ORIGIN),
        return_exceptions=True,
    )
    created, refused, rewritten, stale_delete = outcomes
    assert isinstance(created, str) and isinstance(rewritten, str)
    assert isinstance(refused, MemoryStoreError) and refused.code == "version_mismatch"
    assert refused.current is not None and (refused.current.text, refused.current.version) == ("first", created)
    assert isinstance(stale_delete, MemoryStoreError) and stale_delete.code == "version_mismatch"
    assert (await LogFileStore(objects).read("base.md")).text == "b2"


async def test_an_unordered_store_catches_up_by_probing_the_next_seqs() -> None:
    """S3 Express directory buckets list unordered and without start-after: catch up by GETs."""
    objects = MemoryObjectStore(ordered_listing=False)
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=10))
    counted = FaultyObjectStore(objects)
    reader = LogFileStore(counted)
    await reader.list()
    for index in range(25):
        await writer.write(f"f{index}.md", "x", expected=None, origin=ORIGIN)
    counted.calls.clear()
    assert len(await reader.list()) == 25
    # GETs go out 16 at a time: the 25 commits and the 404 after them, plus the rest of the last window.
    assert "list" not in counted.calls
    assert 26 <= counted.calls["get"] <= 26 + 15
    cold = FaultyObjectStore(objects)
    assert len(await LogFileStore(cold).list()) == 25
    assert cold.calls["list"] == 1, "only the checkpoints are listed"
    assert cold.calls["get"] == 1 + 16, "the checkpoint at 20, then one window: commits 21 to 25 and 404s"


async def test_a_write_on_an_old_head_can_prove_it_first_instead_of_losing_a_put() -> None:
    """With `probe_before_write_after`, a writer among many (whose head is usually stale) catches
    up with one GET and a listing instead of a failed PUT, the read of the winner and a listing."""
    objects = MemoryObjectStore()
    other = LogFileStore(objects)
    for probe, failed_creates in ((None, 1), (0.0, 0)):
        counted = FaultyObjectStore(objects)
        mine = LogFileStore(counted, options=LogOptions(probe_before_write_after=probe, fleet_commit=False))
        await mine.list()
        await other.write(f"theirs-{probe}.md", "x", expected=None, origin=Origin(run_id="other"))
        before = counted.calls["create"]
        await mine.write(f"mine-{probe}.md", "y", expected=None, origin=Origin(run_id="mine"))
        assert counted.calls["create"] - before == 1 + failed_creates


@pytest.mark.parametrize("behind", [1, 3, 6])
async def test_a_writer_that_lost_reads_the_winner_and_the_keys_after_it_in_one_round(behind: int) -> None:
    """A loser a few commits behind learns the new head from the GETs of the winner's key and the
    three after it (one 404 among them proves it); further behind, a listing finds the rest (the
    log alone: with fleet commit the loser goes on as an intent)."""
    objects = MemoryObjectStore()
    counted = FaultyObjectStore(objects)
    mine, other = LogFileStore(counted, options=LogOptions(fleet_commit=False)), LogFileStore(objects)
    await mine.list()
    for n in range(behind):
        await other.write(f"theirs/{n}.md", "x", expected=None, origin=Origin(run_id="other"))
    before = dict(counted.calls)
    assert await mine.write("mine.md", "y", expected=None, origin=Origin(run_id="mine")) == str(behind + 1)
    sent = {operation: counted.calls[operation] - before.get(operation, 0) for operation in ("create", "get", "list")}
    listed = 0 if behind < 4 else 1
    assert sent == {"create": 2, "get": 4 + (behind - 4 if listed else 0), "list": listed}
    state, _ = await replay(objects)
    assert sorted(state.files) == sorted(["mine.md", *(f"theirs/{n}.md" for n in range(behind))])


async def test_a_checkpoint_written_while_commits_land_counts_for_them() -> None:
    """A commit planned before a checkpoint landed and made after must count from that checkpoint:
    it used to count from the numbers of the copy it was planned on, and so wrote it again."""
    checkpoint_may_land, checkpoint_landed = asyncio.Event(), asyncio.Event()
    commit_may_land, commit_held = asyncio.Event(), asyncio.Event()
    commit_may_land.set()

    class Gated(MemoryObjectStore):
        async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
            if key.startswith(CHECKPOINT_PREFIX):
                await checkpoint_may_land.wait()
                try:
                    await super().put(key, data, mode)
                finally:
                    checkpoint_landed.set()
                return
            if not commit_may_land.is_set():
                commit_held.set()
                await commit_may_land.wait()
            await super().put(key, data, mode)

    objects = Gated()
    store = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=4, auto_compact=False))
    version = await store.write("a.md", "x" * 100, expected=None, origin=ORIGIN)
    for n in range(3):
        version = await store.write("a.md", f"{n}" * 100, expected=version, origin=ORIGIN)
    commit_may_land.clear()
    fifth = asyncio.create_task(store.write("a.md", "5" * 100, expected=version, origin=ORIGIN))
    await commit_held.wait()  # planned on the state at 4, its create held back
    checkpoint_may_land.set()
    await checkpoint_landed.wait()
    commit_may_land.set()
    version = await fifth
    await store.write("a.md", "6" * 100, expected=version, origin=ORIGIN)
    await store.settle()
    assert [info.key for info in await objects.list(CHECKPOINT_PREFIX)] == [checkpoint_key(4)]
