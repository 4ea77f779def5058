"""Operator work over many objects at once: listings rolled up at a delimiter (how the memories
under a prefix are found without listing their logs), and deleting all a memory ever stored."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .interface import Create, ObjectStore, ObjectVersion, Overwrite


@dataclass(frozen=True, slots=True)
class RolledPage:
    """One page of a listing rolled up at a delimiter: the keys that hold none after the prefix,
    the common prefixes (each key's start up to and including the delimiter's first occurrence after
    the prefix, listed once however many keys share it), and the token of the next page (None: last)."""

    keys: list[str]
    prefixes: list[str]
    token: str | None


@runtime_checkable
class RollingObjectStore(Protocol):
    """An object store that lists rolled up at a delimiter, as S3's and GCS's listings do: how the
    memories under a prefix are found without listing their logs (`connect.find_memories`).

    `list_rolled` gives one page of at most 1000 entries (keys and common prefixes together), in key
    order, from the page `token` names; one request.
    """

    @property
    def location(self) -> str: ...

    async def list_rolled(self, prefix: str, delimiter: str, *, token: str | None = None) -> RolledPage: ...


@runtime_checkable
class DestroyableObjectStore(ObjectStore, Protocol):
    """An object store that can delete all that was ever stored under a prefix: what `destroy` needs.

    `put` with `Overwrite` writes a key whatever it holds (the tombstone). `list_stored` gives
    every stored version under a prefix, old ones and delete markers (`marker`) included; where
    the bucket keeps no versions, its objects as the version "null". `delete_stored` removes those
    versions for good, many a request where the server allows; one that is gone is no error.
    """

    async def put(self, key: str, data: bytes, mode: Create | Overwrite) -> None: ...

    async def list_stored(self, prefix: str) -> list[ObjectVersion]: ...

    async def delete_stored(self, versions: Sequence[ObjectVersion]) -> None: ...


PAGE = 1000  # entries in a page of S3's and GCS's listings


def rolled_page(keys: Iterable[str], prefix: str, delimiter: str, token: str | None) -> RolledPage:
    """The page S3 would answer over `keys` (sorted): 1000 entries from after `token`, the last of
    them the next token (a key under a common prefix already given sorts after it, but rolls into
    it, so is passed over)."""
    entries: list[str] = []
    for key in keys:
        if not key.startswith(prefix):
            continue
        found = key.find(delimiter, len(prefix))
        entry = key if found < 0 else key[: found + len(delimiter)]
        if (token is not None and entry <= token) or entry in entries[-1:]:
            continue
        if len(entries) == PAGE:
            return _page(entries, prefix, delimiter, entries[-1])
        entries.append(entry)
    return _page(entries, prefix, delimiter, None)


def _page(entries: list[str], prefix: str, delimiter: str, token: str | None) -> RolledPage:
    rolled = [entry.find(delimiter, len(prefix)) >= 0 for entry in entries]
    return RolledPage(
        [entry for entry, is_rolled in zip(entries, rolled, strict=True) if not is_rolled],
        [entry for entry, is_rolled in zip(entries, rolled, strict=True) if is_rolled],
        token,
    )
