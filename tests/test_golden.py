"""Buckets written by earlier releases keep opening: a memory written by the first release, byte for byte.

`tests/golden/format-1` was written by main at 2ca2085 (commits with every kind of change, a group
commit whose changes carry their callers' origins, checkpoints with tombstones). Its objects must
decode, re-encode to the same bytes (so hashes stay valid), and serve the same files and history.
"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path

import pytest
from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin, validate_path
from hypothesis import example, given
from hypothesis import strategies as st

from bucket_memory import LogFileStore, MemoryAdmin
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Write
from bucket_memory.format.codec import Checkpoint, Commit
from bucket_memory.format.wire_values import _wire_path, _wire_paths, checked_path

GOLDEN = Path(__file__).parent / "golden" / "format-1"
# Written by main when erasure came: sealed commits (format 3) with an edit, a move and a delete, one
# commit of format 1 among them, then an erasure of the moved file, which rewrote commits 1, 3, 5
# and 6 and the checkpoints below it, and a write after it.
SEALED = Path(__file__).parent / "golden" / "format-3"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    copy = tmp_path / "memory"
    shutil.copytree(GOLDEN / "memory", copy)
    return copy


@pytest.mark.parametrize(("golden_memory", "count"), [(GOLDEN, 11), (SEALED, 14)])
def test_every_object_reencodes_to_its_stored_bytes(golden_memory: Path, count: int) -> None:
    objects = sorted((golden_memory / "memory").rglob("*.json"))
    assert len(objects) == count
    for path in objects:
        data = path.read_bytes()
        key = path.relative_to(golden_memory / "memory").as_posix()
        decoded = (
            Commit.decode("golden", key, data) if key.startswith("log/") else Checkpoint.decode("golden", key, data)
        )
        assert decoded.encode() == data, key
        # A cold open checks a checkpoint's hash over the bytes read: true of every one ever written.
        assert isinstance(decoded, Commit) or decoded.hashed_as_read(data), key


async def test_an_erased_memory_serves_verifies_and_shows_what_was_erased(tmp_path: Path) -> None:
    copy = tmp_path / "memory"
    shutil.copytree(SEALED / "memory", copy)
    expected = json.loads((SEALED / "expected.json").read_text())
    store = LogFileStore.local(copy)
    assert {entry.path: entry.version for entry in await store.list()} == {
        path: file["version"] for path, file in expected["files"].items()
    }
    admin = MemoryAdmin(store)
    # Made before erasure records: its erasure is void for this release until the operator, running
    # `erase` on the path again, records it (nothing is committed; the head stays).
    unrecorded, checkpoint = await admin.verify()  # and the checkpoint its writer made after applying it
    assert unrecorded.key == "log/00000000000000000009.json" and "erasure records" in unrecorded.message
    assert checkpoint.key == "checkpoints/00000000000000000009.json"
    await admin.erase("people/alice.md", origin=Origin(principal_id="dpo@example.com"))
    assert {entry.path: entry.version for entry in await store.list()} == {
        path: file["version"] for path, file in expected["files"].items()
    }
    history = [[r.version, r.action, r.path, r.erased, r.origin.principal_id] for r in await admin.revisions()]
    assert history == expected["history"]
    assert await admin.verify() == []
    commits = {
        path.name: Commit.decode("golden", f"log/{path.name}", path.read_bytes()) for path in (copy / "log").iterdir()
    }
    # The commit of format 1 lost its text and can no longer be checked against its hash; every
    # commit of format 3 still is, erased texts and all.
    assert [(c.seq, c.format, c.checkable) for c in sorted(commits.values(), key=lambda c: c.seq) if c.format != 3] == [
        (3, 1, False)
    ]
    for stored in copy.rglob("*.json"):
        assert b"555-0100" not in stored.read_bytes() and b"Lisbon" not in stored.read_bytes()


async def test_the_store_serves_what_the_first_release_wrote(golden: Path) -> None:
    expected = json.loads((GOLDEN / "expected.json").read_text())
    store = LogFileStore.local(golden)
    files = {entry.path: entry.version for entry in await store.list()}
    assert files == {path: file["version"] for path, file in expected["files"].items()}
    for path, file in expected["files"].items():
        assert (await store.read(path)).text == file["text"]
    history = [
        [r.version, r.action, r.path, r.origin.run_id, r.origin.principal_id, r.origin.tool_call_id]
        for r in await MemoryAdmin(store).revisions()
    ]
    assert history == expected["history"]
    assert await MemoryAdmin(store).verify() == []
    assert (await store.changes(None)).cursor.startswith(str(expected["head"]))


async def test_a_golden_memory_takes_new_writes(golden: Path) -> None:
    from a13n_harness.providers.memory import Origin

    store = LogFileStore.local(golden)
    version = await store.write("after.md", "and more\n", expected="9", origin=Origin(run_id="new"))
    assert version == "10"
    assert await MemoryAdmin(LogFileStore.local(golden)).verify() == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_the_piecewise_encoding_is_the_same_bytes_as_one_call(value: object) -> None:
    """Members and array items are encoded one call each: the hash must not differ from one call's."""
    assert canonical(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@given(st.lists(st.tuples(st.sampled_from(["a.md", "b/c.md"]), st.text(max_size=20)), min_size=1), st.booleans())
def test_a_commits_encoded_size_is_the_length_of_its_bytes(writes: list[tuple[str, str]], sealed: bool) -> None:
    """The size decides whether a commit is joined into its bytes off the event loop."""
    changes = tuple(Write(path=path, text=text) for path, text in writes)
    commit = Commit.create(1, "0" * 64, changes, Origin(run_id="golden"), at=0.0, sealed=sealed)
    assert commit.encoded_size == len(commit.encode())


@given(
    st.text(alphabet=st.sampled_from("ab./\\ \x00\x7f~-é") | st.characters(max_codepoint=0x7F), max_size=12),
    st.sampled_from([4, 8, 4096]),
)
def test_a_path_is_checked_exactly_as_the_harness_checks_it(path: str, path_bytes: int) -> None:
    """Plain ASCII paths skip the harness's check (in reads, writes and decoding); the fast path
    must accept and refuse exactly what `validate_path` does, within any format's byte limit."""
    fmt = FileFormat(path_bytes=path_bytes)
    try:
        expected: str | None = validate_path(path, fmt)
    except MemoryStoreError:
        expected = None
    try:
        got: str | None = checked_path(path, fmt)
    except MemoryStoreError:
        got = None
    assert got == expected
    try:
        _wire_path(path)
        passed = True
    except ValueError:
        passed = False
    assert passed == _accepts(path)


_path_pieces = st.sampled_from(["a", "b.md", ".", "..", "/", "\n", "\\", " ", "é", "\x00", "~"])


@example(["a\nb"])
@example(["a/..", "."])
@example(["a", "b" * 4097])
@given(st.lists(st.lists(_path_pieces, max_size=5).map("".join) | st.just("a" * 4097), max_size=6))
def test_a_checkpoints_paths_are_checked_at_once_exactly_as_one_by_one(paths: list[str]) -> None:
    """A checkpoint's paths are checked in one pass over them joined by newlines: a newline inside a
    path, or a path too long, must not pass where the check of each path alone refuses it."""
    try:
        _wire_paths(tuple((path, 1) for path in paths))
        passed = True
    except ValueError:
        passed = False
    assert passed == all(_accepts(path) for path in paths)


def test_checking_a_checkpoints_paths_at_once_takes_no_memory_per_path() -> None:
    """The one pass over every path must not keep state per path or per segment: with greedy
    repeats it held 60 bytes per byte of paths, gigabytes for a checkpoint of deep paths."""
    rows = tuple(("a/" * 20 + f"{index}", 1) for index in range(20_000))  # 0.9 MB of paths
    tracemalloc.start()
    try:
        _wire_paths(rows)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def _accepts(path: str) -> bool:
    try:
        return validate_path(path, FileFormat(path_bytes=4096)) == path
    except MemoryStoreError:
        return False
