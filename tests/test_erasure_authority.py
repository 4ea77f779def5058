"""Erasure against an agent with PutObject under the prefix, and verdicts that never change (issue 53).

An `erase` change in the log is an erasure only where the operator's record under `erasures/` names
its commit; an agent (who may not write there) forging one commits a void change that drops
nothing. A commit's verdict (void or valid) is recorded by the erasure that removes a text it was
checked against, so no later erasure can turn it live.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import pytest
from a13n_harness.providers.memory import MemoryStoreError, Origin
from hypothesis import given
from hypothesis import strategies as st

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format.changes import Change, Edit, Erase, Write
from bucket_memory.format.codec import Commit
from bucket_memory.format.erasure_record import ErasureRecord
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import ERASURES_PREFIX, erasure_record_key, log_key
from bucket_memory.history.rewriting import Redaction, Rewriting
from bucket_memory.objects.interface import CREATE, ObjectVersion, VersionedObjectStore
from bucket_memory.testing.faults import Fault, Faults, FaultyObjectStore, Operation, SimulatedCrash
from bucket_memory.testing.versioned import VersionedMemoryObjectStore
from bucket_memory.transfer import export_snapshot, read_directory

ALICE = Origin(principal_id="alice")
MALLORY = Origin(principal_id="mallory")
# What the forged erasure claims: the operator's own origin.
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory erase")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)
EVERY_COMMIT = LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1)


async def forge(store: LogFileStore, *changes: Change, origin: Origin = MALLORY) -> Commit:
    """What an agent's PutObject can do: the next log key with a commit hashed and chained as the store would."""
    state = await store.state(proven=True)
    commit = Commit.create(state.head + 1, state.head_hash, changes, origin, at=time.time())
    await store.objects.put(log_key(commit.seq), commit.encode(), CREATE)
    return commit


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def texts_held(objects: VersionedObjectStore, text: bytes) -> list[str]:
    """Every stored version (current or not) whose bytes hold `text`."""
    found = []
    for version in await objects.list_versions(""):
        data = await objects.get_version(version.key, version.version)
        if data is not None and text in data:
            found.append(f"{version.key}@{version.version}")
    return found


async def test_an_agents_forged_erasure_drops_nothing_and_recover_deletes_no_version() -> None:
    """Was: every reader dropped contract.md, `restore contract.md 1` said its text was gone for
    good, `rollback` to the commit before left it out, `verify` asked to run `erase` again, and
    `recover` finished the forgery, deleting the only version that held the text."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=NO_CHECKPOINTS)
    await alice.write("contract.md", "the acknowledged contract\n", expected=None, origin=ALICE)
    await alice.write("b.md", "B\n", expected=None, origin=ALICE)
    forged = await forge(alice, Erase(path="contract.md"), origin=OPERATOR)

    assert (await alice.read("contract.md")).text == "the acknowledged contract\n"  # the warm writer
    cold = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert await files_of(cold) == {"contract.md": "the acknowledged contract\n", "b.md": "B\n"}
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert (await admin.read_at("contract.md", "1")).text == "the acknowledged contract\n"
    assert (await admin.preview_restore("contract.md", "1")).written == ()  # nothing to bring back
    assert (await admin.preview_rollback(forged.seq - 1)).deleted == ()
    problems = await admin.verify()
    assert [problem.key for problem in problems] == [log_key(forged.seq)]
    assert "no record of an operator's erasure" in problems[0].message and "erase" not in problems[0].message[:9]
    await admin.recover(None, origin=OPERATOR)
    assert await texts_held(objects, b"the acknowledged contract") != []
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {
        "contract.md": "the acknowledged contract\n",
        "b.md": "B\n",
    }


async def test_a_forged_record_key_or_a_record_of_another_commit_authorizes_nothing() -> None:
    """A record is an erasure's only for the seq, hash and paths it names: one for another commit
    (an operator's erasure of another path, a stale attempt), or one that does not decode, makes a
    forged erasure no erasure."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "A\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    erased = await MemoryAdmin(store).erase("b.md", origin=OPERATOR)
    (record_key,) = [info.key for info in await objects.list(ERASURES_PREFIX)]
    record = await objects.get(record_key)
    assert record is not None and ErasureRecord.decode("m", record_key, record).seq == erased.erasure
    forged = await forge(store, Erase(path="a.md"))
    # The operator's record at another seq, copied under the forged commit's key: it names another commit.
    await objects.put(erasure_record_key(forged.seq, forged.hash), record, CREATE)
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"a.md": "A\n"}


async def test_the_operators_erasure_is_recorded_before_its_commit_and_applies_everywhere() -> None:
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "secret\n", expected=None, origin=ALICE)
    warm = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert await files_of(warm) == {"a.md": "secret\n"}
    plan = await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("a.md", origin=OPERATOR)
    assert plan.erasure is not None
    keys = [info.key for info in await objects.list(ERASURES_PREFIX)]
    assert keys == [erasure_record_key(plan.erasure, (await warm.reader.commit(plan.erasure)).hash)]  # type: ignore[union-attr]
    assert await files_of(warm) == {} and await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {}
    assert await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).verify() == []


async def test_a_store_refuses_to_commit_an_erasure_erase_did_not_record() -> None:
    """A plan that returns an `erase` change (a library caller's own) would commit a change every
    reader finds void: refused before anything is written."""
    store = LogFileStore(VersionedMemoryObjectStore(), options=NO_CHECKPOINTS)
    await store.write("a.md", "A\n", expected=None, origin=ALICE)
    with pytest.raises(MemoryStoreError) as raised:
        await store.commit(lambda state: (Erase(path="a.md"),), ALICE)
    assert raised.value.code == "forbidden"
    assert await files_of(store) == {"a.md": "A\n"}


async def test_an_unrelated_erasure_never_turns_a_void_commit_live() -> None:
    """Was: after the operator erased alice.md, the void commit's other change (payroll.md) applied:
    `read_at` and `preview_rollback` showed it, `verify` called the honest checkpoints after it
    disproved, `recover` removed them, and fresh readers served payroll.md while the warm writer did not."""
    objects = VersionedMemoryObjectStore()
    writer = LogFileStore(objects, options=EVERY_COMMIT)
    await writer.write("alice.md", "alice's notes\n", expected=None, origin=ALICE)
    await writer.settle()
    void = await forge(
        writer,
        Edit(path="alice.md", at=0, removed="not her text", inserted="x", size=5),
        Write(path="payroll.md", text="pay mallory\n"),
    )
    await writer.write("notes.md", "after\n", expected=None, origin=ALICE)
    await writer.settle()
    admin = MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT))
    before = [problem.key for problem in await admin.verify()]
    assert before == [log_key(void.seq)]

    await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).erase("alice.md", origin=OPERATOR)

    admin = MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT))
    with pytest.raises(MemoryStoreError):
        await admin.read_at("payroll.md", str(void.seq))
    assert "payroll.md" not in (await admin.preview_rollback(void.seq)).written
    assert [problem.key for problem in await admin.verify()] == before
    await admin.recover(None, origin=OPERATOR)
    assert await files_of(LogFileStore(objects, options=EVERY_COMMIT)) == {"notes.md": "after\n"}
    assert await files_of(writer) == {"notes.md": "after\n"}
    assert [
        problem.key for problem in await MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT)).verify()
    ] == before
    # The erasure took the void commit's texts of alice.md too: no stored version holds them.
    assert await texts_held(objects, b"not her text") == []


async def test_an_erase_killed_before_rewriting_a_void_commit_leaves_it_void(monkeypatch: pytest.MonkeyPatch) -> None:
    """Was (seed 715): the erase rewrote commits and checkpoints all at once; killed before it
    rewrote the void commit (which records its verdict) but after it rewrote the checkpoint below
    it, the retained log replayed from that checkpoint applied the void edit to an erased text,
    which it no longer failed: the commit turned valid, and `verify` called the erasure's honest
    checkpoint disproved instead (recover would have removed it)."""
    objects = VersionedMemoryObjectStore()
    writer = LogFileStore(objects, options=EVERY_COMMIT)
    await writer.write("alice.md", "alice's notes\n", expected=None, origin=ALICE)
    await writer.write("notes.md", "notes\n", expected=None, origin=ALICE)
    await writer.settle()
    compacting = dataclasses.replace(NO_CHECKPOINTS, retain_commits=1, retain_seconds=0, grace_period=0)
    assert (await LogFileStore(objects, options=compacting).compact()).floor == 2  # read from checkpoint 2 on
    void = await forge(
        writer,
        Edit(path="alice.md", at=0, removed="not her text", inserted="x", size=5),
        Write(path="payroll.md", text="pay mallory\n"),
    )
    rewrite = Rewriting._rewrite

    async def killed_at_the_void_commit(
        self: Rewriting, key: str, redact: Redaction, current: ObjectVersion | None
    ) -> bool:
        if key == log_key(void.seq):
            raise SimulatedCrash("the erase's process was killed before it rewrote the void commit")
        return await rewrite(self, key, redact, current)

    monkeypatch.setattr(Rewriting, "_rewrite", killed_at_the_void_commit)
    with pytest.raises(BaseException):  # noqa: B017, PT011 (the crash, alone or in a group)
        await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("alice.md", origin=OPERATOR)
    monkeypatch.undo()
    for finished in (False, True):  # killed, then run again to the end
        admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
        problems = await admin.verify()  # killed: also the objects the erase has still to rewrite
        assert [problem.key for problem in problems if "void" in problem.message] == [log_key(void.seq)], finished
        assert not [problem for problem in problems if "replays to" in problem.message or "disprove" in problem.message]
        with pytest.raises(MemoryStoreError):
            await admin.read_at("payroll.md", str(void.seq))
        assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"notes.md": "notes\n"}
        await admin.erase("alice.md", origin=OPERATOR)


async def test_an_erase_records_a_void_commits_verdict_before_it_erases_the_text_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was (seed 8135): the erase rewrote every commit several at a time; killed at the void commit
    (whose rewrite records its verdict) after the commit below it that wrote the text its edit was
    checked against had been rewritten, the replay applied the void edit to an erased text, which
    it no longer fails: void turned valid. Now the void commits' rewrites land before any other."""
    objects = VersionedMemoryObjectStore()
    writer = LogFileStore(objects, options=NO_CHECKPOINTS)
    await writer.write("alice.md", "alice's notes\n", expected=None, origin=ALICE)
    await writer.write("notes.md", "notes\n", expected=None, origin=ALICE)
    void = await forge(
        writer,
        Edit(path="alice.md", at=0, removed="not her text", inserted="x", size=5),
        Write(path="payroll.md", text="pay mallory\n"),
    )
    rewrite = Rewriting._rewrite
    rewritten: list[str] = []

    async def killed_at_the_void_commit(
        self: Rewriting, key: str, redact: Redaction, current: ObjectVersion | None
    ) -> bool:
        if key == log_key(void.seq):
            await asyncio.sleep(0)  # the other rewrites of its batch, if any, start first
            raise SimulatedCrash("the erase's process was killed before it rewrote the void commit")
        rewritten.append(key)
        return await rewrite(self, key, redact, current)

    monkeypatch.setattr(Rewriting, "_rewrite", killed_at_the_void_commit)
    with pytest.raises(BaseException):  # noqa: B017, PT011 (the crash, alone or in a group)
        await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).erase("alice.md", origin=OPERATOR)
    monkeypatch.undo()
    assert rewritten == [], "nothing rewritten before the void commit's verdict is recorded"
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert [problem.key for problem in await admin.verify() if "void" in problem.message] == [log_key(void.seq)]
    with pytest.raises(MemoryStoreError):
        await admin.read_at("payroll.md", str(void.seq))
    await admin.erase("alice.md", origin=OPERATOR)
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"notes.md": "notes\n"}


async def test_an_import_after_compaction_never_brings_an_erased_text_back(tmp_path: Path) -> None:
    """Was: `export`, `erase alice.md`, enough commits that compaction pruned the erasure's commit,
    then `import` of the old export: alice.md was back with its text, and `verify` said ok."""
    objects = VersionedMemoryObjectStore()
    compacting = LogOptions(
        checkpoint_min_commits=1, checkpoint_max_commits=1, retain_commits=2, retain_seconds=0, grace_period=0
    )
    store = LogFileStore(objects, options=compacting)
    await store.write("alice.md", "alice's address\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    await store.settle()
    exported = tmp_path / "export"
    await export_snapshot(store, exported)
    plan = await MemoryAdmin(LogFileStore(objects, options=compacting)).erase("alice.md", origin=OPERATOR)
    assert plan.erasure is not None
    for number in range(6):
        await store.write(f"n{number}.md", f"{number}\n", expected=None, origin=ALICE)
        await store.settle()
    await store.compact()
    assert min(seq for seq, _ in await store.reader.list_log()) > plan.erasure  # the erasure's commit is gone

    admin = MemoryAdmin(LogFileStore(objects, options=compacting))
    found = read_directory(exported, store.format)
    assert "alice.md" in found.files
    await admin.put_files(found.files, replace=False, origin=OPERATOR)
    assert "alice.md" not in await files_of(LogFileStore(objects, options=compacting))
    with pytest.raises(MemoryStoreError) as raised:
        await admin.restore("alice.md", "1", origin=OPERATOR)
    assert raised.value.code == "not_found"


async def test_recover_after_a_wipe_puts_the_erasure_records_back_before_the_log() -> None:
    """A wipe of the prefix deletes the records too: without them, the erasure commits recover puts
    back would be void for every reader, and the erased file would be live again (its text gone)."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("a.md", "secret\n", expected=None, origin=ALICE)
    await store.write("b.md", "B\n", expected=None, origin=ALICE)
    await MemoryAdmin(store).erase("a.md", origin=OPERATOR)
    await objects.delete([info.key for info in await objects.list("")])  # `aws s3 rm --recursive`
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert any(problem.key.startswith(ERASURES_PREFIX) for problem in await admin.verify())
    await admin.recover(None, origin=OPERATOR)
    assert [info.key for info in await objects.list(ERASURES_PREFIX)] != []
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {"b.md": "B\n"}
    assert await MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS)).verify() == []


@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=12,
        ).map(lambda value: json.dumps(value).encode()),
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["erasure", "commit"]),
                "format": st.integers(0, 2),
                "seq": st.integers(-1, 10**21),
                "commit": st.sampled_from(["a" * 64, "A" * 64, "a" * 63]),
                "paths": st.lists(st.sampled_from(["a.md", "../x", "/etc", "b.md", ""]), max_size=3),
                "time": st.sampled_from(["2026-12-05T17:00:00.000Z", "2026-13-45T99:99:99.000Z"]),
            }
        ).map(lambda value: json.dumps(value, separators=(",", ":"), sort_keys=True).encode()),
    )
)
def test_an_erasure_record_is_read_as_hostile_bytes(data: bytes) -> None:
    """Whatever bytes lie at a record's key, reading them gives a record that is exactly those
    bytes and names the key's commit, or `CorruptObjectError`: nothing else escapes."""
    key = erasure_record_key(5, "a" * 64)
    try:
        record = ErasureRecord.decode("m", key, data)
    except CorruptObjectError:
        return
    assert record.encode() == data and (record.seq, record.commit) == (5, "a" * 64)
    assert list(record.paths) == sorted(set(record.paths))


async def test_a_failed_read_of_a_run_is_retried_by_recover_not_leaked() -> None:
    """Found by the simulator (errors-mapped): one 503 on the GET of a run ended `recover` with a
    bare TransientError, a traceback for the operator."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    for number in range(4):
        await store.write(f"n{number}.md", f"{number}\n", expected=None, origin=ALICE)
    await objects.put("log/00000000000000000004.run.json", b"not a run", CREATE)  # listed beside the log, then read

    def once(operation: Operation, key: str, count: int) -> Fault | None:
        return "refuse" if operation == "get" and key.endswith(".run.json") and count == 0 else None

    faulty = FaultyObjectStore(objects, Faults(script=once))
    await MemoryAdmin(LogFileStore(faulty, options=NO_CHECKPOINTS)).recover(None, origin=OPERATOR)
    assert await files_of(LogFileStore(objects, options=NO_CHECKPOINTS)) == {f"n{n}.md": f"{n}\n" for n in range(4)}


async def test_recover_removes_the_runs_and_intents_no_reader_reads() -> None:
    """Found by the simulator (recover-repairs): a garbage run or intent an agent left stayed after
    `recover`, and `verify` named it for ever; a valid intent and a key the store does not own stay."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    for number in range(4):
        await store.write(f"n{number}.md", f"{number}\n", expected=None, origin=ALICE)
    garbage = ["log/00000000000000000004.run.json", "pending/0000000000000-00000000000000000003-" + "0" * 32 + ".json"]
    for key in garbage:
        await objects.put(key, b"garbage", CREATE)
    await objects.put("pending/notes.txt", b"not the store's", CREATE)
    admin = MemoryAdmin(LogFileStore(objects, options=NO_CHECKPOINTS))
    assert {problem.key for problem in await admin.verify()} >= set(garbage)
    await admin.recover(None, origin=OPERATOR)
    assert {info.key for info in await objects.list("")} & set(garbage) == set()
    assert await objects.get("pending/notes.txt") == b"not the store's"
    assert [problem.key for problem in await admin.verify()] == ["pending/notes.txt"]


@pytest.mark.parametrize("later", ["delete", "purge"])
async def test_erasing_a_path_never_adopts_an_agents_forged_erase_of_it_a_later_delete_explains(later: str) -> None:
    """Was (seed 1739): `erase` adopts an unrecorded erase of the path it erases as an earlier
    release's (one whose next checkpoint lacks the path), and a later delete of the file made the
    agent's forged erase look so: its verdict turned from void to an erasure, years of history after it
    changed. A checkpoint that lacks the path because a later commit deleted, moved or purged it proves nothing."""
    objects = VersionedMemoryObjectStore()
    alice = LogFileStore(objects, options=EVERY_COMMIT)
    await alice.write("contract.md", "the acknowledged contract\n", expected=None, origin=ALICE)  # 1
    forged = await forge(alice, Erase(path="contract.md"), origin=OPERATOR)  # 2: void
    if later == "delete":  # 3, and a checkpoint without it
        await alice.delete("contract.md", expected="1", origin=ALICE)
    else:
        await alice.purge()
    await alice.write("contract.md", "the new contract\n", expected=None, origin=ALICE)  # 4
    admin = MemoryAdmin(LogFileStore(objects, options=EVERY_COMMIT))
    await admin.erase("contract.md", origin=OPERATOR)
    assert await objects.get(erasure_record_key(forged.seq, forged.hash)) is None
    void = [problem for problem in await admin.verify() if problem.key == log_key(forged.seq)]
    assert void and "no record of an operator's erasure" in void[0].message
