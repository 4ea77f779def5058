"""The tombstone `bucket-memory destroy` leaves where a destroyed memory's commits and checkpoint were.

It holds no text, path or principal. Every reader meets one on its next request (a warm store's
probe of the next commit, a catch-up's listing, a cold open's checkpoint) and refuses the memory
with `memory_deleted`, instead of serving what it cached or writing after it.
"""

from __future__ import annotations

from a13n_harness.providers.memory import MemoryStoreError

DESTROYED = b'{"bucket-memory":"destroyed"}\n'


def refuse_destroyed(location: str, data: bytes) -> None:
    """`memory_deleted` when `data` is a tombstone."""
    if data == DESTROYED:
        raise destroyed(location)


class MemoryDestroyed(MemoryStoreError):
    """`memory_deleted` from a tombstone: final, whatever a request before it did, so the commit path
    reports it as it is rather than as a write whose outcome is unknown."""


def destroyed(location: str) -> MemoryDestroyed:
    return MemoryDestroyed(
        "memory_deleted",
        f"{location} was destroyed (`bucket-memory destroy`): every version of its objects was deleted. "
        "Nothing was read or written. Drop this store; a new memory needs another prefix.",
    )
