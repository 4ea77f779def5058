"""Canonical JSON, the form every stored object takes and its hash covers: sorted keys, no spaces,
UTF-8, made with the C encoder a few array items a call so that no call holds the GIL for long."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable


def canonical(value: object) -> bytes:
    """The canonical JSON of `value`: sorted keys, no spaces, UTF-8."""
    return joined(canonical_members(value).values()) if isinstance(value, dict) else _whole(value)


def digest(body: object) -> str:
    """The hash of an object whose other fields are `body`: the SHA-256 of its canonical JSON."""
    return hashlib.sha256(canonical(body)).hexdigest()


def canonical_members(value: dict[str, object]) -> dict[str, bytes]:
    """Each member of a JSON object as `canonical` writes it (`"name":value`), in key order.

    An array is encoded 16 items a call: one C call over a whole checkpoint holds the GIL long
    enough to stall the event loop's thread even from a worker thread, while 16 files of the
    default 64 KiB limit hold it briefly and the C encoder keeps nearly its whole speed
    (docs/performance.md, "Numbers behind the code")."""
    return {
        name: _array(_whole(name) + b":[", item)
        if isinstance(item, list | tuple)
        else _whole(name) + b":" + _whole(item)
        for name, item in sorted(value.items())
    }


def _array(opening: bytes, items: list[object] | tuple[object, ...]) -> bytes:
    pieces = (
        _whole(list(items[start : start + _ITEMS_PER_CALL]))[1:-1] for start in range(0, len(items), _ITEMS_PER_CALL)
    )
    return _enclosed(opening, pieces, b"]")


_ITEMS_PER_CALL = 16


def _whole(value: object) -> bytes:
    return _ENCODER.encode(value).encode()


# One encoder for every call: json.dumps makes a new one per call when given options.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def joined(members: Iterable[bytes]) -> bytes:
    """The canonical JSON of an object whose members, in key order, are `members`."""
    return _enclosed(b"{", members, b"}")


def _enclosed(opening: bytes, items: Iterable[bytes], closing: bytes) -> bytes:
    """`opening`, the items separated by commas, and `closing`, copied once by one join: a join of
    a megabyte or more lets other threads run, where `+` on a 32 MiB result holds the GIL for
    each copy (tens of ms, felt by the event loop while a worker thread encodes)."""
    pieces = [piece for item in items for piece in (b",", item)]
    pieces[:1] = [opening]  # in place of the first comma
    pieces.append(closing)
    return b"".join(pieces)
