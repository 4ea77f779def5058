"""Packed checkpoints (format 3): the layout pinned byte for byte, each text checked against the
blocks it spans when it is read, and hostile bytes refused as corrupt, never with another error."""

from __future__ import annotations

import gc
import hashlib
import re
import threading
import types
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from a13n_harness.providers.memory import FileFormat, MemoryStoreError, Origin
from hypothesis import given, settings
from hypothesis import strategies as st

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format import packed
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Write
from bucket_memory.format.checkpoint_content import CheckpointContent
from bucket_memory.format.codec import Checkpoint
from bucket_memory.format.packed import PackedCheckpoint, decode_checkpoint
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import CHECKPOINT_PREFIX, checkpoint_key
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.state.checkpoint_state import from_checkpoint
from bucket_memory.state.state import State
from bucket_memory.testing.versioned import VersionedMemoryObjectStore
from bucket_memory.transfer import export_snapshot

GOLDEN = Path(__file__).parent / "golden" / "packed" / "00000000000000000007.json"
KEY = checkpoint_key(7)
ORIGIN = Origin(run_id="packed")
# Every kind of file a checkpoint holds: escapes of every kind, an empty text, an erased file.
CONTENT = CheckpointContent(
    seq=7,
    head_hash="ab" * 32,
    floor=2,
    time="2026-12-03T12:00:00.000Z",
    files=[
        ("a.md", 'say "hi" \\ \n\t\x01 café ✓ 😀', 3),
        ("empty.md", "", 4),
        ("gone.md", None, 5),
        ("notes/b.md", "---\ndescription: b\n---\nbody\n", 7),
    ],
    deleted=[("old.md", 6)],
    genesis="cd" * 32,
    descriptions=[None, None, None, "b"],
    described_with=(65536, 4096, 200),
    erased=[("gone.md", 6)],
    folds=[("0f" * 16, 6), ("a1" * 16, 7)],
)


def test_the_layout_is_the_one_this_release_wrote() -> None:
    """Readers of every later release must open these bytes: made again, they are the same bytes."""
    data = GOLDEN.read_bytes()
    assert PackedCheckpoint.made(CONTENT).encode() == data
    for served in (True, False):
        assert _plain(decode_checkpoint("golden", KEY, data, served=served).content()) == _plain(CONTENT)
    assert data.startswith(b'{"format":3,"kind":"checkpoint","texts_bytes":')


def test_a_reader_from_before_packed_checkpoints_asks_to_be_upgraded() -> None:
    """Older releases decode every checkpoint as `Checkpoint` does: the document must parse as JSON
    and name its format, so that their message says to upgrade, not that the bucket is damaged."""
    with pytest.raises(
        CorruptObjectError, match=re.escape("format 3; this bucket-memory reads format 2 (upgrade it?)")
    ):
        Checkpoint.decode("old", checkpoint_key(7), GOLDEN.read_bytes())


def test_a_later_format_asks_this_reader_to_be_upgraded() -> None:
    data = GOLDEN.read_bytes().replace(b'{"format":3', b'{"format":4', 1)
    with pytest.raises(
        CorruptObjectError, match=re.escape("format 4; this bucket-memory reads format 3 (upgrade it?)")
    ):
        decode_checkpoint("new", checkpoint_key(7), data)


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(st.text(st.characters(codec="utf-8"), max_size=20), min_size=1, max_size=12),
    damage=st.integers(min_value=0),
)
def test_each_text_is_checked_against_the_blocks_it_spans(texts: list[str], damage: int) -> None:
    """Blocks of 7 bytes, so that texts straddle them: every text reads back as written; once one
    byte of the texts is damaged, strict decoding refuses the checkpoint, a cold open still opens
    it (its index is intact), and exactly the texts that span the damaged block fail to read."""
    with mock.patch.object(packed, "BLOCK_BYTES", 7):
        content = _content({f"f{index:02}.md": text for index, text in enumerate(texts)})
        data = PackedCheckpoint.made(content).encode()
        key = checkpoint_key(content.seq)
        opened = decode_checkpoint("m", key, data, served=True)
        assert isinstance(opened, PackedCheckpoint)
        assert [text for _, text, _ in opened.content().files] == [text for _, text, _ in content.files]
        start, total = data.index(b'"texts":"') + len(b'"texts":"'), sum(opened.index.stored)
        if not total:
            return
        at = damage % total
        damaged = bytearray(data)
        damaged[start + at] ^= 0x01
        with pytest.raises(CorruptObjectError, match="block"):
            decode_checkpoint("m", key, bytes(damaged))
        served = decode_checkpoint("m", key, bytes(damaged), served=True)
        assert isinstance(served, PackedCheckpoint)
        block = at // 7
        for (_, text, _), offset, size, stored in zip(
            content.files, served.offsets(), served.index.sizes, served.index.stored, strict=True
        ):
            if stored and offset // 7 <= block <= (offset + stored - 1) // 7:
                with pytest.raises(CorruptObjectError):
                    served.texts.text(offset, stored, size)
            else:
                assert served.texts.text(offset, stored, size) == text


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(["flip", "cut", "insert", "drop"]), st.binary(max_size=4)),
        min_size=1,
        max_size=3,
    )
)
def test_damaged_bytes_are_refused_as_corrupt_and_nothing_else(edits: list[tuple[int, str, bytes]]) -> None:
    """Bytes read from a bucket are hostile: whatever they are, decoding, opening and reading every
    text either works or raises `CorruptObjectError`, never another exception."""
    data = bytearray(GOLDEN.read_bytes())
    for position, edit, payload in edits:
        at = position % (len(data) + 1)
        if edit == "flip" and at < len(data):
            data[at] ^= payload[0] if payload and payload[0] else 0x20
        elif edit == "cut":
            del data[at:]
        elif edit == "insert":
            data[at:at] = payload
        else:
            del data[at : at + len(payload) + 1]
    for served in (True, False):
        try:
            checkpoint = decode_checkpoint("m", KEY, bytes(data), served=served)
            state = from_checkpoint(checkpoint, FileFormat(), "m")
            for live in state.files.values():
                assert isinstance(live.text, str)
        except CorruptObjectError:
            pass


@pytest.mark.parametrize(
    ("stored", "size"),
    [
        (b"ab\\", 3),  # an escape cut short
        (b'a"b', 3),  # a quote that ends the string
        (b"a\x01b", 3),  # a control character JSON escapes
        (b"a\xffb", 3),  # not UTF-8
        (b"\\ud800", 3),  # half a surrogate pair
        (b"abcd", 3),  # a size that is not the text's
    ],
)
def test_a_text_its_digests_vouch_for_but_no_writer_stored_is_refused(stored: bytes, size: int) -> None:
    """Whoever can write the bucket can hash anything: a text whose bytes check against their block
    but are not a text this store would have written fails to read, and the strict decoding too."""
    data = _forged(stored, size)
    opened = decode_checkpoint("m", KEY, data, served=True)
    assert isinstance(opened, PackedCheckpoint)
    with pytest.raises(CorruptObjectError, match="is not the one its index describes"):
        opened.texts.text(0, len(stored), size)
    with pytest.raises(CorruptObjectError):
        decode_checkpoint("m", KEY, data)


def test_a_text_in_another_form_than_the_store_writes_is_served_but_not_verified() -> None:
    data = _forged(b"\\u0041", 1)  # "A", escaped where the store writes it plain
    opened = decode_checkpoint("m", KEY, data, served=True)
    assert isinstance(opened, PackedCheckpoint) and opened.texts.text(0, 6, 1) == "A"
    with pytest.raises(CorruptObjectError, match="not in the form the store writes"):
        decode_checkpoint("m", KEY, data)


def _forged(stored: bytes, size: int) -> bytes:
    """A packed checkpoint of one file whose stored text is `stored`, every digest and hash valid."""
    fields = CONTENT._asdict() | {"erased": None, "deleted": [], "descriptions": [None], "paths": ["a.md"]}
    fields |= {"directory_rows": [], "directory_lengths": []}
    del fields["files"]
    index = packed.CheckpointIndex.signed(
        **fields,
        sizes=[size],
        stored=[len(stored)],
        versions=[1],
        blocks=[hashlib.sha256(stored).hexdigest()],
    )
    opening = b'{"format":3,"kind":"checkpoint","texts_bytes":%d,"texts":"' % len(stored)
    return opening + stored + b'","index":' + index.encode() + b"}"


DIRECTORIES = "the directory columns name each directory"


def _directories(rows: list[int], lengths: list[int]) -> dict[str, object]:
    return {"directory_rows": rows, "directory_lengths": lengths}


@pytest.mark.parametrize(
    ("columns", "reason"),
    [
        ({"paths": ["b.md", "a.md"]}, "not in order"),
        ({"paths": ["a.md", "a.md"]}, "not in order"),
        ({"erased": []}, "`erased` names"),
        ({"erased": [("a.md", 3)], "descriptions": ["said", None]}, "`erased` names"),
        ({"deleted": [("x.md", 6), ("x.md", 1)]}, "`deleted` names"),
        ({"deleted": [("x.md", 6), ("y.md", 5)]}, "`deleted` names"),
        ({"deleted": [("x.md", 8)]}, "`deleted` names"),
        ({"deleted": [("a.md", 2)]}, "`deleted` names"),
        ({"sizes": [-1, 0]}, "fewer than none"),
        ({"sizes": [1, 0]}, "fewer bytes than its UTF-8"),
        ({"versions": [-1, 2]}, "a version below zero"),
        ({"versions": [1, 8]}, "after the checkpoint"),
        ({"versions": [1, 1.5]}, "int"),
        ({"stored": ["0", None]}, "int"),
        (_directories([0], [1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]}, DIRECTORIES),
        ({"paths": ["n/a.md", "n/m/b.md"]} | _directories([0], [1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]} | _directories([0, 1], [1, 1]), DIRECTORIES),
        ({"paths": ["m/a.md", "n/b.md"]} | _directories([1, 0], [1, 1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]} | _directories([2], [1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]} | _directories([0], [1, 1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]} | _directories([-1], [1]), DIRECTORIES),
        ({"paths": ["n/a.md", "n/b.md"]} | _directories([0, 0], [1, 2]), DIRECTORIES),
    ],
)
def test_an_index_no_writer_makes_is_refused(columns: dict[str, object], reason: str) -> None:
    """Files out of order or twice, an erased file with a description, tombstones out of order, of
    live files, or after the checkpoint, directories missing, twice, out of order or cut where no
    slash is: each
    would break the state built from it (a change feed in the wrong order, a description an erasure
    leaves, a file placed where a directory is), so neither a cold open nor verify takes it."""
    fields = CONTENT._asdict() | {"paths": ["a.md", "b.md"], "deleted": [], "descriptions": [None, None]}
    fields |= {"directory_rows": [], "directory_lengths": []}
    fields |= {"sizes": [0, 0], "stored": [0, 0], "versions": [1, 2], "blocks": [], "erased": None}
    del fields["files"]
    with pytest.raises(ValueError, match=re.escape(reason)):
        packed.CheckpointIndex.signed(**fields | columns)


def _hashed_as_a_writer_would(paths: list[str], rows: list[int], lengths: list[int]) -> bytes:
    """A packed checkpoint of empty files at `paths` with these directory columns, whatever they
    say, its index hashed as any writer of the bucket can hash it."""
    fields = CONTENT._asdict() | {"paths": paths, "deleted": [], "descriptions": [None] * len(paths), "erased": None}
    fields |= {"sizes": [0] * len(paths), "stored": [0] * len(paths), "versions": [1] * len(paths), "blocks": []}
    del fields["files"]
    fields = {name: value for name, value in fields.items() if value is not None}
    fields |= {"kind": "checkpoint", "format": 3} | _directories(rows, lengths)
    index = canonical(fields | {"hash": hashlib.sha256(canonical(fields)).hexdigest()})
    return b'{"format":3,"kind":"checkpoint","texts_bytes":0,"texts":"","index":' + index + b"}"


@pytest.mark.parametrize(
    ("rows", "lengths"), [([0], [1]), ([0, 0, 1], [1, 1, 3]), ([1, 0], [3, 1]), ([0, 1], [1, 2]), ([0, 1], [1, 3, 5])]
)
async def test_hash_valid_directory_columns_no_writer_makes_fail_a_cold_open_and_verify(
    rows: list[int], lengths: list[int]
) -> None:
    """Directories missing, twice, out of order, cut where no slash is, or columns of two lengths:
    a cold open refuses the checkpoint naming it, and verify reports it (the honest columns open)."""
    paths = ["n/a.md", "n/m/b.md"]
    objects = MemoryObjectStore()
    objects.objects[KEY] = (_hashed_as_a_writer_would(paths, [0, 1], [1, 3]), objects.clock)
    assert [entry.path for entry in await LogFileStore(objects).list()] == paths
    objects.objects[KEY] = (_hashed_as_a_writer_would(paths, rows, lengths), objects.clock)
    with pytest.raises(CorruptObjectError) as caught:
        await LogFileStore(objects).read("n/a.md")
    assert caught.value.key == KEY and DIRECTORIES in str(caught.value)
    assert [problem.key for problem in await MemoryAdmin(LogFileStore(objects)).verify()] == [KEY]


async def test_a_damaged_block_is_blamed_on_its_checkpoint_when_a_commit_above_reads_it() -> None:
    """Replaying an edit reads the text it edits: a damaged block is the checkpoint's damage, and
    the message must name the checkpoint to restore, not the commit."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    files = {f"notes/{index:03}.md": f"note {index}\n" + "x" * 2000 for index in range(300)}  # 600 KiB: 3 blocks
    await MemoryAdmin(store).put_files(files, replace=False, origin=ORIGIN)
    await store.settle()
    await store.write("notes/299.md", files["notes/299.md"] + "more\n", expected="1", origin=ORIGIN)  # an edit
    [key] = [info.key for info in await objects.list(CHECKPOINT_PREFIX)]
    data, modified = objects.objects[key]
    objects.objects[key] = (data.replace(b"note 299\\n", b"note 298\\n", 1), modified)
    with pytest.raises(CorruptObjectError) as caught:
        await LogFileStore(objects).read("notes/000.md")
    assert caught.value.key == key and str(caught.value).count("is corrupt") == 1


async def test_no_operation_reads_every_text_on_the_event_loop(tmp_path: Path) -> None:
    """The first read of a text from a packed checkpoint checks its block and decodes it: a search,
    an export, a rollback or an import over a cold memory reads them all, in a worker thread."""
    objects = MemoryObjectStore()
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    files = {f"notes/{index:03}.md": f"note {index}\n" + "x" * 2000 for index in range(300)}
    await MemoryAdmin(writer).put_files(files, replace=False, origin=ORIGIN)
    await writer.write("extra.md", "x", expected=None, origin=ORIGIN)
    await writer.settle()
    loop_thread = threading.get_ident()
    on_loop: list[int] = []
    read = packed.PackedTexts.text

    def counted(texts: packed.PackedTexts, at: int, stored: int, size: int) -> str:
        if threading.get_ident() == loop_thread:
            on_loop.append(at)
        return read(texts, at, stored, size)

    with mock.patch.object(packed.PackedTexts, "text", counted):
        operations: list[Callable[[LogFileStore], Awaitable[object]]] = [
            lambda store: store.search("note 7", regex=False, case_sensitive=True, path="", limit=5),
            lambda store: export_snapshot(store, tmp_path / "out"),
            lambda store: MemoryAdmin(store).preview_rollback(1),
            lambda store: MemoryAdmin(store).put_files(files, replace=False, origin=ORIGIN),
        ]
        for operation in operations:
            await operation(LogFileStore(objects))  # cold, every text unread
            assert on_loop == [], operation
        assert (await LogFileStore(objects).read("notes/001.md")).text == files["notes/001.md"]
        assert len(on_loop) == 1  # one file, as asked: small enough for the loop


async def test_a_damaged_block_fails_the_reads_of_its_files_and_verify_reports_it() -> None:
    """A cold open checks only the index and the blocks it reads: the files of an intact block are
    served, a file in the damaged one answers `unavailable` naming the checkpoint, and `verify`,
    which checks every block, reports it."""
    objects = MemoryObjectStore()
    store = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    files = {f"notes/{index:03}.md": f"note {index}\n" + "x" * 2000 for index in range(300)}  # 600 KiB: 3 blocks
    await MemoryAdmin(store).put_files(files, replace=False, origin=ORIGIN)
    await store.settle()
    [key] = [info.key for info in await objects.list(CHECKPOINT_PREFIX)]
    data, modified = objects.objects[key]
    objects.objects[key] = (data.replace(b"note 299\\n", b"note 298\\n", 1), modified)
    assert objects.objects[key][0] != data
    cold = LogFileStore(objects)
    assert (await cold.read("notes/000.md")).text == files["notes/000.md"]
    with pytest.raises(CorruptObjectError) as caught:
        await cold.read("notes/299.md")
    assert caught.value.code == "unavailable" and caught.value.key == key and "block 2" in str(caught.value)
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert [(problem.key, "block 2" in problem.message) for problem in problems] == [(key, True)]


async def test_a_memory_checkpointed_in_either_layout_opens_to_the_same_files() -> None:
    """A fleet turns packing off until every reader is upgraded: both layouts serve the same memory,
    and a writer of one layout reads the other's checkpoints."""
    served = []
    for layout in (False, True):
        objects = MemoryObjectStore()
        options = LogOptions(checkpoint_min_commits=1, checkpoint_max_commits=1, packed_checkpoints=layout)
        store = LogFileStore(objects, options=options)
        await store.write("a.md", 'say "hi" \\ café\n', expected=None, origin=ORIGIN)
        await store.write("b/c.md", "c", expected=None, origin=ORIGIN)
        await store.settle()
        [*_, newest] = [info.key for info in await objects.list(CHECKPOINT_PREFIX)]
        assert objects.objects[newest][0].startswith(b'{"format":3') == layout
        other = LogFileStore(objects, options=LogOptions(packed_checkpoints=not layout))
        await other.write("d.md", "d", expected=None, origin=ORIGIN)
        served.append(sorted([(entry.path, entry.version) for entry in await LogFileStore(objects).list()]))
    assert served[0] == served[1]


def test_the_option_is_checked() -> None:
    with pytest.raises(ValueError, match="packed_checkpoints"):
        LogOptions(packed_checkpoints="yes")  # type: ignore[arg-type]


def test_a_checkpoint_too_large_for_readers_is_refused_before_it_is_written() -> None:
    with mock.patch.object(packed, "MAX_OBJECT_BYTES", 100), pytest.raises(MemoryStoreError) as caught:
        PackedCheckpoint.made(CONTENT)
    assert caught.value.code == "too_large"


def _content(texts: dict[str, str]) -> CheckpointContent:
    state = State(format=FileFormat())
    for seq, (path, text) in enumerate(texts.items(), start=1):
        state.apply_change(Write(path=path, text=text), seq)
        state.head = seq
    return state.checkpoint_content(max_tombstones=100, at=0.0)


def _plain(content: CheckpointContent) -> tuple[object, ...]:
    return tuple(tuple(value) if isinstance(value, list | tuple) else value for value in content)


def _texts_reachable_from(root: object) -> Iterator[bytes | str]:
    """Every string and bytes-like object `root` holds, however deep (classes and modules aside)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        held = stack.pop()
        if id(held) in seen or isinstance(held, type | types.ModuleType | types.FunctionType):
            continue
        seen.add(id(held))
        if isinstance(held, bytes | bytearray | memoryview):
            yield bytes(held)
        elif isinstance(held, str):
            yield held
        else:
            stack.extend(gc.get_referents(held))


async def test_after_an_erasure_the_state_holds_no_checkpoint_bytes_with_the_erased_text() -> None:
    """A state opened from a packed checkpoint keeps its bytes and descriptions while a file is
    unmade or its text unread: after an erasure, the process must not hold a checkpoint, or a
    description, that still has the erased text in it (the checkpoint that follows every erasure
    reads every text, through a copy of the state)."""
    secret = "4242-SECRET-0002"
    objects = VersionedMemoryObjectStore()
    writer = LogFileStore(objects, options=LogOptions(checkpoint_min_commits=1))
    await MemoryAdmin(writer).put_files(
        {"people/alice.md": f"Alice {secret}", "people/bob.md": "bob", "people/carol.md": "carol"},
        replace=False,
        origin=ORIGIN,
    )
    await writer.settle()
    store = LogFileStore(objects)
    assert (await store.read("people/alice.md")).text.endswith(secret)  # cold: bob's text still unread
    await MemoryAdmin(store).erase("people/alice.md", origin=Origin(run_id="dpo", principal_id="dpo"))
    held = list(_texts_reachable_from(store.cached_state))
    assert not any(secret in text for text in held if isinstance(text, str))
    assert not any(secret.encode() in data for data in held if isinstance(data, bytes))
    assert [entry.path for entry in await store.list()] == ["people/bob.md", "people/carol.md"]


@pytest.mark.parametrize("layout", [Checkpoint, PackedCheckpoint])
async def test_a_checkpoint_with_a_file_below_a_file_is_refused_naming_it(
    layout: type[Checkpoint | PackedCheckpoint],
) -> None:
    """No writer stores a file below another file (an export could not write both): a cold open
    refuses such a checkpoint, naming it, and verify reports it."""
    files = [*CONTENT.files[:1], *CONTENT.files[2:3], ("notes", "x", 4), *CONTENT.files[3:]]
    objects = MemoryObjectStore()
    objects.objects[KEY] = (layout.made(CONTENT._replace(files=files)).encode(), objects.clock)
    with pytest.raises(CorruptObjectError) as caught:
        await LogFileStore(objects).read("a.md")
    assert caught.value.key == KEY and "notes is both a file and a directory" in str(caught.value)
    problems = await MemoryAdmin(LogFileStore(objects)).verify()
    assert [(problem.key, "both a file and a directory" in problem.message) for problem in problems] == [(KEY, True)]
