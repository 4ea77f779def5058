"""`StorePool`: many memories open in one process (a memory per end user), within a count and a size."""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Self

from .connect import open_store
from .files.store import LogFileStore

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Open:
    store: LogFileStore
    closing: AsyncExitStack
    users: int = 0


class StorePool:
    """The open stores of many memories, by URL, each opened by `open_store(url, **settings)` on
    first `lease` and kept warm for the next: every store on one credentials and event loop shares
    one cloud client. Past `max_stores` open stores, or `max_bytes` of their cached states, the
    least recently leased store nobody holds is settled and closed; stores held at once may take
    the pool past its bounds until they are handed back. Use it on one event loop; `aclose` (or
    `async with`) closes every store.
    """

    def __init__(self, *, max_stores: int = 1000, max_bytes: int = 256 * 1024 * 1024, **settings: Any) -> None:
        _check_whole("max_stores", max_stores, least=1)
        _check_whole("max_bytes", max_bytes, least=0)
        self.max_stores = max_stores
        self.max_bytes = max_bytes
        self._settings = settings
        self._open: OrderedDict[str, _Open] = OrderedDict()  # least recently leased first
        self._lock = asyncio.Lock()

    def __len__(self) -> int:
        return len(self._open)

    @property
    def cached_bytes(self) -> int:
        """The bytes of the open stores' cached states, as the `max_bytes` bound counts them."""
        return sum(_bytes(held.store) for held in self._open.values())

    @asynccontextmanager
    async def lease(self, url: str | os.PathLike[str]) -> AsyncIterator[LogFileStore]:
        """The open store of the memory at `url`, never closed while held."""
        held = await self._held(os.fspath(url))
        try:
            yield held.store
        finally:
            held.users -= 1
            await self._evict()

    async def _held(self, url: str) -> _Open:
        async with self._lock:
            held = self._open.get(url)
            if held is None:
                closing = AsyncExitStack()
                store = await closing.enter_async_context(open_store(url, **self._settings))
                held = self._open[url] = _Open(store, closing)
            self._open.move_to_end(url)
            held.users += 1
        await self._evict()
        return held

    async def _evict(self) -> None:
        """Close the least recently leased stores nobody holds until the pool is within its bounds."""
        while len(self._open) > self.max_stores or self.cached_bytes > self.max_bytes:
            idle = next((url for url, held in self._open.items() if held.users == 0), None)
            if idle is None:
                return  # every store is held: the bounds hold again as they are handed back
            await _close(self._open.pop(idle))

    async def aclose(self) -> None:
        """Settle and close every open store (held ones too: call it once the work is done)."""
        while self._open:
            _, held = self._open.popitem(last=False)
            await _close(held)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _check_whole(name: str, value: object, *, least: int) -> None:
    """A bound as a whole number: a float (nan never compares, so it would never evict), a string
    or a bool is refused here rather than failing, or holding nothing back, at the first lease."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"StorePool's {name} must be a whole number of at least {least}, not {value!r}"[:200])


def _bytes(store: LogFileStore) -> int:
    state = store.log.cached_state
    return state.stored_bytes if state is not None else 0


async def _close(held: _Open) -> None:
    """Settle a store and let go of its client; a failure is logged, not raised into a lease."""
    try:
        await held.closing.aclose()
    except Exception:
        logger.exception("%s: closing the store failed", held.store.location)
