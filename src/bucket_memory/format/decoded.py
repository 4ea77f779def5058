"""Objects decoded once a process: every store in a process that reads the same bytes shares one
decoded, checked object.

In a fleet every store reads every other store's commits and runs, and decoding them as hostile
input (strict validation, the hash, the canonical form proven by encoding again) was most of a
fleet write's CPU. Decoding is a pure function of the bytes, so the bytes themselves are the key:
bytes that differ in one bit are another key, decoded and checked in full, and a forger gains
nothing. Only what depends on where the bytes were read (the key they were stored at, an erasure's
verdict) is checked by each reader, after the cache (`signed.Signed.decode`). An erasure, made or
applied, forgets every object held (`state.State.apply`, `history/erasure.py`): they may hold its texts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

# Enough for the commits and runs a fleet's stores catch up through together (a run holds 64
# commits of a kilobyte or so), small beside a process's own state.
MAX_ENTRIES = 1024
MAX_BYTES = 8 * 1024 * 1024


class DecodedObjects:
    """A bounded LRU of immutable decoded objects, keyed by their type and their exact bytes.

    `once` returns the cached object or decodes it (outside the lock: two threads may decode the
    same bytes at once, and either result is the same); a decode that raises is not kept. Objects
    larger than an eighth of the byte budget are decoded every time rather than evict the rest."""

    def __init__(self, *, entries: int = MAX_ENTRIES, size: int = MAX_BYTES) -> None:
        self._entries = entries
        self._size = size
        self._held = 0
        self._objects: OrderedDict[tuple[type, bytes], object] = OrderedDict()
        self._lock = threading.Lock()  # `read` decodes large objects in worker threads

    def once[T](self, kind: type[T], data: bytes, decode: Callable[[], T]) -> T:
        """The object of type `kind` that `decode` makes of `data`, decoded at most once while held."""
        key = (kind, data)
        with self._lock:
            found = self._objects.get(key)
            if found is not None:
                self._objects.move_to_end(key)
                assert isinstance(found, kind)
                return found
        made = decode()
        self.keep(kind, data, made)
        return made

    def keep(self, kind: type, data: bytes, made: object) -> None:
        """Hold `made` as what decoding `data` as `kind` makes: decoded here, or its writer's own
        object, proven to decode from `data` before it was written (`signed.Signed.signed`)."""
        if len(data) > self._size // 8:
            return
        key = (kind, data)
        with self._lock:
            if key in self._objects:
                return
            self._objects[key] = made
            self._held += len(key[1])
            while len(self._objects) > self._entries or self._held > self._size:
                (_, evicted), _ = self._objects.popitem(last=False)
                self._held -= len(evicted)

    def clear(self) -> None:
        """Forget every object: after an erasure, whose texts they may hold."""
        with self._lock:
            self._objects.clear()
            self._held = 0


# The process's one cache: every store in the process shares it, as the point is.
DECODED = DecodedObjects()
