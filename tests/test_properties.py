"""Any input through the public API: only `MemoryStoreError` with a harness code ever escapes, and the
memory stays readable by a fresh store, in this process and in another one."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import tempfile
import typing
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from a13n_harness.providers.memory import FileFormat, MemoryErrorCode, MemoryStoreError, Origin
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bucket_memory import LogFileStore, MemoryAdmin, open_store
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Change, Delete, Move, Purge, Write
from bucket_memory.format.checkpoint_content import CheckpointContent
from bucket_memory.format.codec import Checkpoint
from bucket_memory.format.packed import PackedCheckpoint, decode_checkpoint
from bucket_memory.format.wire_values import checkpoint_key, stored_size
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.objects.urls import parse_url
from bucket_memory.state.change_feed import changes_since
from bucket_memory.state.checkpoint_state import from_checkpoint
from bucket_memory.state.packed_files import PackedFiles
from bucket_memory.state.state import State, same_files

from .conftest import BUCKET

CODES = set(typing.get_args(MemoryErrorCode.__value__))
LOCAL_MEMORIES: list[Path] = []

segments = st.one_of(st.sampled_from(["a", "b", "notes", "..", ".", "", "é", "e\u0301", "log"]), st.text(max_size=6))
paths = st.lists(segments, min_size=1, max_size=4).map("/".join) | st.text(max_size=30)
LONG = "".join(f'{n}: ünïcode 🍵 "escaped" \\ \t\n' for n in range(40))
# Rewrites of one long text, which the store keeps as edits of each other.
rewrites = st.builds(
    lambda at, cut, inserted: LONG[:at] + inserted + LONG[at + cut :],
    st.integers(0, len(LONG)),
    st.integers(0, 8),
    st.text(max_size=10),
)
texts = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["---\ndescription: d\n---\nbody", "---\nbroken", "x" * 70_000]),
    rewrites,
)
field_values = st.one_of(st.none(), st.text(max_size=20), st.integers(), st.just(uuid.UUID(int=1)), st.just("\ud800"))
origins = st.builds(Origin, run_id=field_values, principal_id=field_values, tool_call_id=field_values)
versions = st.one_of(st.none(), st.text(max_size=8), st.integers(0, 30).map(str), st.just("9" * 5000))
dependencies = st.one_of(st.none(), st.dictionaries(paths, versions, max_size=3))
patterns = st.one_of(st.text(max_size=20), st.sampled_from(["(a+)+$", "((a{50}){50}){50}", "[", "\\", "(?R)"]))

type Operation = Callable[[LogFileStore], Awaitable[object]]

operations: st.SearchStrategy[Operation] = st.one_of(
    st.builds(
        lambda p, t, v, o, d: lambda s: s.write(p, t, expected=v, origin=o, dependencies=d),
        paths,
        texts,
        versions,
        origins,
        dependencies,
    ),
    st.builds(
        lambda p, q, v, o, d: lambda s: s.move(p, q, expected=v, origin=o, dependencies=d),
        paths,
        paths,
        versions,
        origins,
        dependencies,
    ),
    st.builds(lambda p, v, o: lambda s: s.delete(p, expected=v, origin=o), paths, versions, origins),
    st.builds(lambda p: lambda s: s.read(p), paths),
    st.builds(lambda c: lambda s: s.changes(c), st.one_of(st.none(), st.text(max_size=30))),
    st.builds(
        lambda pattern, r, c, p, n: lambda s: s.search(pattern, regex=r, case_sensitive=c, path=p, limit=n),
        patterns,
        st.booleans(),
        st.booleans(),
        st.one_of(st.just(""), paths),
        st.integers(-1, 5),
    ),
    st.builds(lambda p, v: lambda s: MemoryAdmin(s).read_at(p, v), paths, versions.filter(lambda v: v is not None)),
    st.builds(
        lambda f, r, o: lambda s: MemoryAdmin(s).put_files(f, replace=r, origin=o),
        st.dictionaries(paths, texts, max_size=4),
        st.booleans(),
        origins,
    ),
    st.builds(lambda n, o: lambda s: MemoryAdmin(s).rollback(n, origin=o), st.integers(-(10**30), 10**30), origins),
    st.builds(
        lambda p, v, o: lambda s: MemoryAdmin(s).restore(p, v, origin=o),
        paths,
        versions.filter(lambda v: v is not None),
        origins,
    ),
)


async def exercise(store: LogFileStore, steps: list[Operation]) -> None:
    for step in steps:
        try:
            await step(store)
        except MemoryStoreError as error:
            assert error.code in CODES, error.code  # noqa: PT017
    await store.settle()


async def check_fresh(fresh: LogFileStore) -> None:
    for entry in await fresh.list():
        assert (await fresh.read(entry.path)).version == entry.version
    assert await MemoryAdmin(fresh).verify() == []


PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(st.lists(operations, max_size=12))
def test_any_input_on_memory(steps: list[Operation]) -> None:
    objects = MemoryObjectStore()

    async def run() -> None:
        await exercise(LogFileStore(objects), steps)
        await check_fresh(LogFileStore(objects))

    asyncio.run(run())


@PROPERTY
@given(st.lists(operations, max_size=12))
def test_any_input_on_local(steps: list[Operation]) -> None:
    root = Path(tempfile.mkdtemp(prefix="bucket-memory-property-"))
    LOCAL_MEMORIES.append(root)

    async def run() -> None:
        await exercise(LogFileStore.local(root), steps)
        await check_fresh(LogFileStore.local(root))

    asyncio.run(run())


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(operations, max_size=8))
def test_any_input_on_moto(steps: list[Operation], s3_endpoint: str) -> None:
    url = f"s3://{BUCKET}/properties/{uuid.uuid4().hex[:12]}"

    async def run() -> None:
        async with open_store(url) as store:
            await exercise(store, steps)
        async with open_store(url) as fresh:
            await check_fresh(fresh)

    asyncio.run(run())


@given(st.text(max_size=80) | st.builds("{}://{}/{}".format, st.sampled_from(["s3", "gs", "file"]), st.text(), paths))
def test_any_url_is_a_memory_or_invalid_path(url: str) -> None:
    try:
        parsed = parse_url(url)
    except MemoryStoreError as error:
        assert error.code == "invalid_path"  # noqa: PT017
        return
    assert parsed.scheme == "file" or (parsed.bucket and "log" not in parsed.prefix.split("/"))


READ_EVERYTHING = """
import asyncio, sys
from bucket_memory import LogFileStore

async def main() -> None:
    for root in sys.argv[1:]:
        store = LogFileStore.local(root)
        for entry in await store.list():
            assert (await store.read(entry.path)).version == entry.version
    print("read", len(sys.argv) - 1)

asyncio.run(main())
"""


def test_every_memory_the_properties_wrote_reads_in_another_process() -> None:
    if not LOCAL_MEMORIES:
        pytest.skip("run with test_any_input_on_local")
    done = subprocess.run(
        [sys.executable, "-c", READ_EVERYTHING, *map(str, LOCAL_MEMORIES)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"read {len(LOCAL_MEMORIES)}"


overlay_steps = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from("abcdef"), st.integers(0, 9)),
        st.tuples(st.just("delete"), st.sampled_from("abcdef"), st.just(0)),
        st.tuples(st.just("clear"), st.just(""), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=400)
@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 9)), overlay_steps)
def test_an_overlay_is_the_dict_it_would_be_and_merges_into_it(
    base: dict[str, int], steps: list[tuple[str, str, int]]
) -> None:
    """Every read of an overlay answers what the same changes made in place would, the base stays
    as it was until `merge`, and then equals the changed copy, in the same order."""
    from bucket_memory.state.overlay import Overlay

    before, expected = dict(base), dict(base)
    overlay = Overlay(base)
    for action, key, value in steps:
        if action == "set":
            expected.pop(key, None)  # as State does: a file rewritten moves to the end
            expected[key] = value
            overlay.pop(key, None)
            overlay[key] = value
        elif action == "delete":
            assert (key in overlay) == (key in expected)
            assert overlay.pop(key, None) == expected.pop(key, None)
        else:
            expected.clear()
            overlay.clear()
        assert dict(overlay) == expected and len(overlay) == len(expected)
        assert all((key in overlay) == (key in expected) and overlay.get(key) == expected.get(key) for key in "abcdef")
    assert base == before, "the base is untouched until merge"
    overlay.merge()
    assert list(base.items()) == list(expected.items())


@pytest.mark.parametrize("layout", [Checkpoint, PackedCheckpoint])
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "c.md"]), min_size=1, max_size=4).map("/".join),
            st.none() | st.text(st.characters(codec="utf-8"), max_size=12),
        ),
        max_size=20,
    )
)
def test_a_checkpoint_opens_to_the_state_it_was_made_of(
    layout: type[Checkpoint | PackedCheckpoint], steps: list[tuple[str, str | None]]
) -> None:
    """A cold open builds the state from a checkpoint in bulk, not change by change: its sizes,
    directories and change feed must be those the changes made one at a time, in either layout."""
    state = State(format=FileFormat())
    for seq, (path, text) in enumerate(steps, start=1):
        change = Delete(path=path) if text is None else Write(path=path, text=text)
        try:
            state.apply_change(change, seq)
        except MemoryStoreError:
            continue  # a file under a file, or a delete of a missing one
        state.head = seq
    content = state.checkpoint_content(max_tombstones=100, at=0.0)
    checkpoint = layout.made(content)
    key, data = checkpoint_key(state.head), checkpoint.encode()
    if isinstance(checkpoint, Checkpoint):  # what decides whether the bytes are joined off the loop
        assert checkpoint.encoded_size == len(data)
    # A cold open parses first and validates the values parsed (and reads a packed text when asked
    # for): the same checkpoint as strict decoding.
    served = decode_checkpoint("memory", key, data, served=True)
    assert _plain(served.content()) == _plain(decode_checkpoint("memory", key, data).content()) == _plain(content)
    opened = from_checkpoint(served, state.format, "memory")
    assert same_files(opened, state)
    assert (opened.directories, opened.live_bytes, opened.stored_bytes) == (
        state.directories,
        state.live_bytes,
        state.stored_bytes,
    )
    assert sorted(opened.changes_in_order().items()) == sorted(state.changed.items())
    assert list(opened.changed.values()) == sorted(opened.changed.values())


_names = st.lists(st.sampled_from(["a", "b", "c.md"]), min_size=1, max_size=3).map("/".join)
_later = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["write", "layered write"]), _names, st.text(max_size=8)),
        st.tuples(st.sampled_from(["delete", "read", "move", "copy", "purge"]), _names, _names),
        st.tuples(st.sampled_from(["layered delete", "layered move", "layered purge"]), _names, _names),
    ),
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_names, st.text(max_size=8)), max_size=12), _later)
def test_a_state_opened_from_a_packed_checkpoint_changes_as_the_state_it_holds(
    written: list[tuple[str, str]], later: list[tuple[str, str, str]]
) -> None:
    """A packed open makes each file when first asked for: reads, writes, deletions, moves, purges,
    copies and layered plans must leave it the state the same changes make of the state it holds."""
    state = State(format=FileFormat())
    for seq, (path, text) in enumerate(written, start=1):
        with contextlib.suppress(MemoryStoreError):
            state.apply_change(Write(path=path, text=text), seq)
        state.head = seq
    checkpoint = PackedCheckpoint.made(state.checkpoint_content(max_tombstones=100, at=0.0))
    opened = from_checkpoint(checkpoint, state.format, "memory")
    assert isinstance(opened.files, PackedFiles)
    copies: list[tuple[State, State]] = []
    for seq, (action, path, other) in enumerate(later, start=state.head + 1):
        change: Change
        match action.removeprefix("layered "):
            case "delete":
                change = Delete(path=path)
            case "move":
                change = Move(source=path, destination=other)
            case "purge":
                change = Purge()
            case _:
                change = Write(path=path, text=other)
        if action == "read":
            assert [(live.text, live.version) for live in (opened.files.get(path),) if live] == [
                (live.text, live.version) for live in (state.files.get(path),) if live
            ]
        elif action == "copy":
            copies.append((opened.copy(), state.copy()))
        else:
            outcomes: list[str] = []
            for whole in (opened, state):
                planned = whole.layered() if action.startswith("layered ") else whole
                try:
                    planned.apply_change(change, seq)
                except MemoryStoreError as error:
                    outcomes.append(error.code)
                    continue
                outcomes.append("done")
                if planned is not whole:
                    whole.absorb(planned)
            assert outcomes[0] == outcomes[1]
        assert sorted(opened.files) == sorted(state.files) and len(opened.files) == len(state.files)
        assert same_files(opened, state) and opened.directories == state.directories
        assert (opened.live_bytes, opened.stored_bytes) == (state.live_bytes, state.stored_bytes)
        for since in (seq - 1, checkpoint.seq):  # answered without ordering the checkpoint's changes
            assert changes_since(opened, since) == changes_since(state, since)
    for copied, expected in copies:
        assert same_files(copied, expected) and sorted(copied.files) == sorted(expected.files)
    assert changes_since(opened, 0) == changes_since(state, 0)
    assert list(opened.changes_in_order().items()) == list(state.changed.items())


def _plain(content: CheckpointContent) -> tuple[object, ...]:
    """A checkpoint's content with its sequences as tuples, to compare however each layout holds them."""
    return tuple(tuple(value) if isinstance(value, list | tuple) else value for value in content)


@given(st.text(st.characters(codec="utf-8")))
def test_a_texts_stored_size_is_the_length_of_its_json(text: str) -> None:
    """The quota counts each text as its JSON string takes it; the count skips encoding the JSON."""
    assert stored_size(text) == len(canonical(text)) - 2
