"""Measuring how long an event loop's thread was kept busy without yielding.

A store that parses a large checkpoint on the event loop stops every other coroutine of the
process (an agent's model stream, a web server's requests) for as long as the parse takes.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(slots=True)
class Stalls:
    """The longest stretch of CPU the loop's thread spent between two turns of a ticking task.

    CPU time of the loop's own thread, not wall time, so that a busy machine or a worker thread
    holding the GIL does not count as a stall: only work done on the loop does.
    """

    longest: float = 0.0


@asynccontextmanager
async def stall_meter(tick: float = 0.001) -> AsyncIterator[Stalls]:
    """Measure the longest stall of the running loop while the block runs.

    Objects made before the block are frozen out of garbage collection meanwhile: a full
    collection of a long test session's heap is a pause of that session, not of the measured work.
    """
    stalls = Stalls()
    gc.collect()
    gc.freeze()

    async def ticking() -> None:
        last = time.thread_time()
        while True:
            await asyncio.sleep(tick)
            now = time.thread_time()
            stalls.longest = max(stalls.longest, now - last)
            last = now

    ticker = asyncio.create_task(ticking())
    try:
        yield stalls
    finally:
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)
        gc.unfreeze()
