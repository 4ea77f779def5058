"""Operator work over every memory under a bucket or prefix, in one process (`verify --all`,
`doctor --all`, `stats --all`, `compact --all`): a memory per end user makes thousands of them."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError

from .admin import MemoryAdmin
from .connect import find_memories, open_store
from .files.store import LogFileStore
from .format.tombstone import MemoryDestroyed
from .objects.retry import gather_bounded

DEFAULT_CONCURRENCY = 8

type Opener = Callable[[str], AbstractAsyncContextManager[LogFileStore]]


@dataclass(frozen=True, slots=True)
class Outcome[T]:
    """What the work gave on one memory (`result`), or the store error that stopped it there (`error`)."""

    url: str
    result: T | None = None
    error: MemoryStoreError | None = None

    @property
    def destroyed(self) -> bool:
        """Whether the memory was destroyed: what `destroy` meant to leave, reported, not a failure."""
        return isinstance(self.error, MemoryDestroyed)


async def each_memory[T](
    url: str | os.PathLike[str],
    work: Callable[[MemoryAdmin], Awaitable[T]],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Callable[[int, int], None] | None = None,
    read_only: bool = True,
) -> list[Outcome[T]]:
    """`work` on every memory under `url`, at most `concurrency` at once, in URL order (each store
    opened `read_only` unless the work changes the memory: compaction, doctor's create check).

    Requests: one listing to find the memories (a page per 1000 of them), then each memory's own,
    through the client every store of the process shares. A memory whose work fails with a store
    error (destroyed, forbidden, damaged) is reported as such and the others go on; any other
    failure stops the whole.
    """
    checked_concurrency(concurrency)  # before the listing: a wrong one costs no request
    found = await find_memories(url, destroyed=True)  # reported as destroyed, not left out
    return await each_of(
        found,
        lambda memory: open_store(memory, read_only=read_only),
        work,
        concurrency=concurrency,
        progress=progress,
    )


async def each_of[T](
    memories: Sequence[str],
    opened: Opener,
    work: Callable[[MemoryAdmin], Awaitable[T]],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Callable[[int, int], None] | None = None,
) -> list[Outcome[T]]:
    """`work` on each of `memories`, each store made by `opened(memory)`, at most `concurrency` at
    once, in the order given; as `each_memory` does once it has listed them (on any object store:
    the in-memory bucket of the tests and benchmarks too). No request but the work's own."""
    checked_concurrency(concurrency)
    done = 0
    if progress is not None:
        progress(0, len(memories))

    async def one(memory: str) -> Outcome[T]:
        nonlocal done
        try:
            async with opened(memory) as store:
                outcome = Outcome[T](memory, result=await work(MemoryAdmin(store)))
        except MemoryStoreError as error:
            outcome = Outcome[T](memory, error=error)
        done += 1
        if progress is not None:
            progress(done, len(memories))
        return outcome

    return await gather_bounded(memories, one, limit=concurrency)


def checked_concurrency(value: object) -> int:
    """`value` as how many memories to work on at once: a whole number of at least 1 (0 would wait
    forever, a float or a string would fail deep in the work), or a ValueError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"concurrency must be a whole number of at least 1, not {value!r}"[:200])
    return value
