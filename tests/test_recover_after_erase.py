"""Recover where an erase deleted a key's first version and a forgery is left older (issue 53).

`recover` takes the first stored version of each key for the memory's own. An erase deletes every
version that holds the erased text, a key's first among them, and leaves its rewrite; an agent
that put a version at the key before (a forged erase after deleting the commit, a forged
checkpoint) then holds the oldest one. Found by the simulator: seeds 76 and 225 (commits), 129
(a checkpoint), 218 (a forged erase left as a fork), 303 (recover erased a file written after
an erasure), 1321 (an erase's rewrite of a forged checkpoint left its only version).
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format.changes import Erase, Write
from bucket_memory.format.codec import GENESIS_HASH, Checkpoint, Commit
from bucket_memory.format.packed import decode_checkpoint
from bucket_memory.format.wire_values import checkpoint_key, log_key
from bucket_memory.history.reapplying import Reapplying
from bucket_memory.history.rewriting import Rewriting
from bucket_memory.objects.interface import CREATE, IfMatch
from bucket_memory.state.checkpoint_state import read_checkpoint
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .helpers import overwrite
from .test_erase import SECRET, every_stored_version, leaks

ALICE = Origin(principal_id="alice")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory erase")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)
EVERY_COMMIT = LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1)


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def forge_erase_in_place_of(objects: VersionedMemoryObjectStore, seq: int) -> None:
    """What an agent's DeleteObject and PutObject can do: delete commit `seq` (a delete marker) and
    create the key again with an erase of its own, chained on the commit before, claiming the operator."""
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    before = await store.reader.commit(seq - 1)
    assert before is not None
    await objects.delete([log_key(seq)])
    forged = Commit.create(seq, before.hash, (Erase(path="b.md"),), OPERATOR, at=time.time())
    await objects.put(log_key(seq), forged.encode(), CREATE)


async def test_a_forged_erase_recover_leaves_out_is_not_named_again() -> None:
    """Was (seed 218): recover put the commit back and left the forged erase out, yet every later
    `verify` named it "a commit made off the memory's chain: recover re-applies it", for ever."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "A\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    await forge_erase_in_place_of(objects, 2)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert {problem.key for problem in await admin.verify()} == {log_key(2)}  # void, and rewritten
    assert (await admin.recover(None, origin=OPERATOR)).restoration.repaired == (log_key(2),)

    again = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await again.verify() == []
    assert not (await again.recover(None, origin=OPERATOR)).restoration.changed
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"a.md": "A\n", "b.md": "B\n"}


async def test_a_forgery_an_erase_left_oldest_does_not_displace_the_commit() -> None:
    """Was (seeds 76, 225): once the erase of b.md deleted commit 2's first version, the forged
    erase was the oldest version of log/2 (the erase deletes it now, seed 314): verify called
    every commit above it off the chain, and recover put the forgery back in place of the honest
    commit (or failed: write_unconfirmed)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "A\n", expected=None, origin=ALICE)
    await store.write("b.md", "the acknowledged text\n", expected=None, origin=ALICE)
    await forge_erase_in_place_of(objects, 2)
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    writer = LogFileStore(objects, options=NO_CHECKPOINTS)
    await writer.write("c.md", "C\n", expected=None, origin=ALICE)
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("b.md", origin=OPERATOR)
    # Since seed 314 the erase deletes the forgery too (recover had put the commit back after it).
    for version in await objects.list_versions(log_key(2)):
        left = await objects.get_version(version.key, version.version)
        assert left is not None and Erase(path="b.md") not in (await Commit.read("m", version.key, left)).changes

    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    assert not (await admin.recover(None, origin=OPERATOR)).restoration.changed
    current = await Commit.read("m", log_key(2), await objects.get(log_key(2)) or b"")
    assert not any(isinstance(change, Erase) for change in current.changes)  # the honest commit, erased
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"a.md": "A\n", "c.md": "C\n"}


async def test_a_forged_checkpoint_an_erase_left_oldest_does_not_disprove_the_checkpoint() -> None:
    """Was (seed 129): with the erase's rewrite of the honest checkpoint current and an agent's
    forgery (erased as well) its oldest version, verify named the checkpoint "disproved by its
    log" after every recover, and recover removed the honest checkpoint."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=EVERY_COMMIT)
    await store.write("a.md", "secret\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    await store.settle()
    await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).erase("a.md", origin=OPERATOR)
    key = checkpoint_key(2)
    honest = await objects.get(key)
    assert honest is not None and b"secret" not in honest
    state = await read_checkpoint("m", key, honest, store.format)
    state.apply_change(Write(path="b.md", text="Pay Mallory $10000.\n"), state.head)
    forged = Checkpoint.made(state.checkpoint_content(1000, at=time.time())).encode()
    # The versions the race leaves (an erase rewrote the forgery while it was current; a recover
    # put the honest one back; the erase, run again, rewrote that and deleted the first versions).
    for version in await objects.list_versions(key):
        await objects.delete_version(key, version.version)
    await objects.put(key, forged, CREATE)
    await objects.put(key, honest, IfMatch((await objects.list_versions(key))[-1].version))

    admin = MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT))
    assert await admin.verify() == []
    await admin.recover(None, origin=OPERATOR)
    assert await objects.get(key) == honest
    assert await files_of(LogFileStore(objects, options=EVERY_COMMIT)) == {"b.md": "B\n"}


async def test_a_fork_whose_text_an_erase_removed_is_reapplied_without_it() -> None:
    """Was (in seeds 76 and 225, before the fixes above): re-applying a fork commit that an erase
    had rewritten built a commit with an erased write, which no commit may carry: the model refused
    it and `recover` answered `write_unconfirmed` ("the write may or may not have happened")."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "A\n", expected=None, origin=ALICE)
    head = await store.reader.commit(1)
    assert head is not None
    written = Commit.create(
        2, head.hash, (Write(path="b.md", text="erased\n"), Write(path="c.md", text="C\n")), ALICE, at=time.time()
    )
    fork = written.redacted(lambda index, _: index == 0, 3).authorize(True)
    seq = await Reapplying(store, 1, head.hash).commit(fork, fork.changes)
    assert seq == 2
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"a.md": "A\n", "c.md": "C\n"}


async def test_recover_erases_no_file_written_after_an_erasure() -> None:
    """Was (seed 303): recover finishes every erasure the log holds by running `erase` on its path
    again; where a new file was written at that path since, that erase committed an erasure of it
    (the acknowledged text gone, no operator asking) and deleted the stored versions of its commits."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=EVERY_COMMIT)
    await store.write("a.md", "the erased text\n", expected=None, origin=ALICE)
    admin = MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT))
    await admin.erase("a.md", origin=OPERATOR)
    writer = LogFileStore(objects, options=EVERY_COMMIT)
    await writer.write("a.md", "written after the erasure\n", expected=None, origin=ALICE)
    head = (await writer.reader.list_log())[-1][0]

    await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).recover(None, origin=OPERATOR)
    fresh = LogFileStore(objects, options=EVERY_COMMIT)
    assert await files_of(fresh) == {"a.md": "written after the erasure\n"}
    assert (await fresh.reader.list_log())[-1][0] == head  # no erasure committed
    assert await MemoryAdmin(fresh).verify() == []


async def test_an_overwrite_recover_put_right_is_not_left_oldest_by_an_erase() -> None:
    """Was (seed 314): an agent overwrote commit 2 and recover put it back (log/2's versions:
    honest, forged, honest); compaction deleted the key, and the erase of a.md deleted both honest
    versions (they hold its text) and left the forgery the key's oldest. The next recover took it
    for the memory's: every commit above was "off the chain", re-applied again, acknowledged writes
    lost. The erase deletes the forgery too: recover put it right, so it is no version of the memory."""
    objects = VersionedMemoryObjectStore()
    compacting = dataclasses.replace(EVERY_COMMIT, retain_commits=1, retain_seconds=0, grace_period=0)
    store = LogFileStore(objects, options=EVERY_COMMIT)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    await store.write("a.md", "the erased text\n", expected=None, origin=ALICE)
    honest = await objects.get(log_key(2))
    assert honest is not None
    first = await Commit.read("m", log_key(2), honest)
    forged = Commit.create(2, first.prev, (Write(path="c.md", text="Pay Mallory\n"),), ALICE, at=time.time())
    await overwrite(objects, log_key(2), forged.encode())
    await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).recover(None, origin=OPERATOR)
    assert await objects.get(log_key(2)) == honest
    writer = LogFileStore(objects, options=EVERY_COMMIT)
    for text in ("C1\n", "C2\n", "C3\n"):
        current = {entry.path: entry.version for entry in await writer.list()}
        await writer.write("c.md", text, expected=current.get("c.md"), origin=ALICE)
    await writer.settle()
    await LogFileStore(objects, options=compacting).compact()
    assert await objects.get(log_key(2)) is None  # compacted: its versions are all that is left

    await MemoryAdmin(LogFileStore(objects, options=compacting)).erase("a.md", origin=OPERATOR)
    admin = MemoryAdmin(LogFileStore(objects, options=compacting))
    assert await admin.verify() == []
    versions = await objects.list_versions(log_key(2))
    assert forged.encode() not in [await objects.get_version(version.key, version.version) for version in versions]
    assert not (await admin.recover(None, origin=OPERATOR)).restoration.reapplied
    assert await files_of(LogFileStore(objects, options=compacting)) == {"b.md": "B\n", "c.md": "C3\n"}


def killed_from_the_delete(target: int) -> Faults:
    """A process killed at its `target`-th deletion of a version: it sends nothing after."""
    deletes: list[str] = []

    def script(operation: Operation, key: str, n: int) -> Fault | None:
        if operation == "delete_version":
            deletes.append(key)
        return "crash_before" if len(deletes) >= target else None

    return Faults(script=script)


async def test_an_erase_killed_while_deleting_never_leaves_an_overwrite_recover_put_right_oldest() -> None:
    """Was (seed 2629): as in the test above, log/2's versions are honest, forged, honest; the
    erase deleted the versions together, and killed after deleting both honest ones but not the
    forgery, it left the forgery the oldest, which no later run could tell from the memory's: the
    next recover took every commit above for a fork. The forgery goes first now."""
    compacting = dataclasses.replace(EVERY_COMMIT, retain_commits=1, retain_seconds=0, grace_period=0)
    target = 1
    while True:
        objects = VersionedMemoryObjectStore()
        store = LogFileStore(objects, options=EVERY_COMMIT)
        await store.write("b.md", "B\n", expected=None, origin=ALICE)
        await store.write("a.md", "the erased text\n", expected=None, origin=ALICE)
        first = await Commit.read("m", log_key(2), await objects.get(log_key(2)) or b"")
        forged = Commit.create(2, first.prev, (Write(path="c.md", text="Pay Mallory\n"),), ALICE, at=time.time())
        await overwrite(objects, log_key(2), forged.encode())
        await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).recover(None, origin=OPERATOR)
        await store.write("d.md", "D\n", expected=None, origin=ALICE)
        await store.settle()
        await LogFileStore(objects, options=compacting).compact()
        dying = LogFileStore(FaultyObjectStore(objects, killed_from_the_delete(target)), options=compacting)
        try:
            await MemoryAdmin(dying).erase("a.md", origin=OPERATOR)
            break  # fewer deletions than `target`: every point was tried
        except BaseException:  # the kill, alone or in a group
            pass
        await MemoryAdmin(LogFileStore(objects, options=compacting)).erase("a.md", origin=OPERATOR)
        admin = MemoryAdmin(LogFileStore(objects, options=compacting))
        assert await admin.verify() == [], target
        assert not (await admin.recover(None, origin=OPERATOR)).restoration.reapplied, target
        files = await files_of(LogFileStore(objects, options=compacting))
        assert files == {"b.md": "B\n", "c.md": "Pay Mallory\n", "d.md": "D\n"}, target  # c.md: re-applied
        target += 1
    assert target > 3


async def test_recover_puts_back_the_erased_rewrite_not_the_first_version_an_erase_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was (seed 95): an erase killed after rewriting commit 1 but before deleting its first
    version; an agent overwrote the commit; recover put the first version back (the rewrite keeps
    its hash), the erased text current again and the checkpoint after it disproved."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "the erased text\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)

    async def killed(self: Rewriting, versions: object) -> None:
        return None  # the erase's process died before deleting the old versions

    monkeypatch.setattr(Rewriting, "delete_versions", killed)
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("a.md", origin=OPERATOR)
    monkeypatch.undo()
    forged = Commit.create(1, GENESIS_HASH, (Write(path="a.md", text="Pay Mallory\n"),), ALICE, at=time.time())
    await overwrite(objects, log_key(1), forged.encode())

    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    current = await objects.get(log_key(1))
    assert current is not None and b"the erased text" not in current
    assert await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).verify() == []
    files = await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))  # the forgery's write re-applied
    assert files["b.md"] == "B\n" and "the erased text\n" not in files.values()


async def forged_checkpoint_at_the_head(objects: VersionedMemoryObjectStore, path: str) -> bytes:
    """An agent's checkpoint of the memory's head (its hash named, as a writer's) with `path` rewritten,
    created before any writer's: its bytes."""
    state = (await LogFileStore(objects, options=NO_CHECKPOINTS).state()).copy()
    state.apply_change(Write(path=path, text="Pay Mallory $10000.\n"), state.head)
    forged = Checkpoint.made(state.checkpoint_content(1000, at=time.time())).encode()
    await objects.put(checkpoint_key(state.head), forged, CREATE)
    return forged


async def test_an_erase_rewrites_no_checkpoint_its_log_disproves_until_recover_removes_it() -> None:
    """Was (seed 1321): an agent created checkpoint 3 with notes.md rewritten, and compaction took
    it for the floor. The erase of alice.md rewrote the forgery and deleted its first version and
    commit 2's (both hold the text): with commit 2 gone nothing was left to disprove the rewrite,
    which `verify` then passed, `recover` kept, and cold readers served. Now the erase refuses,
    rewriting nothing; after `recover` removes the forgery, erasing again finishes."""
    objects = VersionedMemoryObjectStore()
    compacting = dataclasses.replace(NO_CHECKPOINTS, retain_commits=1, retain_seconds=0, grace_period=0)
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("notes.md", "the true note\n", expected=None, origin=ALICE)
    await store.write("alice.md", SECRET, expected=None, origin=ALICE)
    await store.write("x.md", "X\n", expected=None, origin=ALICE)
    forged = await forged_checkpoint_at_the_head(objects, "notes.md")
    assert (await LogFileStore(objects, options=compacting).compact()).floor == 3

    with pytest.raises(MemoryStoreError) as refused:
        await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("alice.md", origin=OPERATOR)
    assert refused.value.code == "unavailable" and checkpoint_key(3) in str(refused.value)
    assert "recover" in str(refused.value)
    (left,) = await objects.list_versions(checkpoint_key(3))
    assert await objects.get_version(left.key, left.version) == forged  # not rewritten

    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("alice.md", origin=OPERATOR)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    assert not (await admin.recover(None, origin=OPERATOR)).restoration.changed
    true_files = {"notes.md": "the true note\n", "x.md": "X\n"}
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == true_files == await files_of(store)
    assert leaks(every_stored_version(objects)) == []


async def test_an_erase_deletes_no_version_while_a_checkpoint_its_log_disproves_stands() -> None:
    """Was (seed 5577): an agent created checkpoint 4 with notes.md rewritten; a process that loaded
    it committed an erase of alice.md, a file deleted before (so the forgery holds none of its
    texts and was not one the erase rewrites), checkpointed on it and compacted below it; the erase
    then deleted the versions of the compacted commits that held alice.md's text, and with them
    everything below the forgery that disproved it: `recover` found nothing to repair and cold
    readers served "Pay Mallory" for good. Now the erase refuses before it rewrites or deletes
    anything (the erasure committed, so reads drop the file); `recover` removes the forgery, and
    erasing again finishes."""
    objects = VersionedMemoryObjectStore()
    compacting = dataclasses.replace(NO_CHECKPOINTS, retain_commits=1, retain_seconds=0, grace_period=0)
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("alice.md", SECRET, expected=None, origin=ALICE)
    await store.write("notes.md", "the true note\n", expected=None, origin=ALICE)
    await store.delete("alice.md", expected="1", origin=ALICE)
    await store.write("x.md", "X\n", expected=None, origin=ALICE)
    await forged_checkpoint_at_the_head(objects, "notes.md")
    assert (await LogFileStore(objects, options=compacting).compact()).floor == 4
    versions_before = [(version.key, version.version) for version in await objects.list_versions("")]

    with pytest.raises(MemoryStoreError) as refused:
        await MemoryAdmin(LogFileStore(objects, options=compacting)).erase("alice.md", origin=OPERATOR)
    # The forgery, or the erasure's checkpoint made on it once compaction below it took the forgery's place.
    assert refused.value.code == "unavailable" and checkpoint_key(5) in str(refused.value)
    assert "recover" in str(refused.value)
    left = {(version.key, version.version) for version in await objects.list_versions("")}
    assert left >= set(versions_before), "no version deleted: the log that disproves the forgery stays"

    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("alice.md", origin=OPERATOR)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    true_files = {"notes.md": "the true note\n", "x.md": "X\n"}
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == true_files
    assert leaks(every_stored_version(objects)) == []


@pytest.mark.parametrize("options", [NO_CHECKPOINTS, EVERY_COMMIT], ids=["log", "checkpoints"])
async def test_an_erasure_recover_reapplies_at_a_new_seq_takes_its_marks_along(options: LogOptions) -> None:
    """Was (seed 3859): an agent replaced commit 2 with a commit of its own and the operator's
    erase landed on it at 3; recover re-applied both (at 3 and 4), but commit 1's erased text still
    named commit 3, now the agent's re-applied write, and verify named it "marked erased by a commit
    that erased no such file" after every recover. The mark must follow the erasure, and the text
    must stay erased. So must a checkpoint's mark (else verify says it differs from the log's state)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", SECRET, expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    first = await store.reader.commit(1)
    assert first is not None
    await objects.delete([log_key(2)])
    forged = Commit.create(
        2, first.hash, (Write(path="c.md", text="C\n"),), Origin(principal_id="agent"), at=time.time()
    )
    await objects.put(log_key(2), forged.encode(), CREATE)
    assert (
        await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("a.md", origin=OPERATOR)
    ).erasure == 3

    # With checkpoints, recover's store writes one at 3 (the re-applied write) with the mark as it was.
    done = await MemoryAdmin(LogFileStore(objects, options=options)).recover(None, origin=OPERATOR)
    assert done.restoration.reapplied == ((2, 3), (3, 4))
    marked = await Commit.read("m", log_key(1), await objects.get(log_key(1)) or b"")
    assert [change.erased for change in marked.changes if isinstance(change, Write)] == [4]
    if options is EVERY_COMMIT:
        checkpoint = decode_checkpoint("m", checkpoint_key(3), await objects.get(checkpoint_key(3)) or b"")
        assert checkpoint.content().erased == (("a.md", 4),)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    # A second recover takes the re-marked commit for the erase's rewrite it is: nothing to put back.
    assert not (await admin.recover(None, origin=OPERATOR)).restoration.changed
    assert await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).verify() == []
    assert leaks(every_stored_version(objects)) == []
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"b.md": "B\n", "c.md": "C\n"}
