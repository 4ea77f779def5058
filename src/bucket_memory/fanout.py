"""Operator work over every memory under a bucket or prefix, in one process (`verify --all`,
`stats --all`, `compact --all`): a memory per end user makes thousands of them."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a13n_harness.providers.memory import MemoryStoreError

from .admin import MemoryAdmin
from .connect import find_memories, open_store
from .objects.retry import gather_bounded

DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True, slots=True)
class Outcome[T]:
    """What the work gave on one memory (`result`), or the store error that stopped it there (`error`)."""

    url: str
    result: T | None = None
    error: MemoryStoreError | None = None


async def each_memory[T](
    url: str | os.PathLike[str],
    work: Callable[[MemoryAdmin], Awaitable[T]],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Callable[[int, int], None] | None = None,
    read_only: bool = True,
) -> list[Outcome[T]]:
    """`work` on every memory under `url`, at most `concurrency` at once, in URL order (each store
    opened `read_only` unless the work changes the memory: compaction).

    Requests: one listing to find the memories (a page per 1000 of them), then each memory's own,
    through the client every store of the process shares. A memory whose work fails with a store
    error (destroyed, forbidden, damaged) is reported as such and the others go on; any other
    failure stops the whole.
    """
    found = await find_memories(url, destroyed=True)  # reported as destroyed, not left out
    done = 0
    if progress is not None:
        progress(0, len(found))

    async def one(memory: str) -> Outcome[T]:
        nonlocal done
        try:
            async with open_store(memory, read_only=read_only) as store:
                outcome = Outcome[T](memory, result=await work(MemoryAdmin(store)))
        except MemoryStoreError as error:
            outcome = Outcome[T](memory, error=error)
        done += 1
        if progress is not None:
            progress(done, len(found))
        return outcome

    return await gather_bounded(found, one, limit=concurrency)
