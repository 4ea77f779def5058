"""The in-memory backend: objects in a dict, for property tests and as the base of fault injection."""

from __future__ import annotations

import builtins
import time
from collections.abc import Sequence
from typing import Literal

from .bulk import RolledPage, rolled_page
from .interface import (
    AlreadyExists,
    Create,
    IfHolds,
    IfMatch,
    ObjectInfo,
    ObjectVersion,
    Overwrite,
    PreconditionFailed,
    PutMode,
)


class MemoryObjectStore:
    """Objects in a dict, for fast property tests and as the base of fault injection.

    It keeps the cloud guarantees (create-if-absent, ordered listing) within one process, and the
    modes a directory keeps (`IfHolds`, `Overwrite`); it keeps no versions for an `IfMatch` to name.
    """

    rewrites_in_place: Literal[True] = True

    def __init__(self, name: str = "memory", *, ordered_listing: bool = True) -> None:
        self.objects: dict[str, tuple[bytes, float]] = {}
        self.clock = time.time()  # the server's clock: starts at the real time, moves only when a test moves it
        self.ordered_listing = ordered_listing
        self._name = name

    @property
    def location(self) -> str:
        return f"memory://{self._name}"

    async def get(self, key: str) -> bytes | None:
        found = self.objects.get(key)
        return found[0] if found is not None else None

    async def put(self, key: str, data: bytes, mode: Create | IfHolds | Overwrite) -> None:
        self._check(key, mode)
        self.objects[key] = (bytes(data), self.clock)

    async def list(self, prefix: str, *, start_after: str | None = None, limit: int | None = None) -> list[ObjectInfo]:
        return [
            ObjectInfo(key, modified)
            for key, (_, modified) in sorted(self.objects.items())
            if key.startswith(prefix) and (start_after is None or key > start_after)
        ][:limit]

    async def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            self.objects.pop(key, None)

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage:
        return rolled_page(sorted(self.objects), prefix, delimiter, token)

    async def list_stored(self, prefix: str) -> builtins.list[ObjectVersion]:
        return [
            ObjectVersion(key, "null", modified, "", current=True, size=len(data))
            for key, (data, modified) in sorted(self.objects.items())
            if key.startswith(prefix)
        ]

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None:
        await self.delete([version.key for version in versions])

    async def now(self, *, ageing: bool = False) -> float:
        return self.clock

    def _check(self, key: str, mode: PutMode) -> None:
        """Raise what `put` in `mode` answers when its condition does not hold now."""
        held = self.objects.get(key)
        match mode:
            case Create() if held is not None:
                raise AlreadyExists(self.location, key, "the key holds an object")
            case IfHolds(expected) if held is None or held[0] != expected:
                raise PreconditionFailed(self.location, key, "the key holds other bytes, or nothing")
            case IfMatch():  # a mode its type leaves out: a caller's bug, never a write
                raise TypeError(f"{self.location} does not keep {mode}: it keeps no versions to name")
