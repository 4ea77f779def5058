"""History, restore, rollback and verify, on every backend."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin, describe

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.format.wire_values import checkpoint_key, log_key
from bucket_memory.objects.memory import MemoryObjectStore

from .conftest import VERSIONED, StoreFactory, unique_prefix

ALICE = Origin(run_id="run-a", principal_id="alice", tool_call_id="call-1")
BOB = Origin(run_id="run-b", principal_id="bob", tool_call_id="call-2")


async def test_a_files_history_names_every_change_and_who_made_it(store: LogFileStore) -> None:
    v1 = await store.write("notes.md", "one", expected=None, origin=ALICE)
    await store.write("other.md", "x", expected=None, origin=ALICE)
    v2 = await store.write("notes.md", "two", expected=v1, origin=BOB)
    v3 = await store.move("notes.md", "archive/notes.md", expected=v2, origin=BOB)
    await store.delete("archive/notes.md", expected=v3, origin=ALICE)
    revisions = await MemoryAdmin(store).revisions("notes.md")
    assert [(r.version, r.action, r.other, r.origin.principal_id) for r in revisions] == [
        (v3, "moved-out", "archive/notes.md", "bob"),
        (v2, "write", None, "bob"),
        (v1, "write", None, "alice"),
    ]
    assert revisions[1].size == 3 and revisions[1].origin.tool_call_id == "call-2"
    archived = await MemoryAdmin(store).revisions("archive/notes.md")
    assert [(r.action, r.other) for r in archived] == [("delete", None), ("moved-in", "notes.md")]
    assert len(await MemoryAdmin(store).revisions()) == 6


async def test_read_at_any_retained_version(store: LogFileStore) -> None:
    v1 = await store.write("f.md", "first", expected=None, origin=ALICE)
    v2 = await store.write("f.md", "second", expected=v1, origin=ALICE)
    await store.delete("f.md", expected=v2, origin=ALICE)
    assert (await MemoryAdmin(store).read_at("f.md", v1)).text == "first"
    old = await MemoryAdmin(store).read_at("f.md", v2)
    assert (old.text, old.version) == ("second", v2)
    for missing in ("0", "3", "999", "abc"):
        with pytest.raises(MemoryStoreError) as caught:
            await MemoryAdmin(store).read_at("f.md", missing)
        assert caught.value.code == "not_found"
    assert await MemoryAdmin(store).text_at("f.md", "3") is None, "deleted at 3: no text, and no error"
    for missing in ("999", "abc"):
        with pytest.raises(MemoryStoreError) as caught:
            await MemoryAdmin(store).text_at("f.md", missing)
        assert caught.value.code == "not_found"


async def test_restore_is_a_new_commit_and_can_itself_be_undone(store: LogFileStore) -> None:
    v1 = await store.write("f.md", "good", expected=None, origin=ALICE)
    v2 = await store.write("f.md", "bad", expected=v1, origin=BOB)
    restored = await MemoryAdmin(store).restore("f.md", v1, origin=ALICE)
    assert restored is not None and int(restored) > int(v2)
    assert (await store.read("f.md")).text == "good"
    assert (await MemoryAdmin(store).revisions("f.md"))[0].version == restored
    again = await MemoryAdmin(store).restore("f.md", v2, origin=ALICE)
    assert (await store.read("f.md")).text == "bad" and again is not None
    assert await MemoryAdmin(store).restore("f.md", again, origin=ALICE) == again, (
        "restoring the current text changes nothing"
    )
    assert await MemoryAdmin(store).restore("f.md", "0", origin=ALICE) is None, (
        "restoring to before it existed deletes it"
    )
    with pytest.raises(MemoryStoreError):
        await store.read("f.md")


async def test_rollback_of_the_whole_memory(store: LogFileStore) -> None:
    await store.write("a.md", "a1", expected=None, origin=ALICE)
    await store.write("dir/b.md", "b1", expected=None, origin=ALICE)
    mark = int((await store.changes(None)).cursor.partition("~")[0])
    await store.write("a.md", "a2", expected="1", origin=BOB)
    await store.delete("dir/b.md", expected="2", origin=BOB)
    await store.write("dir", "now a file where a directory was", expected=None, origin=BOB)
    seq = await MemoryAdmin(store).rollback(mark, origin=ALICE)
    assert seq == 6
    assert {e.path: (await store.read(e.path)).text for e in await store.list()} == {"a.md": "a1", "dir/b.md": "b1"}
    assert await MemoryAdmin(store).rollback(mark, origin=ALICE) is None
    await MemoryAdmin(store).rollback(5, origin=ALICE)  # and back again
    assert sorted(e.path for e in await store.list()) == ["a.md", "dir"]
    assert await MemoryAdmin(store).seq_at(datetime.now(UTC)) == 7
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(store).seq_at(datetime.now(UTC) - timedelta(days=1))
    assert caught.value.code == "not_found"


async def test_history_below_the_retained_log_is_not_found() -> None:
    objects = MemoryObjectStore()
    options = LogOptions(
        checkpoint_min_commits=1000, checkpoint_max_commits=3, retain_commits=0, retain_seconds=0, grace_period=1
    )
    store = LogFileStore(objects, options=options)
    for index in range(7):
        await store.write(f"f{index}.md", "x", expected=None, origin=ALICE)
    objects.clock += 2
    assert (await store.compact()).floor == 6
    assert (await MemoryAdmin(store).read_at("f5.md", "6")).version == "6"
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(store).read_at("f1.md", "2")
    assert caught.value.code == "not_found" and "is older than the retained history" in str(caught.value)
    assert "which holds commits 6 to 7" in str(caught.value) and "recover --as-of" in str(caught.value)
    with pytest.raises(MemoryStoreError) as caught:
        await MemoryAdmin(store).read_at("f1.md", "8")
    assert caught.value.code == "not_found" and "There is no commit 8 yet: the newest commit" in str(caught.value)
    assert "recover" not in str(caught.value), "no commit to bring back: it was never made"
    assert [r.version for r in await MemoryAdmin(store).revisions()] == ["7", "6"]


async def test_verify_finds_every_kind_of_damage(open_memory: StoreFactory) -> None:
    objects = MemoryObjectStore()
    store = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=3))
    for index in range(7):
        await store.write(f"f{index}.md", f"{index}", expected=None, origin=ALICE)
    assert await MemoryAdmin(store).verify() == []
    pristine = dict(objects.objects)

    def damaged(key: str, data: bytes | None) -> list[tuple[str, str]]:
        objects.objects = dict(pristine)
        if data is None:
            del objects.objects[key]
        else:
            objects.objects[key] = (data, 0.0)
        return []

    cases = {
        "truncated": (log_key(4), b'{"kind":'),
        "missing": (log_key(4), None),
        "foreign": (log_key(4), pristine[log_key(5)][0]),
        "bad checkpoint": (checkpoint_key(3), pristine[checkpoint_key(6)][0]),
        "stray": ("log/readme.txt", b"hello"),
    }
    for name, (key, data) in cases.items():
        damaged(key, data)
        problems = await MemoryAdmin(LogFileStore(objects)).verify()
        assert problems, name
        assert any(problem.key in (key, log_key(5)) for problem in problems), (name, problems)
    objects.objects = dict(pristine)
    data = pristine[checkpoint_key(6)][0].replace(b'"5"', b'"X"')
    objects.objects[checkpoint_key(6)] = (data, 0.0)
    assert [p.key for p in await MemoryAdmin(LogFileStore(objects)).verify()] == [checkpoint_key(6)]


async def test_verify_on_every_backend(store: LogFileStore) -> None:
    await store.write("a.md", "a", expected=None, origin=ALICE)
    await store.purge()
    await store.write("a.md", "b", expected=None, origin=ALICE)
    await store.settle()  # housekeeping done: the objects verify lists are the ones it reads
    listed = sum([len(await store.objects.list(folder)) for folder in ("log/", "checkpoints/")])
    seen: list[tuple[int, int]] = []
    assert await MemoryAdmin(store).verify(lambda done, total: seen.append((done, total))) == []
    assert seen[-1] == (listed, listed) and listed >= 3


@pytest.mark.slow  # two writer processes with skewed clocks, about 10 s
def test_times_come_from_the_server_when_writers_clocks_disagree(s3_endpoint: str) -> None:
    """Two writers ten minutes fast and ten minutes slow: looking up a time still splits the log
    where the server's clock did, for rollback and for recovery from versions alike."""
    url = f"s3://{VERSIONED}/{unique_prefix()}"

    def write(skew: int, path: str) -> None:
        command = [sys.executable, "-m", "tests.skewed_writer", url, str(skew), path, f"{path} text\n"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr

    write(+600, "fast-before.md")
    write(-600, "slow-before.md")
    # Not synchronization: the split must fall clear of the Date header's whole seconds.
    time.sleep(2.5)
    split = datetime.now(UTC)
    time.sleep(2.5)
    write(+600, "fast-after.md")
    write(-600, "slow-after.md")

    async def look_up() -> tuple[int, set[str]]:
        async with open_store(url) as store:
            admin = MemoryAdmin(store)
            recovered = (await admin.recovery.state_as_of(split)).state
            return await admin.seq_at(split), set(recovered.files)

    seq, recovered = asyncio.run(look_up())
    assert seq == 2, "exactly the two commits made before the split"
    assert recovered == {"fast-before.md", "slow-before.md"}


FRONTMATTER = {f"notes/{n}.md": f"---\ndescription: Note {n}\ntags: [a]\n---\nbody {n}\n" for n in range(20)}


async def checkpointed(objects: MemoryObjectStore) -> int:
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    await MemoryAdmin(writer).put_files(FRONTMATTER, replace=False, origin=Origin(run_id="describe"))
    await writer.write("last.md", "last\n", expected=None, origin=Origin(run_id="describe"))
    await writer.settle()
    return (await writer.reader.list_checkpoints())[-1][0]


async def test_a_cold_start_takes_descriptions_from_the_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing every file's frontmatter again was 98% of a cold start at 10,000 files."""
    import bucket_memory.state.state

    objects = MemoryObjectStore()
    await checkpointed(objects)
    calls: list[str] = []
    real = describe

    def counted(text: str, fmt: Any) -> str | None:
        calls.append(text)
        return real(text, fmt)

    monkeypatch.setattr(bucket_memory.state.state, "describe", counted)
    entries = {entry.path: entry.description for entry in await LogFileStore(objects).list()}
    assert entries["notes/7.md"] == "Note 7"
    assert not [text for text in calls if text.startswith("---")], "no frontmatter parsed again"
    # A store with other description limits makes them again, under its own.
    short = {
        entry.path: entry.description
        for entry in await LogFileStore(objects, format=FileFormat(description_chars=4)).list()
    }
    made_again = [text for text in calls if text.startswith("---")]
    assert short["notes/7.md"] is None, "too long for 4 characters: listed without one, as the harness does"
    assert len(made_again) == 20


async def test_verify_finds_a_checkpoint_whose_descriptions_lie() -> None:
    from bucket_memory.format.packed import decode_checkpoint

    objects = MemoryObjectStore()
    seq = await checkpointed(objects)
    key = checkpoint_key(seq)
    honest = decode_checkpoint("memory://memory", key, objects.objects[key][0])
    content = honest.content()
    assert content.descriptions is not None
    lies = tuple("buy this stock" if description else description for description in content.descriptions)
    objects.objects[key] = (type(honest).made(content._replace(descriptions=lies)).encode(), objects.clock)
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert [(problem.key, "differ" in problem.message) for problem in problems] == [(key, True)]


class _CompactingWhileRead(MemoryObjectStore):
    """A bucket where compaction deletes the oldest checkpoint just as `verify` comes to read it."""

    def __init__(self) -> None:
        super().__init__()
        self.compacting: str | None = None

    async def get(self, key: str) -> bytes | None:
        if key == self.compacting:
            self.compacting = None
            await self.delete([key])
        return await super().get(key)


async def test_verify_does_not_take_an_object_compaction_deleted_for_damage() -> None:
    """verify lists, then reads: on a live memory compaction can delete a superseded checkpoint in
    between. That is the memory working, not damage (a `make test` run reported it as damage)."""
    objects = _CompactingWhileRead()
    store = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1))
    for index in range(3):
        await store.write(f"f{index}.md", "text\n", expected=None, origin=ALICE)
    await store.settle()
    checkpoints = [info.key for info in await objects.list("checkpoints/")]
    assert len(checkpoints) > 1, "a superseded checkpoint to delete"
    objects.compacting = checkpoints[0]
    assert await MemoryAdmin(store).verify() == []
    assert objects.compacting is None, "the checkpoint vanished while verify read it"
