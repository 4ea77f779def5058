"""Objects decoded once a process (`format/decoded.py`): stores in one process share each decoded
commit and run, and sharing gives a forger nothing (the key is the bytes; the seq and an erasure's
verdict are each reader's own)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin
from bucket_memory.format.canonical_json import canonical
from bucket_memory.format.changes import Erase, Write
from bucket_memory.format.codec import GENESIS_HASH, Commit
from bucket_memory.format.decoded import DECODED, DecodedObjects
from bucket_memory.format.signed import CorruptObjectError
from bucket_memory.format.wire_values import log_key, run_key
from bucket_memory.log.runs import Run
from bucket_memory.objects.memory import MemoryObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore

ALICE = Origin(principal_id="alice")
OPERATOR = Origin(run_id="bucket-memory erase", principal_id="dpo@example.com")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)


def counted_decodes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes of every commit decoded from here on (strict validation: the cost being shared)."""
    decoded: list[bytes] = []
    original = Commit._decoded

    def counting(cls: type[Commit], data: bytes) -> Commit:
        decoded.append(data)
        return original.__func__(cls, data)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(Commit, "_decoded", classmethod(counting))
    return decoded


async def test_a_second_store_in_the_process_decodes_no_commit_the_first_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Was: every store decoded every commit it read, so N stores in one process decoded each N times."""
    objects = MemoryObjectStore()
    writer = LogFileStore(objects, options=NO_CHECKPOINTS)
    for number in range(5):
        await writer.write(f"{number}.md", f"text {number}\n", expected=None, origin=ALICE)
    DECODED.clear()  # as if another process had written them
    decoded = counted_decodes(monkeypatch)

    first = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert len(await first.list()) == 5
    assert len(decoded) == 5
    second = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert [entry.path for entry in await second.list()] == [entry.path for entry in await first.list()]
    assert len(decoded) == 5


async def test_a_store_decodes_no_commit_another_store_in_the_process_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = MemoryObjectStore()
    writer = LogFileStore(objects, options=NO_CHECKPOINTS)
    reader = LogFileStore(objects, options=NO_CHECKPOINTS)
    assert await reader.list() == []
    decoded = counted_decodes(monkeypatch)
    for number in range(3):
        await writer.write(f"{number}.md", f"text {number}\n", expected=None, origin=ALICE)
    written = len(decoded)  # the writer's own proof that each commit decodes, before it is sent
    assert [entry.path for entry in await reader.list()] == ["0.md", "1.md", "2.md"]
    assert len(decoded) == written


def commit_bytes(*changes: Any, seq: int = 1) -> bytes:
    return Commit.create(seq, GENESIS_HASH, changes, ALICE, at=time.time()).encode()


def test_other_bytes_at_the_same_key_are_decoded_and_refused_not_served_from_the_cache() -> None:
    data = commit_bytes(Write(path="a.md", text="the true text\n"))
    (change,) = Commit.decode("t", log_key(1), data).changes
    assert isinstance(change, Write) and change.text == "the true text\n"
    forged = data.replace(b'"a.md"', b'"b.md"')  # the hash no longer covers it
    with pytest.raises(CorruptObjectError, match="does not match its hash"):
        Commit.decode("t", log_key(1), forged)
    spaced = data.replace(b'"kind":"commit"', b'"kind": "commit"')  # the same content, not canonical
    with pytest.raises(CorruptObjectError, match="canonical form"):
        Commit.decode("t", log_key(1), spaced)


def test_the_same_bytes_at_another_key_are_refused_by_each_reader() -> None:
    data = commit_bytes(Write(path="a.md", text="one\n"), seq=7)
    assert Commit.decode("t", log_key(7), data).seq == 7
    with pytest.raises(CorruptObjectError, match="another seq"):
        Commit.decode("t", log_key(8), data)


def test_an_erasures_verdict_stays_with_the_reader_that_read_it() -> None:
    """One memory's record authorizes the erasure; the same bytes in another memory, without a
    record, must still be checked there: the shared decoded commit carries no verdict."""
    data = commit_bytes(Erase(path="a.md"))
    authorized = Commit.decode("a", log_key(1), data).authorize(True)
    assert authorized.erasure_authorized is True
    elsewhere = Commit.decode("b", log_key(1), data)
    assert elsewhere.erasure_authorized is None
    assert elsewhere.authorize(False).erasure_authorized is False
    assert authorized.erasure_authorized is True


def test_the_cache_is_bounded_and_keeps_no_failure() -> None:
    cache = DecodedObjects(entries=2, size=800)
    made: list[bytes] = []

    def decode(data: bytes) -> str:
        made.append(data)
        if data == b"bad":
            raise ValueError("refused")
        return data.decode()

    for data in (b"a", b"b", b"a"):
        assert cache.once(str, data, lambda data=data: decode(data)) == data.decode()  # type: ignore[misc]
    assert made == [b"a", b"b"]
    cache.once(str, b"c", lambda: decode(b"c"))  # evicts b, the least recently used
    cache.once(str, b"a", lambda: decode(b"a"))
    cache.once(str, b"b", lambda: decode(b"b"))
    assert made == [b"a", b"b", b"c", b"b"]
    for _ in range(2):
        with pytest.raises(ValueError, match="refused"):
            cache.once(str, b"bad", lambda: decode(b"bad"))
    large = b"x" * 101  # over an eighth of the bytes held: decoded every time
    cache.once(str, large, lambda: decode(large))
    cache.once(str, large, lambda: decode(large))
    assert made[-4:] == [b"bad", b"bad", large, large]
    assert cache.once(bytes, b"a", lambda: b"as bytes") == b"as bytes"  # the type is part of the key


async def test_an_erasure_leaves_no_erased_text_held_for_the_process() -> None:
    """The erase reads and rewrites every commit that held the text; what it decoded goes with it,
    and a store that applies the erasure forgets what it held too."""
    objects = VersionedMemoryObjectStore()
    store = LogFileStore(objects, options=NO_CHECKPOINTS)
    agent = LogFileStore(objects, options=NO_CHECKPOINTS)
    await store.write("alice.md", "phone 555 0100\n", expected=None, origin=ALICE)
    await store.write("bob.md", "bob\n", expected=None, origin=ALICE)
    assert len(await agent.list()) == 2
    assert held_with(b"555 0100")

    await MemoryAdmin(store).erase("alice.md", origin=OPERATOR)
    assert not held_with(b"555 0100")
    await store.write("carol.md", "carol\n", expected=None, origin=ALICE)
    DECODED.keep(Commit, b"phone 555 0100", object())  # as if the agent's process held it
    assert [entry.path for entry in await agent.list()] == ["bob.md", "carol.md"]
    assert not held_with(b"555 0100")


def held_with(text: bytes) -> bool:
    """Whether any object held for the process was decoded from bytes holding `text`."""
    return any(text in data for _, data in DECODED._objects)


def test_a_run_joined_from_its_commits_encodings_is_the_run_encoded_whole() -> None:
    """A run is encoded from its commits' own encodings (each kept for the commit's hash); the bytes
    are the canonical JSON of the whole run, as readers of earlier releases encode it to check it."""
    commits: list[Commit] = []
    for seq in range(1, 20):  # more than one 16-item chunk of the array encoded whole
        prev = commits[-1].hash if commits else GENESIS_HASH
        changes = (Write(path=f"{seq}.md", text=f'text {seq} \u2615 "quoted"\n'),)
        commits.append(Commit.create(seq, prev, changes, ALICE, at=time.time()))
    run = Run.made(commits)
    assert run.encode() == canonical(run.model_dump(mode="json", by_alias=True))
    DECODED.clear()
    assert Run.decode("t", run_key(19), run.encode()) == run
