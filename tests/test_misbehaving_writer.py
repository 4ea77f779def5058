"""One writer with the agents' grants (GetObject, PutObject, DeleteObject under the prefix; no
DeleteObjectVersion) misbehaves on a versioned bucket, and `verify`, `recover` and the live path
hold: each test does what issue 44 found possible, on the versioned in-memory bucket and on moto."""

from __future__ import annotations

import collections
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Change, Erase, Move, Write
from bucket_memory.format.codec import Checkpoint, Commit
from bucket_memory.format.wire_values import checkpoint_key, log_key, reapplication
from bucket_memory.objects.interface import CREATE, IfMatch, ObjectVersion, VersionedObjectStore
from bucket_memory.state.state import State
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .conftest import VERSIONED, unique_prefix

ALICE = Origin(principal_id="alice")
BOB = Origin(principal_id="bob")
MALLORY = Origin(principal_id="mallory")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory recover")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)

type Opener = Callable[..., AbstractAsyncContextManager[LogFileStore]]


@pytest.fixture(params=["memory", "s3"])
def memory(request: pytest.FixtureRequest) -> Opener:
    """Opens a new store (a cold process) on one versioned memory each time it is called."""
    if request.param == "memory":
        objects = VersionedMemoryObjectStore()

        @contextlib.asynccontextmanager
        async def in_memory(options: LogOptions = NO_CHECKPOINTS) -> AsyncIterator[LogFileStore]:
            yield LogFileStore(objects, options=options)

        return in_memory
    request.getfixturevalue("s3_endpoint")
    url = f"s3://{VERSIONED}/{unique_prefix()}"
    return lambda options=NO_CHECKPOINTS: open_store(url, options=options)


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def forge(store: LogFileStore, *changes: Change, seq: int | None = None, prev: str | None = None) -> Commit:
    """Create the next log key (or `seq`) with a commit hashed and chained as the store would."""
    state = await store.state(proven=True)
    commit = Commit.create(
        seq if seq is not None else state.head + 1, prev or state.head_hash, changes, MALLORY, at=time.time()
    )
    await store.objects.put(log_key(commit.seq), commit.encode(), CREATE)
    return commit


def versioned(store: LogFileStore) -> VersionedObjectStore:
    assert isinstance(store.objects, VersionedObjectStore)
    return store.objects


async def overwrite(objects: VersionedObjectStore, key: str, data: bytes) -> None:
    """What the agents' PutObject does to an object that exists."""
    (current,) = [version for version in await objects.list_versions(key) if version.key == key and version.current]
    await objects.put(key, data, IfMatch(current.tag))


async def test_a_commit_whose_changes_do_not_apply_is_void_for_every_reader(memory: Opener) -> None:
    """Was: every fresh read and every write of every agent failed `unavailable`, and `recover`
    and `rollback` failed with it."""
    async with memory() as alice:
        await alice.write("a.md", "A\n", expected=None, origin=ALICE)
        await alice.write("b.md", "B\n", expected=None, origin=ALICE)
        async with memory() as warm:
            await warm.list()
            # The first change applies and the second does not: the commit is void whole.
            void = await forge(alice, Write(path="c.md", text="C\n"), Move(source="nope.md", destination="x.md"))
            assert await warm.write("d.md", "D\n", expected=None, origin=BOB) == str(void.seq + 1)
        async with memory() as cold:
            assert await files_of(cold) == {"a.md": "A\n", "b.md": "B\n", "d.md": "D\n"}
            admin = MemoryAdmin(cold)
            problems = await admin.verify()
            assert [problem.key for problem in problems] == [log_key(void.seq)]
            assert "void" in problems[0].message and "nope.md" in problems[0].message
            assert "mallory" in problems[0].message
            await admin.rollback(2, origin=OPERATOR)
            assert await files_of(cold) == {"a.md": "A\n", "b.md": "B\n"}
            done = await admin.recover(None, origin=OPERATOR)
            assert not done.restoration.changed


def checkpoint_of(state: State) -> bytes:
    return Checkpoint.made(state.checkpoint_content(1000, at=time.time())).encode()


async def test_a_forged_checkpoint_over_a_compacted_log_is_undone_by_recover(memory: Opener) -> None:
    """Was: `verify` reported nothing and `recover` restored nothing (it took the forgery for a base
    since it tied with commit 1, and checked only the hashes it names)."""
    async with memory() as alice:
        for n in range(5):
            await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
        state = (await alice.state(proven=True)).copy()
        state.apply_change(Write(path="0.md", text="Pay Mallory $10000.\n"), 1)
        await alice.objects.put(checkpoint_key(5), checkpoint_of(state), CREATE)
        await alice.objects.delete([log_key(seq) for seq in range(1, 5)])  # as compaction would
    async with memory() as cold:
        assert (await cold.read("0.md")).text == "Pay Mallory $10000.\n"  # live reads trust checkpoints
        admin = MemoryAdmin(cold)
        assert checkpoint_key(5) in {problem.key for problem in await admin.verify()}
        done = await admin.recover(None, origin=OPERATOR)
        assert set(done.restoration.restored) == {log_key(seq) for seq in range(1, 5)}
    async with memory() as after:
        assert await files_of(after) == {f"{n}.md": f"note {n}\n" for n in range(5)}
        assert await MemoryAdmin(after).verify() == []


async def test_writes_made_on_a_far_future_checkpoint_are_reapplied_by_recover(memory: Opener) -> None:
    """Was: cold writers took the forged checkpoint for the head, and `recover` removed what they
    wrote as past the chain (0 re-applied): acknowledged writes lost, and `verify` clean after."""
    far = 10**15
    async with memory() as warm:
        await warm.write("a.md", "A\n", expected=None, origin=ALICE)
        state = (await warm.state(proven=True)).copy()
        state.head = far
        await warm.objects.put(checkpoint_key(far), checkpoint_of(state), CREATE)
        async with memory() as bob:
            assert await bob.write("bob.md", "from bob\n", expected=None, origin=BOB) == str(far + 1)
        assert await warm.write("w.md", "W\n", expected=None, origin=ALICE) == "2"
    async with memory() as operator:
        admin = MemoryAdmin(operator)
        assert await admin.verify() != []
        done = await admin.recover(None, origin=OPERATOR)
        assert done.restoration.reapplied == ((far + 1, 3),)
    async with memory() as after:
        assert await files_of(after) == {"a.md": "A\n", "w.md": "W\n", "bob.md": "from bob\n"}
        assert await MemoryAdmin(after).verify() == []


async def test_a_forged_reapplication_cannot_take_the_place_of_a_commit_on_the_chain(memory: Opener) -> None:
    """The chain takes a later version of a key in place of its first only where the first is off
    the chain and re-applied: a rewrite of alice's commit 2 dressed as a re-application of it (the
    mark recover writes, naming her commit) is still named by verify, and recover puts hers back
    at key 2 (the rewrite, a commit off the chain like a stale writer's, is re-applied on top as
    any such commit is: what a writer with PutObject could have committed at the head anyway)."""
    async with memory() as alice:
        for n in range(3):
            await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
        second = Commit.decode("m", log_key(2), await alice.objects.get(log_key(2)) or b"")
        dressed = Commit.create(
            2,
            second.prev,
            (Write(path="1.md", text="Pay Mallory $10000.\n"),),
            reapplication(second.id),
            at=time.time(),
        )
        await overwrite(versioned(alice), log_key(2), dressed.encode())
    async with memory() as cold:
        admin = MemoryAdmin(cold)
        assert log_key(2) in {problem.key for problem in await admin.verify()}
        await admin.recover(None, origin=OPERATOR)
    async with memory() as after:
        assert await after.objects.get(log_key(2)) == second.encode()
        assert (await MemoryAdmin(after).read_at("1.md", "2")).text == "note 1\n"
        assert await MemoryAdmin(after).verify() == []


async def test_commits_rewritten_and_chained_again_are_named_by_verify_and_put_back(memory: Opener) -> None:
    """Was: anyone who reads the texts and salts re-seals alice's commit 1 with another text, chains
    commits 2 and 3 again and overwrites all three, and `verify` reported nothing."""
    async with memory() as alice:
        for n in range(3):
            await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
        commits = [Commit.decode("m", log_key(seq), await alice.objects.get(log_key(seq)) or b"") for seq in (1, 2, 3)]
        prev = commits[0].prev
        for commit in commits:
            changes = commit.changes
            if commit.seq == 1:
                changes = (Write(path="0.md", text="Pay Mallory $10000.\n"),)
            made = Commit.create(commit.seq, prev, changes, commit.origin, at=commit.moment.timestamp())
            fields = made.model_dump(mode="json", by_alias=True, exclude={"hash"})
            forged = Commit.signed(**{**fields, "id": commit.id, "time": commit.time})  # alice's, as she wrote it
            await overwrite(versioned(alice), log_key(commit.seq), forged.encode())
            prev = forged.hash
    async with memory() as cold:
        assert (await cold.read("0.md")).text == "Pay Mallory $10000.\n"
        admin = MemoryAdmin(cold)
        problems = await admin.verify()
        assert {problem.key for problem in problems} == {log_key(seq) for seq in (1, 2, 3)}
        assert all("rewritten" in problem.message and "recover" in problem.message for problem in problems)
        done = await admin.recover(None, origin=OPERATOR)
        assert set(done.restoration.repaired) == {log_key(seq) for seq in (1, 2, 3)}
    async with memory() as after:
        assert (await after.read("0.md")).text == "note 0\n"
        assert await MemoryAdmin(after).verify() == []


async def test_a_deleted_newest_commit_that_hid_an_acknowledged_write_is_named_and_reapplied(memory: Opener) -> None:
    """Was: one DeleteObject on alice's acknowledged newest commit, and bob, cold, landed his at its
    seq; fresh stores served the version before hers and `verify` reported nothing."""
    async with memory() as alice:
        await alice.write("a.md", "A\n", expected=None, origin=ALICE)
        await alice.write("b.md", "B\n", expected=None, origin=ALICE)
        assert await alice.write("alice.md", "acknowledged\n", expected=None, origin=ALICE) == "3"
        await alice.objects.delete([log_key(3)])
    async with memory() as bob:
        assert await bob.write("bob.md", "bob's\n", expected=None, origin=BOB) == "3"
        admin = MemoryAdmin(bob)
        problems = await admin.verify()
        assert [problem.key for problem in problems] == [log_key(3)] and "rewritten" in problems[0].message
        done = await admin.recover(None, origin=OPERATOR)
        assert done.restoration.repaired == (log_key(3),) and done.restoration.reapplied == ((3, 4),)
    async with memory() as after:
        assert await files_of(after) == {
            "a.md": "A\n",
            "b.md": "B\n",
            "alice.md": "acknowledged\n",
            "bob.md": "bob's\n",
        }
        assert await MemoryAdmin(after).verify() == []


async def test_a_deleted_newest_commit_is_named_by_verify(memory: Opener) -> None:
    async with memory() as alice:
        await alice.write("a.md", "A\n", expected=None, origin=ALICE)
        await alice.write("b.md", "B\n", expected=None, origin=ALICE)
        await alice.objects.delete([log_key(2)])
    async with memory() as operator:
        problems = await MemoryAdmin(operator).verify()
        assert [problem.key for problem in problems] == [log_key(2)] and "deleted" in problems[0].message


async def test_an_erasure_forged_to_vouch_for_a_rewritten_old_commit_is_named_and_undone(memory: Opener) -> None:
    """Was: a writer committed an erasure vouching for alice's format-1 commit with the digest of a
    body it made up, put that body over her commit, and a fresh store read its text as her version 1
    while `verify` exited 0. The bucket keeps her commit as she made it (no agent may delete a
    version; `erase`, run by the operator, deletes the ones that held an erased text)."""
    old_format = LogOptions(erasable=False, checkpoint_min_commits=1000, checkpoint_max_commits=1000)
    async with memory(old_format) as alice:
        await alice.write("0.md", "note 0\n", expected=None, origin=ALICE)
        await alice.write("b.md", "B\n", expected=None, origin=ALICE)
        original = await alice.objects.get(log_key(1))
        assert original is not None and json.loads(original)["format"] == 1
        body = json.loads(original)
        body["changes"] = [
            {"op": "write", "path": "0.md", "text": "Pay Mallory $10000.\n"},
            {"op": "write", "path": "z.md", "erased": 3},
        ]
        made_up = canonical(body)
        digest = Commit.decode("m", log_key(1), made_up).body_digest()
        await forge(alice, Erase(path="z.md", unchecked=((1, digest),)))
        await overwrite(versioned(alice), log_key(1), made_up)
    async with memory() as cold:
        assert (await cold.read("0.md")).text == "Pay Mallory $10000.\n"  # live reads trust the log
        admin = MemoryAdmin(cold)
        problems = {problem.key: problem.message for problem in await admin.verify()}
        assert problems.keys() == {log_key(1), log_key(3)} and "rewritten" in problems[log_key(1)]
        assert "no record of an operator's erasure" in problems[log_key(3)]  # an agent's erasure erases nothing
        await admin.recover(None, origin=OPERATOR)
    async with memory() as after:
        assert (await after.read("0.md")).text == "note 0\n"
        assert [problem.key for problem in await MemoryAdmin(after).verify()] == [log_key(3)]


async def test_a_garbage_checkpoint_stops_no_cold_start_and_no_compaction_deletes_for_it(memory: Opener) -> None:
    """Was: a writer that created the checkpoint key of the head with garbage stopped every cold
    start (`unavailable`), and compaction took it for its anchor and deleted the log below it."""
    at_once = LogOptions(
        grace_period=0, retain_commits=0, retain_seconds=0, checkpoint_min_commits=1000, checkpoint_max_commits=1000
    )
    async with memory(at_once) as alice:
        for n in range(3):
            await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
        await alice.objects.put(checkpoint_key(3), b'{"kind": "checkpoint", "format": 1}', CREATE)
        compaction = await alice.compact()
        assert compaction.log_deleted == 0
    async with memory() as cold:
        assert await files_of(cold) == {f"{n}.md": f"note {n}\n" for n in range(3)}
        assert await cold.write("3.md", "note 3\n", expected=None, origin=BOB) == "4"
        admin = MemoryAdmin(cold)
        assert checkpoint_key(3) in {problem.key for problem in await admin.verify()}
        await admin.recover(None, origin=OPERATOR)
    async with memory() as after:
        assert await files_of(after) == {f"{n}.md": f"note {n}\n" for n in range(4)}
        assert await MemoryAdmin(after).verify() == []


# Found by a review of the first version of the defences above.


async def test_recover_after_erases_over_a_compacted_log_changes_nothing() -> None:
    """An erase deletes the versions of compacted commits that held the text, leaving gaps in the
    first versions: the memory's own history below a gap (a checkpoint, the commits after it) is no
    fork, and `verify` finds nothing (a first take re-applied old commits over newer writes)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("old.md", "old secret\n", expected=None, origin=ALICE)  # 1
    await store.delete("old.md", expected="1", origin=ALICE)  # 2
    await store.write("notes.md", "v3\n", expected=None, origin=ALICE)  # 3
    await objects.put(checkpoint_key(3), checkpoint_of(await store.state(proven=True)), CREATE)
    await store.write("notes.md", "v4\n", expected="3", origin=ALICE)  # 4
    await store.write("secret.md", "ssn\n", expected=None, origin=ALICE)  # 5
    await store.write("notes.md", "v6\n", expected="4", origin=ALICE)  # 6
    await objects.put(checkpoint_key(6), checkpoint_of(await store.state(proven=True)), CREATE)
    await objects.delete([log_key(seq) for seq in range(1, 6)] + [checkpoint_key(3)])  # compaction below 6
    await store.write("notes.md", "v7\n", expected="6", origin=ALICE)  # 7
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    await admin.erase("old.md", origin=OPERATOR)
    await admin.erase("secret.md", origin=OPERATOR)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    done = await admin.recover(None, origin=OPERATOR)
    assert not done.restoration.changed
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"notes.md": "v7\n"}


async def test_a_void_erasure_erases_nothing_in_verify_recover_or_erase() -> None:
    """No reader applies a void commit's erasure, nor may the erasure code: `verify` once told the
    operator to erase alice's live file again, and `recover` did."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    await alice.write("alice.md", "acknowledged\n", expected=None, origin=ALICE)
    await alice.write("b.md", "B\n", expected=None, origin=ALICE)
    await forge(alice, Erase(path="alice.md"), Move(source="nope.md", destination="x.md"))
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert [problem.key for problem in await admin.verify()] == [log_key(3)]
    await admin.recover(None, origin=OPERATOR)
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {
        "alice.md": "acknowledged\n",
        "b.md": "B\n",
    }


async def test_a_void_move_does_not_make_erase_take_another_file() -> None:
    """A void move of a.md onto bob's b.md moved nothing: erasing a.md leaves bob's file alone."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "alice's, to be erased\n", expected=None, origin=ALICE)
    await store.write("b.md", "bob's acknowledged work\n", expected=None, origin=BOB)
    await forge(store, Move(source="a.md", destination="b.md"))
    plan = await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("a.md", origin=OPERATOR)
    assert plan.paths == ("a.md",)
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"b.md": "bob's acknowledged work\n"}


async def test_a_stray_commit_past_a_gap_stops_no_reader_and_no_writer(memory: Opener) -> None:
    """Was: one key created far past the head (hashed and chained to it) stopped every cold start
    ("commit 3 is missing before it") and sent every writer with an old head into reloads. A key
    past a gap is no commit of the log until the log reaches it: readers stop at the gap, writers
    create the next key, `verify` names it and `recover` removes it."""
    recheck_every_time = LogOptions(grace_period=0, checkpoint_min_commits=1000, checkpoint_max_commits=1000)
    async with memory() as alice:
        await alice.write("a.md", "A\n", expected=None, origin=ALICE)
        await alice.write("b.md", "B\n", expected=None, origin=ALICE)
        stray = await forge(alice, Write(path="evil.md", text="x\n"), seq=10**15)
    async with memory(recheck_every_time) as cold:
        assert await files_of(cold) == {"a.md": "A\n", "b.md": "B\n"}
        assert await cold.write("c.md", "C\n", expected=None, origin=BOB) == "3"
        assert await cold.write("d.md", "D\n", expected=None, origin=BOB) == "4"
    async with memory() as operator:
        admin = MemoryAdmin(operator)
        assert log_key(stray.seq) in {problem.key for problem in await admin.verify()}
        await admin.recover(None, origin=OPERATOR)
    async with memory() as after:
        assert await files_of(after) == {"a.md": "A\n", "b.md": "B\n", "c.md": "C\n", "d.md": "D\n"}
        assert await MemoryAdmin(after).verify() == []


class _Counting(VersionedMemoryObjectStore):
    """Counts the requests `verify` sends."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: collections.Counter[str] = collections.Counter()

    async def get(self, key: str) -> bytes | None:
        self.calls["get"] += 1
        return await super().get(key)

    async def list_versions(self, prefix: str) -> list[ObjectVersion]:
        self.calls["list_versions"] += 1
        return await super().list_versions(prefix)

    async def get_version(self, key: str, version: str) -> bytes | None:
        self.calls["get_version"] += 1
        return await super().get_version(key, version)


async def test_what_verify_reads_of_the_versions_is_bounded_by_what_the_bucket_keeps() -> None:
    """The cost docs/operations.md quotes: one listing of versions, each stored commit and
    checkpoint's first version read once, compacted ones included (a memory of 200 commits,
    compacted to 10 live objects: the version listing and 206 reads of first versions)."""
    objects = _Counting()
    options = LogOptions(
        grace_period=0, retain_commits=0, retain_seconds=0, checkpoint_min_commits=32, checkpoint_max_commits=32
    )
    store = LogFileStore(objects, options=options)
    for n in range(200):
        await store.write(f"f{n % 50}.md", f"text {n}\n", expected=None if n < 50 else str(n - 49), origin=ALICE)
    await store.settle()
    await store.compact()
    admin = MemoryAdmin(LogFileStore(objects, options=options))
    objects.calls.clear()
    assert await admin.history.verify() == []
    alone = sum(objects.calls.values())
    objects.calls.clear()
    assert await admin.verify() == []
    firsts = sum(1 for key in objects.stored if key.startswith(("log/", "checkpoints/")))
    assert objects.calls["list_versions"] == 1 and objects.calls["get_version"] == firsts == 206
    assert objects.calls["get"] <= 2 * alone  # the live objects: once to verify, once for the erasures


async def test_a_fork_key_left_below_the_base_is_put_back_with_the_log_up_to_the_base() -> None:
    """A writer whose cached head was older than a wipe created a key below the newest checkpoint,
    and a recover re-applied its commit (the mark is in the log) while the key still held it: no
    cold start reads it, but the retained log no longer chained, and `recover`, which put keys
    below the base back only for forks it had yet to re-apply, left it so (seen as `verify`
    failing after two recovers in the wipe race, tests/test_recover.py, under load)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    for n in range(6):
        await store.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
    await objects.put(checkpoint_key(6), checkpoint_of(await store.state(proven=True)), CREATE)
    await objects.delete([log_key(seq) for seq in range(1, 6)])  # compaction below 6
    stale = await objects.get_version(log_key(2), "2")
    assert stale is not None
    fork = await forge(
        store,
        Write(path="stale.md", text="from a stale head\n"),
        seq=3,
        prev=Commit.decode("m", log_key(2), stale).hash,
    )
    state = await store.state(proven=True)  # a recover re-applied it, as its mark says
    redone = Commit.create(
        7,
        state.head_hash,
        (Write(path="stale.md", text="from a stale head\n"),),
        reapplication(fork.id),
        at=time.time(),
    )
    await objects.put(log_key(7), redone.encode(), CREATE)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert log_key(3) in {problem.key for problem in await admin.verify()}
    await admin.recover(None, origin=OPERATOR)
    after = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await after.verify() == []
    assert (await after.store.read("stale.md")).text == "from a stale head\n"


@pytest.mark.parametrize("verify_after", [False, True])
async def test_a_lineage_forked_by_a_stale_writer_after_a_wipe_is_reapplied_not_taken_for_the_chain(
    verify_after: bool,
) -> None:
    """After a wipe, a writer whose head was older re-created keys 3 and 4 (later versions) and went
    on to 5 and 6, which are first versions, and checkpointed 6. Its checkpoint named commit 1 and
    its own commit 6, so recover took it for the base and its lineage for the memory: the writes
    acknowledged at 3 and 4 before the wipe were left out (seen in the wipe race under load)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    for n in range(1, 5):
        await store.write(f"before/{n}.md", f"before {n}\n", expected=None, origin=ALICE)
    state_at_2 = await MemoryAdmin(store).history.state_at(2)
    await objects.delete([log_key(seq) for seq in range(1, 5)])  # the wipe
    for seq in (1, 2):  # what the stale writer's head held, as recover will find them
        version = (await objects.list_versions(log_key(seq)))[0]
        await objects.put(log_key(seq), await objects.get_version(log_key(seq), version.version) or b"", CREATE)
    prev = state_at_2.head_hash
    for seq in range(3, 7):
        stale = Commit.create(seq, prev, (Write(path=f"stale/{seq}.md", text=f"stale {seq}\n"),), BOB, at=time.time())
        await objects.put(log_key(seq), stale.encode(), CREATE)
        prev = stale.hash
    await objects.put(checkpoint_key(6), checkpoint_of(await LogFileStore(objects).state(proven=True)), CREATE)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    await admin.recover(None, origin=OPERATOR)
    after = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert await files_of(after) == {
        **{f"before/{n}.md": f"before {n}\n" for n in range(1, 5)},
        **{f"stale/{seq}.md": f"stale {seq}\n" for seq in range(3, 7)},
    }
    if verify_after:
        assert await MemoryAdmin(after).verify() == []


async def test_a_process_that_loaded_a_forged_checkpoint_serves_the_log_after_recover() -> None:
    """A process restarts cold between the agent's forged checkpoint and the operator's `recover`:
    it loads the forgery. `recover` puts the checkpoint's first version back, and every process
    started since serves the log's texts, but nothing tells the process that loaded the forgery."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    for n in range(3):
        await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
    state = (await alice.state(proven=True)).copy()
    state.apply_change(Write(path="0.md", text="Pay Mallory $10000.\n"), state.head)
    await objects.put(checkpoint_key(state.head), checkpoint_of(state), CREATE)
    late = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert (await late.read("0.md")).text == "Pay Mallory $10000.\n"  # live reads trust checkpoints
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    await alice.write("3.md", "after the recover\n", expected=None, origin=ALICE)
    cold = await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert cold["0.md"] == "note 0\n"
    assert await files_of(late) == cold
