"""A dict seen through the changes made on top of it, so that planning a commit costs what it changes.

A commit is planned on the head's state and may still lose its race, so the plan must not change
that state. A copy of the state for each write costs in proportion to the files (docs/performance.md,
"Numbers behind the code"); an overlay costs what the write changes, at any size, and `merge`
applies it once the commit has landed.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping


class Overlay[K, V](MutableMapping[K, V]):
    """`base` as changed by the writes and deletions made here, which `base` sees only on `merge`.

    Reads look here first, then in `base` unless the key was deleted here (or everything was,
    by `clear`). Iteration yields the base's keys first: it serves checks and listings, not order.
    """

    def __init__(self, base: MutableMapping[K, V]) -> None:
        self.base = base
        self._written: dict[K, V] = {}
        self._deleted: set[K] = set()
        self._cleared = False

    def __getitem__(self, key: K) -> V:
        if key in self._written:
            return self._written[key]
        if self._cleared or key in self._deleted:
            raise KeyError(key)
        return self.base[key]

    def __contains__(self, key: object) -> bool:
        if key in self._written:
            return True
        return not self._cleared and key not in self._deleted and key in self.base

    def __setitem__(self, key: K, value: V) -> None:
        self._written[key] = value
        self._deleted.discard(key)

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._written.pop(key, None)
        if not self._cleared and key in self.base:
            self._deleted.add(key)

    def __iter__(self) -> Iterator[K]:
        if not self._cleared:
            yield from (key for key in self.base if key not in self._deleted and key not in self._written)
        yield from self._written

    def __len__(self) -> int:
        if self._cleared:
            return len(self._written)
        below = len(self.base) - len(self._deleted)
        return below + sum(1 for key in self._written if key not in self.base or key in self._deleted)

    def clear(self) -> None:
        self._written.clear()
        self._deleted.clear()
        self._cleared = True

    def merge(self) -> None:
        """Apply what was changed here to `base`: deletions, then writes in the order they were made."""
        if self._cleared:
            self.base.clear()
        for key in self._deleted:
            self.base.pop(key, None)
        for key, value in self._written.items():
            self.base.pop(key, None)  # a rewritten key moves to the end, as an in-place write moves it
            self.base[key] = value
