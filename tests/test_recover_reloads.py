"""Processes that applied what `recover` replaced serve the log it put back (issue 53).

A process that loaded a forged commit (it started cold while the forgery stood) built its own
commits on it. `recover` puts the honest commit back and re-applies what was written on the
forgery at the next keys; the process's head is then off the chain, and a recover killed part-way
leaves its re-applications at keys whose first versions are the process's own, as a checkpoint
made again there leaves a later version at a key whose first is the fork's. Found by the
simulator: seeds 475 and 883. A process that loaded a forged checkpoint is told by `recover`'s
reload mark, which a later recover still owes when the removal was not followed by one: seed 2760.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format.changes import Write
from bucket_memory.format.codec import Checkpoint, Commit
from bucket_memory.format.wire_values import checkpoint_key, log_key, run_key
from bucket_memory.history.reapplying import Reapplying
from bucket_memory.log.runs import Run
from bucket_memory.objects.interface import CREATE
from bucket_memory.testing.faults import SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

from .helpers import overwrite

ALICE = Origin(principal_id="alice")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory recover")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)
EVERY_COMMIT = LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1)


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def with_commit_2_overwritten() -> VersionedMemoryObjectStore:
    """A memory of two commits (a.md, b.md) whose commit 2 an agent overwrote with one writing c.md."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    await alice.write("a.md", "A\n", expected=None, origin=ALICE)
    await alice.write("b.md", "the acknowledged text\n", expected=None, origin=ALICE)
    honest = await Commit.read("m", log_key(2), await objects.get(log_key(2)) or b"")
    forged = Commit.create(2, honest.prev, (Write(path="c.md", text="Pay Mallory\n"),), ALICE, at=time.time())
    await overwrite(objects, log_key(2), forged.encode())
    return objects


async def forked() -> tuple[VersionedMemoryObjectStore, LogFileStore]:
    """Commit 2 overwritten by an agent, and a process started cold since that wrote two commits on
    the forgery (3 and 4): what it serves and lists is the fork's."""
    objects = await with_commit_2_overwritten()
    late = LogFileStore(objects, options=NO_CHECKPOINTS)
    await late.write("d.md", "D\n", expected=None, origin=ALICE)
    await late.write("e.md", "E\n", expected=None, origin=ALICE)
    assert set(await files_of(late)) == {"a.md", "c.md", "d.md", "e.md"}
    return objects, late


async def test_a_process_on_a_forged_commit_serves_and_lists_the_log_after_recover() -> None:
    """Was (seed 475): the process's next read met a commit that does not follow its head and
    answered `unavailable` ("corrupt ... restore the object from bucket versioning") though the log
    was whole; loaded again, its listing was brought up to date from the change feed of the
    forked state, and left out b.md, which the fork never had."""
    objects, late = await forked()
    await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    cold = await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert cold["b.md"] == "the acknowledged text\n" and {"d.md", "e.md"} <= set(cold)
    assert await files_of(late) == cold


async def test_a_recover_killed_after_reapplying_at_the_forks_own_key_reapplies_nothing_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was (seed 475): a recover killed after re-applying the first fork commits (at keys 3 and 4,
    whose first versions are the fork's own) left those re-applications as later versions there;
    the next recover took the first versions, called 3 and 4 off the chain, and re-applied
    everything again: each write twice."""
    objects, _ = await forked()
    original = Reapplying.commit
    calls = 0

    async def dying(self: Reapplying, *args: object, **kwargs: object) -> int | None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise SimulatedCrash("recover's process killed before its third re-application")
        return await original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Reapplying, "commit", dying)
    with pytest.raises(SimulatedCrash):
        await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    monkeypatch.undo()
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    await admin.recover(None, origin=OPERATOR)
    assert await admin.verify() == []
    fresh = LogFileStore(objects, options=NO_CHECKPOINTS)
    commits = await fresh.reader.fetch_commits(await fresh.reader.list_log())
    written = [change.text or "" for commit in commits for change in commit.changes if isinstance(change, Write)]
    assert sorted(written) == sorted(["A\n", "the acknowledged text\n", "Pay Mallory\n", "D\n", "E\n"])


async def test_a_checkpoint_made_again_where_a_fork_was_reapplied_is_the_memorys() -> None:
    """Was (seed 883): the process on the forgery checkpointed its commit 3; recover removed both
    and re-applied the fork there, and a checkpoint 3 was made again on the re-applied commit. Its
    first version is still the fork's, so every `verify` after named the true checkpoint "disproved
    by its log", and the next recover removed it."""
    objects = await with_commit_2_overwritten()
    late = LogFileStore(objects, options=EVERY_COMMIT)
    await late.write("d.md", "D\n", expected=None, origin=ALICE)
    await late.settle()  # checkpoint 3, of the fork
    await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).recover(None, origin=OPERATOR)
    assert len(await objects.list_versions(checkpoint_key(3))) == 2  # the fork's, and the one made again

    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert await admin.verify() == []
    assert not (await admin.recover(None, origin=OPERATOR)).restoration.changed
    assert await objects.get(checkpoint_key(3)) is not None
    cold = await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert cold == {"a.md": "A\n", "b.md": "the acknowledged text\n", "c.md": "Pay Mallory\n", "d.md": "D\n"}


class DyingAfterRemoval(VersionedMemoryObjectStore):
    """A bucket whose deleting process is killed once the delete has landed, while `dying`."""

    dying = False

    async def delete(self, keys: Sequence[str]) -> None:
        await super().delete(keys)
        if self.dying:
            raise SimulatedCrash(f"killed after removing {keys}, before anything else")


@pytest.mark.parametrize("remover", ["a recover killed before its mark", "the agent itself"])
async def test_a_process_that_loaded_a_forged_checkpoint_since_removed_is_told_by_the_next_recover(
    remover: str,
) -> None:
    """Was (seed 2760): a recover killed after removing the forged checkpoint and before its reload
    mark left the next recover nothing to repair, so it made no mark, and the process that had
    loaded the forgery served it for good. The same when the agent deletes its own forgery."""
    objects = DyingAfterRemoval()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    for n in range(3):
        await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
    state = (await alice.state(proven=True)).copy()
    state.apply_change(Write(path="0.md", text="Pay Mallory $10000.\n"), state.head)
    forged = checkpoint_key(state.head)
    await objects.put(forged, Checkpoint.made(state.checkpoint_content(1000, at=time.time())).encode(), CREATE)
    late = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert (await late.read("0.md")).text == "Pay Mallory $10000.\n"  # live reads trust checkpoints
    if remover == "the agent itself":
        await objects.delete([forged])
    else:
        objects.dying = True
        with pytest.raises(SimulatedCrash):
            await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
        objects.dying = False
    assert await objects.get(forged) is None
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    marked = (await admin.recover(None, origin=OPERATOR)).restoration.head
    assert marked == 4  # the mark the stopped recover owed
    assert await files_of(late) == await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))
    # Owed once: a recover on the memory as the mark left it commits nothing more.
    assert (await admin.recover(None, origin=OPERATOR)).restoration.head == marked


async def test_a_run_a_writer_made_off_the_restored_chain_never_becomes_recovers_base(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was (the wipe race of test_recover, under load): while `recover` re-applied forks, a writer
    still on the fork committed after the fork's last commit and stored a run of its lineage. The
    recover's store met that commit off its chain and loaded again: the run, vouched for by that
    commit, took it past the break, and the forks' re-applications went on on the fork's lineage,
    off the chain recover had put back; verify named them all after a second recover."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    for n in range(3):
        await alice.write(f"{n}.md", f"note {n}\n", expected=None, origin=ALICE)
    commits = {commit.seq: commit for commit in await alice.reader.fetch_commits(await alice.reader.list_log())}
    # The fork: commit 3 overwritten (as after a wipe), and 4 on it.
    three = Commit.create(3, commits[2].hash, (Write(path="f3.md", text="fork 3\n"),), ALICE, at=time.time())
    await overwrite(objects, log_key(3), three.encode())
    four = Commit.create(4, three.hash, (Write(path="f4.md", text="fork 4\n"),), ALICE, at=time.time())
    await objects.put(log_key(4), four.encode(), CREATE)
    original, calls = Reapplying.commit, 0

    async def writer_on_the_fork_meanwhile(self: Reapplying, *args: object, **kwargs: object) -> int | None:
        nonlocal calls
        calls += 1
        if calls == 2:  # after the first re-application landed at 4: the fork's writer commits 5
            five = Commit.create(5, four.hash, (Write(path="f5.md", text="fork 5\n"),), ALICE, at=time.time())
            await objects.put(log_key(5), five.encode(), CREATE)
            run = Run.made([commits[1], commits[2], three, four, five])
            await objects.put(run_key(5), run.encode(), CREATE)
        return await original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Reapplying, "commit", writer_on_the_fork_meanwhile)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    await admin.recover(None, origin=OPERATOR)
    monkeypatch.undo()
    assert await admin.verify() == []
    cold = await files_of(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert cold == {
        "0.md": "note 0\n",
        "1.md": "note 1\n",
        "2.md": "note 2\n",
        "f3.md": "fork 3\n",
        "f4.md": "fork 4\n",
        "f5.md": "fork 5\n",
    }
