"""CPU work that may take long (encoding or decoding a large object) kept off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

# Objects past this size are encoded and decoded in a worker thread: parsing a whole memory's
# checkpoint takes long enough to stall every other coroutine (docs/performance.md, "Numbers
# behind the code").
OFF_LOOP_BYTES = 256 * 1024


async def off_loop[T](size: int, work: Callable[[], T]) -> T:
    """Run `work` (encoding or decoding `size` bytes) here when small, else in a worker thread."""
    if size < OFF_LOOP_BYTES:
        return work()
    return await asyncio.to_thread(work)
