"""One writer with the agents' grants (GetObject, PutObject, DeleteObject under the prefix; no
DeleteObjectVersion) misbehaves on a versioned bucket, and `verify`, `recover` and the live path
hold: each test does what issue 44 found possible, on the versioned in-memory bucket and on moto."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

import pytest
from a13n_harness.providers.memory import Origin

from bucket_memory import LogFileStore, LogOptions, MemoryAdmin, open_store
from bucket_memory.codec import Change, Commit, Move, Write
from bucket_memory.objects import VersionedObjectStore
from bucket_memory.testing.versioned import VersionedMemoryObjectStore
from bucket_memory.wire_values import log_key

from .conftest import VERSIONED, unique_prefix

ALICE = Origin(principal_id="alice")
BOB = Origin(principal_id="bob")
MALLORY = Origin(principal_id="mallory")
OPERATOR = Origin(principal_id="operator", run_id="bucket-memory recover")
NO_CHECKPOINTS = LogOptions(checkpoint_min_commits=1000, checkpoint_max_commits=1000)

type Opener = Callable[[], AbstractAsyncContextManager[LogFileStore]]


@pytest.fixture(params=["memory", "s3"])
def memory(request: pytest.FixtureRequest) -> Opener:
    """Opens a new store (a cold process) on one versioned memory each time it is called."""
    if request.param == "memory":
        objects = VersionedMemoryObjectStore()

        @contextlib.asynccontextmanager
        async def in_memory() -> AsyncIterator[LogFileStore]:
            yield LogFileStore(objects, options=NO_CHECKPOINTS)

        return in_memory
    request.getfixturevalue("s3_endpoint")
    url = f"s3://{VERSIONED}/{unique_prefix()}"
    return lambda: open_store(url, options=NO_CHECKPOINTS)


async def files_of(store: LogFileStore) -> dict[str, str]:
    return {entry.path: (await store.read(entry.path)).text for entry in await store.list()}


async def forge(store: LogFileStore, *changes: Change, seq: int | None = None, prev: str | None = None) -> Commit:
    """Create the next log key (or `seq`) with a commit hashed and chained as the store would."""
    state = await store.log.proven_state()
    commit = Commit.create(
        seq if seq is not None else state.head + 1, prev or state.head_hash, changes, MALLORY, at=time.time()
    )
    assert await store.log.objects.create(log_key(commit.seq), commit.encode())
    return commit


def versioned(store: LogFileStore) -> VersionedObjectStore:
    assert isinstance(store.log.objects, VersionedObjectStore)
    return store.log.objects


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
