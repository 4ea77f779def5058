"""The harness file memory contract, on every backend (the `objects` fixture in conftest)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from a13n_harness.providers.memory import (
    Changes,
    FileFormat,
    FileStore,
    FullResync,
    MemoryStoreError,
    Origin,
    SearchableFileStore,
)

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.objects.local import LocalObjectStore
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.runtime import telemetry

from .conftest import StoreFactory
from .helpers import replay

ORIGIN = Origin(run_id="run-1", principal_id="tester", tool_call_id="call-1")


async def create(store: LogFileStore, path: str, text: str) -> str:
    return await store.write(path, text, expected=None, origin=ORIGIN)


async def refused(code: str, operation: object) -> MemoryStoreError:
    assert asyncio.iscoroutine(operation)
    with pytest.raises(MemoryStoreError) as caught:
        await operation
    assert caught.value.code == code, str(caught.value)
    return caught.value


def test_satisfies_the_harness_protocols(store: LogFileStore) -> None:
    assert isinstance(store, FileStore)
    assert isinstance(store, SearchableFileStore)


async def test_create_read_list(store: LogFileStore) -> None:
    assert await store.list() == []
    await refused("not_found", store.read("notes/tea.md"))
    version = await create(store, "notes/tea.md", "---\ndescription: Teas we like\n---\nGreen.\n")
    other = await create(store, "a.md", "héllo\nsecond line\n")
    assert version == "1" and other == "2"
    file = await store.read("notes/tea.md")
    assert (file.path, file.version) == ("notes/tea.md", "1")
    assert file.text.endswith("Green.\n")
    entries = await store.list()
    assert [(entry.path, entry.version, entry.size, entry.description) for entry in entries] == [
        ("a.md", "2", len("héllo\nsecond line\n".encode()), "héllo"),
        ("notes/tea.md", "1", len(file.text.encode()), "Teas we like"),
    ]


async def test_update_requires_the_current_version(store: LogFileStore) -> None:
    first = await create(store, "f.md", "one")
    second = await store.write("f.md", "two", expected=first, origin=ORIGIN)
    assert int(second) > int(first)
    stale = await refused("version_mismatch", store.write("f.md", "three", expected=first, origin=ORIGIN))
    assert stale.current is not None and (stale.current.text, stale.current.version) == ("two", second)
    taken = await refused("version_mismatch", create(store, "f.md", "again"))
    assert taken.current is not None and taken.current.version == second
    missing = await refused("version_mismatch", store.write("gone.md", "x", expected="1", origin=ORIGIN))
    assert missing.current is None
    assert (await store.read("f.md")).text == "two"


async def test_identical_text_changes_nothing(store: LogFileStore) -> None:
    version = await create(store, "f.md", "same")
    cursor = (await store.changes(None)).cursor
    assert await store.write("f.md", "same", expected=version, origin=ORIGIN) == version
    assert await store.changes(cursor) == Changes(cursor=cursor, paths=())
    await refused("version_mismatch", store.write("f.md", "same", expected="999", origin=ORIGIN))


async def test_delete(store: LogFileStore) -> None:
    version = await create(store, "f.md", "x")
    await refused("version_mismatch", store.delete("missing.md", expected="1", origin=ORIGIN))
    wrong = await refused("version_mismatch", store.delete("f.md", expected="7", origin=ORIGIN))
    assert wrong.current is not None and wrong.current.version == version
    await store.delete("f.md", expected=version, origin=ORIGIN)
    await refused("not_found", store.read("f.md"))
    assert await store.list() == []
    gone = await refused("version_mismatch", store.delete("f.md", expected=version, origin=ORIGIN))
    assert gone.current is None


async def test_move(store: LogFileStore) -> None:
    version = await create(store, "a/old.md", "text")
    await create(store, "taken.md", "other")
    moved = await store.move("a/old.md", "b/new.md", expected=version, origin=ORIGIN)
    assert (await store.read("b/new.md")).version == moved
    assert (await store.read("b/new.md")).text == "text"
    await refused("not_found", store.read("a/old.md"))
    taken = await refused("already_exists", store.move("b/new.md", "taken.md", expected=moved, origin=ORIGIN))
    assert taken.current is not None and taken.current.text == "other"
    onto_itself = await refused("already_exists", store.move("b/new.md", "b/new.md", expected=moved, origin=ORIGIN))
    assert onto_itself.current is not None and onto_itself.current.path == "b/new.md"
    missing = await refused("version_mismatch", store.move("nope.md", "x.md", expected="1", origin=ORIGIN))
    assert missing.current is None and "nope.md does not exist now; it was expected at version 1" in str(missing)
    await refused("version_mismatch", store.move("b/new.md", "x.md", expected=version, origin=ORIGIN))
    assert [entry.path for entry in await store.list()] == ["b/new.md", "taken.md"]


async def test_dependencies_are_checked_first_and_atomically(store: LogFileStore) -> None:
    a = await create(store, "a.md", "a")
    b = await create(store, "b.md", "b")
    b2 = await store.write("b.md", "b2", expected=b, origin=ORIGIN)
    stale = await refused(
        "read_conflict", store.write("a.md", "a2", expected=a, origin=ORIGIN, dependencies={"b.md": b})
    )
    assert stale.current is not None and (stale.current.text, stale.current.version) == ("b2", b2)
    assert f"(it is at version {b2}; the memory's newest commit is {b2})" in str(stale)
    # Checked before `expected`: both wrong gives read_conflict.
    await refused("read_conflict", store.write("a.md", "a2", expected="99", origin=ORIGIN, dependencies={"b.md": b}))
    absent = await refused(
        "read_conflict", store.write("a.md", "a2", expected=a, origin=ORIGIN, dependencies={"b.md": None})
    )
    assert absent.current is not None and absent.current.path == "b.md"
    missing = await refused(
        "read_conflict", store.write("a.md", "a2", expected=a, origin=ORIGIN, dependencies={"c.md": "3"})
    )
    assert missing.current is None and "c.md changed since it was observed (it does not exist now;" in str(missing)
    await refused("invalid_path", store.write("a.md", "a2", expected=a, origin=ORIGIN, dependencies={"../x": None}))
    for operation in (
        store.move("a.md", "z.md", expected=a, origin=ORIGIN, dependencies={"b.md": b}),
        store.delete("a.md", expected=a, origin=ORIGIN, dependencies={"b.md": b}),
    ):
        await refused("read_conflict", operation)
    assert (await store.read("a.md")).text == "a", "a refused mutation had no effect"
    ok = await store.write("a.md", "a2", expected=a, origin=ORIGIN, dependencies={"b.md": b2, "c.md": None, "a.md": a})
    assert (await store.read("a.md")).version == ok


async def test_format_rules(open_memory: StoreFactory) -> None:
    store = open_memory(format=FileFormat(max_file_bytes=40, path_bytes=12))
    await create(store, "é.md", "é" * 20)  # 40 bytes exactly
    await refused("too_large", create(store, "big.md", "é" * 20 + "a"))
    await refused("invalid_file", create(store, "fm.md", "---\ndescription: [unclosed\n"))
    await refused("invalid_file", create(store, "fm.md", "---\n- a list\n---\nbody"))
    await refused("invalid_file", create(store, "s.md", "\ud800"))
    for path in ("", "/abs", "dir/", "a/../b", "a//b", "a\\b", "tab\there", "x" * 13):
        await refused("invalid_path", create(store, path, "x"))
    await refused("invalid_path", store.read("../etc"))
    assert [entry.path for entry in await store.list()] == ["é.md"]


async def test_paths_are_nfc(store: LogFileStore) -> None:
    decomposed = "cafe\u0301/☕.md"
    version = await create(store, decomposed, "x")
    assert (await store.read("caf\u00e9/☕.md")).version == version
    assert [entry.path for entry in await store.list()] == ["caf\u00e9/☕.md"]
    await refused("version_mismatch", create(store, "caf\u00e9/☕.md", "again"))


async def test_a_file_cannot_be_a_directory(store: LogFileStore) -> None:
    await create(store, "a", "file")
    await refused("invalid_path", create(store, "a/b.md", "x"))
    await create(store, "d/e.md", "x")
    await refused("invalid_path", create(store, "d", "x"))
    version = (await store.read("d/e.md")).version
    # Moving the only file of a directory onto the directory's name leaves no conflict behind.
    await store.move("d/e.md", "d", expected=version, origin=ORIGIN)
    assert [entry.path for entry in await store.list()] == ["a", "d"]


async def test_memory_full(open_memory: StoreFactory) -> None:
    store = open_memory(max_bytes=10)
    version = await create(store, "a.md", "12345678")
    await refused("memory_full", create(store, "b.md", "123"))
    await refused("memory_full", store.write("a.md", "12345678901", expected=version, origin=ORIGIN))
    shorter = await store.write("a.md", "1", expected=version, origin=ORIGIN)
    await create(store, "b.md", "123")
    assert [(entry.path, entry.version) for entry in await store.list()] == [("a.md", shorter), ("b.md", "3")]


async def test_the_quota_counts_the_bytes_the_memory_stores(open_memory: StoreFactory) -> None:
    """A control character is one byte of text but six in a commit (JSON's escape): the quota
    counts the six, so a memory within its quota is within it in the bucket too."""
    store = open_memory(max_bytes=70)
    await create(store, "a.md", "\x01" * 10)  # 10 bytes of text, 60 stored
    await refused("memory_full", create(store, "b.md", "\x02" * 2))
    await create(store, "b.md", "tenletters")
    assert sum(entry.size for entry in await store.list()) == 20, "listed sizes stay those of the text"
    assert (await MemoryAdmin(store).stats()).bytes == 70


async def test_changes_feed(store: LogFileStore) -> None:
    first = await store.changes(None)
    assert isinstance(first, FullResync)
    assert await store.changes(first.cursor) == Changes(cursor=first.cursor, paths=())
    a = await create(store, "a.md", "a")
    await create(store, "b.md", "b")
    after = await store.changes(first.cursor)
    assert isinstance(after, Changes) and after.paths == ("a.md", "b.md")
    moved = await store.move("a.md", "c.md", expected=a, origin=ORIGIN)
    await store.delete("b.md", expected="2", origin=ORIGIN)
    later = await store.changes(after.cursor)
    assert isinstance(later, Changes) and later.paths == ("a.md", "b.md", "c.md")
    assert later.cursor.partition("~")[0] == str(int(moved) + 1)
    for garbage in ("not-a-cursor", "-1", "\uff11", "999999"):
        assert isinstance(await store.changes(garbage), FullResync)


async def test_cursor_is_taken_before_the_content(open_memory: StoreFactory) -> None:
    reader, writer = open_memory(), open_memory()
    await create(writer, "a.md", "a")
    feed = await reader.changes(None)
    await create(writer, "b.md", "b")  # lands after the cursor, before the reader lists
    assert [entry.path for entry in await reader.list()] == ["a.md", "b.md"]
    again = await reader.changes(feed.cursor)
    assert isinstance(again, Changes) and again.paths == ("b.md",), "a change made meanwhile is listed again"


async def test_purge(store: LogFileStore) -> None:
    old = await create(store, "a.md", "a")
    await create(store, "dir/b.md", "b")
    before = (await store.changes(None)).cursor
    await store.purge()
    await store.purge()
    assert await store.list() == []
    assert isinstance(await store.changes(before), FullResync)
    cursor = (await store.changes(None)).cursor
    again = await create(store, "a.md", "new")
    assert int(again) > int(old), "versions are never reused"
    feed = await store.changes(cursor)
    assert isinstance(feed, Changes) and feed.paths == ("a.md",)
    await refused("version_mismatch", store.write("a.md", "x", expected=old, origin=ORIGIN))


async def test_another_instance_sees_every_commit(open_memory: StoreFactory) -> None:
    one, two = open_memory(), open_memory()
    version = await create(one, "f.md", "1")
    assert (await two.read("f.md")).version == version
    newer = await one.write("f.md", "2", expected=version, origin=ORIGIN)
    # `two` still caches version 1: its write must catch up and then fail, carrying the file as it is.
    stale = await refused("version_mismatch", two.write("f.md", "3", expected=version, origin=ORIGIN))
    assert stale.current is not None and stale.current.version == newer
    # And a write that is valid against the new head succeeds after catching up.
    await one.write("g.md", "g", expected=None, origin=ORIGIN)
    assert await two.write("f.md", "3", expected=newer, origin=ORIGIN) == "4"
    assert (await one.read("f.md")).text == "3"


async def test_search(store: LogFileStore) -> None:
    await create(store, "notes/tea.md", "Green tea\nblack TEA\nCoffee (hot)\n")
    await create(store, "notes/deep/x.md", "tea time")
    await create(store, "other.md", "tea\ntea\n")

    async def found(pattern: str, **options: object) -> tuple[list[tuple[str, int, str]], bool]:
        arguments: dict[str, object] = {"regex": False, "case_sensitive": False, "path": "", "limit": 50} | options
        matches, truncated = await store.search(pattern, **arguments)  # type: ignore[arg-type]
        return [(match.path, match.line, match.text) for match in matches], truncated

    assert await found("tea", path="notes/") == (
        [("notes/deep/x.md", 1, "tea time"), ("notes/tea.md", 1, "Green tea"), ("notes/tea.md", 2, "black TEA")],
        False,
    )
    assert await found("TEA", case_sensitive=True) == ([("notes/tea.md", 2, "black TEA")], False)
    assert await found("(hot)") == ([("notes/tea.md", 3, "Coffee (hot)")], False)
    assert await found(r"^t.a$", regex=True) == ([("other.md", 1, "tea"), ("other.md", 2, "tea")], False)
    assert await found("tea", limit=2) == ([("notes/deep/x.md", 1, "tea time"), ("notes/tea.md", 1, "Green tea")], True)
    assert await found("tea", limit=5) == (
        [
            ("notes/deep/x.md", 1, "tea time"),
            ("notes/tea.md", 1, "Green tea"),
            ("notes/tea.md", 2, "black TEA"),
            ("other.md", 1, "tea"),
            ("other.md", 2, "tea"),
        ],
        False,
    )
    matches, _ = await store.search("time", regex=False, case_sensitive=False, path="", limit=5)
    assert matches[0].version == "2"
    await refused("invalid_pattern", store.search("(", regex=True, case_sensitive=False, path="", limit=5))
    await refused("invalid_path", store.search("x", regex=False, case_sensitive=False, path="notes", limit=5))


async def test_catastrophic_pattern_is_cut_off_without_blocking_the_loop() -> None:
    """On one backend: search runs over the loaded state, whatever holds the objects."""
    store = LogFileStore(MemoryObjectStore())
    await create(store, "evil.md", "a" * 40 + "b")
    ticks = 0
    stop = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.create_task(tick())
    await refused("invalid_pattern", store.search("(a|aa)+$", regex=True, case_sensitive=True, path="", limit=5))
    stop.set()
    await ticker
    assert ticks > 3, "the event loop kept running while the pattern was matched"


async def test_the_listing_follows_every_kind_of_change(store: LogFileStore) -> None:
    """The listing is kept up to date incrementally; it must equal one built from scratch after each step."""
    import random

    chooser = random.Random(7)
    paths = ["a.md", "b/c.md", "b/d.md", "e.md", "f/g/h.md"]
    for step in range(60):
        entries = {entry.path: entry.version for entry in await store.list()}
        path = chooser.choice(paths)
        action = chooser.random()
        try:
            if path not in entries:
                await create(store, path, f"{step}")
            elif action < 0.4:
                await store.write(path, f"{step}", expected=entries[path], origin=ORIGIN)
            elif action < 0.7:
                await store.move(path, chooser.choice(paths), expected=entries[path], origin=ORIGIN)
            elif action < 0.95:
                await store.delete(path, expected=entries[path], origin=ORIGIN)
            else:
                await store.purge()
        except MemoryStoreError as error:
            if error.code not in ("already_exists", "invalid_path"):
                raise
        state = await store.state()
        rebuilt = sorted((path, str(live.version), live.size) for path, live in state.files.items())
        assert [(e.path, e.version, e.size) for e in await store.list()] == rebuilt


async def test_an_append_is_stored_as_an_edit_and_read_back_whole(open_memory: StoreFactory) -> None:
    """A write of a file that exists stores the span it changes; any other store rebuilds the text."""
    store = open_memory()
    text = "".join(f'line {n}: naïve 🍵 "quoted"\n' for n in range(2000))
    version = await create(store, "log.md", text)
    for n in range(5):
        text += f"appended {n}\n"
        version = await store.write("log.md", text, expected=version, origin=ORIGIN)
    text = "first\n" + text.replace("line 1000:", "line one thousand:")  # two spans: one edit over both
    version = await store.write("log.md", text, expected=version, origin=ORIGIN)
    state, commits = await replay(store.objects)
    assert [commit.format for commit in commits] == [3] * 7  # sealed texts, edits among them
    assert [type(commit.changes[0]).__name__ for commit in commits] == ["Write"] + ["Edit"] * 6
    assert all(len(commit.encode()) < 1000 for commit in commits[1:6])
    assert state.files["log.md"].text == text
    other = open_memory()
    assert (await other.read("log.md")).text == text and (await other.read("log.md")).version == version
    revisions = await MemoryAdmin(other).revisions("log.md")
    assert revisions[0].size == len(text.encode())


async def test_edits_can_be_turned_off_for_older_readers(open_memory: StoreFactory) -> None:
    store = open_memory(options=LogOptions(store_edits=False, erasable=False))
    version = await create(store, "a.md", "x" * 5000)
    await store.write("a.md", "x" * 5000 + "y", expected=version, origin=ORIGIN)
    _, commits = await replay(store.objects)
    assert [commit.format for commit in commits] == [1, 1]


async def test_sealed_texts_can_be_turned_off_for_older_readers(open_memory: StoreFactory) -> None:
    store = open_memory(options=LogOptions(erasable=False))
    version = await create(store, "a.md", "x" * 5000)
    await store.write("a.md", "x" * 5000 + "y", expected=version, origin=ORIGIN)
    _, commits = await replay(store.objects)
    assert [commit.format for commit in commits] == [1, 2]
    assert all(b'"salt"' not in commit.encode() for commit in commits)


async def test_a_small_rewrite_is_stored_whole(store: LogFileStore) -> None:
    version = await create(store, "a.md", "short")
    await store.write("a.md", "other", expected=version, origin=ORIGIN)
    _, commits = await replay(store.objects)
    assert [type(change).__name__ for commit in commits for change in commit.changes] == ["Write", "Write"]


async def test_a_local_probe_is_one_stat_that_sees_other_writers(tmp_path: Path) -> None:
    """On a local disk a fresh read proves the head with one stat on the loop, not a request in a
    thread: it must still see another store's commit, and a key it cannot stat is not absent."""
    reader, writer = LogFileStore.local(tmp_path), LogFileStore.local(tmp_path)
    await writer.write("a.md", "one", expected=None, origin=ORIGIN)
    assert (await reader.read("a.md")).text == "one"
    with telemetry.tallied() as tally:
        assert (await reader.read("a.md")).text == "one"
    assert tally.requests == 1
    await writer.write("a.md", "two", expected="1", origin=ORIGIN)
    assert (await reader.read("a.md")).text == "two"
    objects = LocalObjectStore(tmp_path)
    unreadable = f"log/{'x' * 300}.json"  # past the file system's name limit: the stat fails, not with ENOENT
    assert (objects.absent("log/00000000000000000003.json"), objects.absent(unreadable)) == (True, False)
    with pytest.raises(MemoryStoreError):
        await objects.get(unreadable)
