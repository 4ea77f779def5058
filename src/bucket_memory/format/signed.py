"""The signed envelope every stored object shares: a strict model whose `hash` is the SHA-256 of its
canonical encoding without it, decoded from hostile bytes or refused with `CorruptObjectError`
(`codec` holds the commits and checkpoints, `runs`, `intents` and `packed` the other kinds).

Decoding treats the bytes as hostile: size, nesting depth and numbers are bounded by the parser,
every field is checked by a strict model, and the object must be exactly the bytes a writer
encoded, proven by encoding it again (content only served to a cold open is taken on its hash over
the bytes read: see `Signed.decode`). Encoding runs the same decoder over its own output before
anything is written, so no writer can make an object that readers refuse.
"""

from __future__ import annotations

import functools
import hashlib
import typing
from functools import cached_property
from typing import Any, ClassVar, Self

import pydantic_core
from a13n_harness.providers.memory import MemoryStoreError
from pydantic import ValidationError

from ..runtime.off_loop import off_loop
from .canonical_json import canonical_members, joined
from .changes import Wire
from .decoded import DECODED
from .tombstone import DESTROYED, FORGED
from .wire_values import MAX_OBJECT_BYTES, Hash, Seq, key_seq

# The hash an object is built with before its own is computed over the rest of it.
_UNSIGNED = "0" * 64


class CorruptObjectError(MemoryStoreError):
    """An object under the memory's prefix is not what the store wrote there; nothing is served past it."""

    def __init__(self, location: str, key: str, reason: str) -> None:
        super().__init__(
            "unavailable",
            f"{location}/{key} is corrupt ({reason}). The memory is not served past it; "
            f"run `bucket-memory verify {location}` and restore the object from bucket versioning.",
        )
        self.key = key
        self.reason = reason


class _Unsound(Exception):
    """Why bytes are not an object a writer made (`Signed._checked`), its one argument."""


class Signed(Wire):
    """An object whose `hash` covers the canonical encoding of every other field, stored at the one
    key `stored_at` accepts: the key its `seq` names for a commit or a checkpoint; runs, intents and
    erasure records name their own."""

    seq: Seq
    hash: Hash
    # Whether `hash` covers the bytes as stored, less the `hash` member (see `hashed_as_read`).
    _hash_covers_bytes: ClassVar[bool] = False
    # Whether one decoded object serves every reader of the same bytes in the process (`decode`).
    _shared: ClassVar[bool] = False

    @property
    def checkable(self) -> bool:
        """Whether the hash can be checked against the content (not after an erasure in an old format)."""
        return True

    def encode(self) -> bytes:
        return joined(self._members.values())

    @property
    def encoded_size(self) -> int:
        """The length of `encode()`, known without joining it: the members, a comma between each
        two, and the braces."""
        return sum(map(len, self._members.values())) + len(self._members) + 1

    def body_digest(self) -> str:
        """The SHA-256 of the canonical encoding without `hash`: the same member bytes `encode`
        joins, so a reader encodes a large checkpoint once, not once to hash and once to compare."""
        return hashlib.sha256(joined(member for name, member in self._members.items() if name != "hash")).hexdigest()

    @cached_property
    def _members(self) -> dict[str, bytes]:
        return canonical_members(self.model_dump(mode="json", by_alias=True))

    @classmethod
    def signed(cls, **fields: Any) -> Self:
        """A new object with its hash, proven to decode back to itself before anyone writes it."""
        unsigned = cls.model_validate({**fields, "hash": _UNSIGNED}, strict=False)
        made = unsigned._resigned(unsigned.body_digest())
        # Hashed as readers check it and proven to decode from its bytes: what every reader in the
        # process decodes them to, so none need to (a fleet's stores read each other's commits).
        if cls._shared and made.refused() is None:
            DECODED.keep(cls, made.encode(), made)
        return made

    def _resigned(self, hashed: str) -> Self:
        """This object with `hash` set to `hashed`, proven to decode back to itself."""
        members = dict(self._members)
        members["hash"] = canonical_members({"hash": hashed})["hash"]
        made = self.model_copy(update={"hash": hashed})
        # The members just made are the new object's encoding: kept so that writing it encodes
        # nothing again (a cached encoding of the original must not be carried along).
        made.__dict__["_members"] = members
        encoded = made.encode()
        if len(encoded) > MAX_OBJECT_BYTES or type(self)._decoded(encoded) != made:
            raise MemoryStoreError(
                "too_large", f"This change would make an object readers refuse ({len(encoded)} bytes)."
            )
        return made

    @classmethod
    def decode(cls, location: str, key: str, data: bytes, *, served: bool = False) -> Self:
        """The object in `data`, read from `key`, or `CorruptObjectError` naming what is wrong with it.

        `served`: only its parsed content will be used (a cold open), so bytes that hash as read
        need not be proven canonical too. Whoever can write the bucket can craft such bytes (a
        duplicate member the parser drops, spaces); `verify`, erasure and recovery reason about the
        bytes as stored, so they prove the form. Types that set `_shared` are decoded once a process
        (`decoded.DECODED`, keyed by the bytes); each reader checks the key."""
        if len(data) > MAX_OBJECT_BYTES:
            raise CorruptObjectError(location, key, f"{len(data)} bytes, more than any object the store writes")
        if data == DESTROYED:  # the reader that read it has found no proof (`LogReader.read_commit`)
            raise CorruptObjectError(location, key, FORGED)
        try:
            if cls._shared and not served:
                decoded = DECODED.once(cls, data, lambda: cls._checked(data, served=False))
            else:
                decoded = cls._checked(data, served=served)
        except _Unsound as unsound:
            raise CorruptObjectError(location, key, unsound.args[0]) from None
        if not decoded.stored_at(key):
            raise CorruptObjectError(location, key, "it holds another seq than its key names")
        return decoded

    @classmethod
    def _checked(cls, data: bytes, *, served: bool) -> Self:
        """The object in `data` with its hash and form checked as `decode` says, whatever key it was
        read from: a pure function of the bytes. `_Unsound` names what is wrong."""
        try:
            decoded = cls._served(data) if served else cls._decoded(data)
        except ValueError as error:  # pydantic's ValidationError among them
            raise _Unsound(_reason(cls, data, error)) from None
        if served and decoded.hashed_as_read(data):
            pass
        elif decoded.checkable and decoded.hash != decoded.body_digest():
            raise _Unsound("its content does not match its hash")
        elif decoded.encode() != data:
            raise _Unsound("not in the canonical form the store writes")
        if (refused := decoded.refused()) is not None:
            raise _Unsound(refused)
        return decoded

    def refused(self) -> str | None:
        """What a reader refuses in this object although it decodes and hashes; None for most types."""
        return None

    def stored_at(self, key: str) -> bool:
        """Whether `key` is the one a writer stores this object at."""
        return key_seq(key) == self.seq

    def hashed_as_read(self, data: bytes) -> bool:
        """Whether the bytes read, less their `hash` member, hash to `hash`: for content that is only
        served, proof enough that it is what was hashed, so `decode` need not encode it again. Only
        where the hash covers the stored bytes (not the sealed texts of a commit of format 3)."""
        if not self._hash_covers_bytes:
            return False
        # Canonical JSON sorts `hash` after other members, never first, and an unescaped quote
        # cannot occur inside a string, so the first match is the object's own member. Encoding a
        # large checkpoint again was two thirds of a cold open's CPU; hashing the bytes read is a twentieth.
        member = b',"hash":"' + self.hash.encode() + b'"'
        at = data.find(member)
        if at < 0:
            return False
        hashed = hashlib.sha256(memoryview(data)[:at])
        hashed.update(memoryview(data)[at + len(member) :])
        return hashed.hexdigest() == self.hash

    @classmethod
    async def read(cls, location: str, key: str, data: bytes) -> Self:
        """`decode`, in a worker thread when the object is large."""
        return await off_loop(len(data), functools.partial(cls.decode, location, key, data))

    @classmethod
    def _decoded(cls, data: bytes) -> Self:
        return cls.model_validate_json(data, strict=True)

    @classmethod
    def _served(cls, data: bytes) -> Self:
        # Parsing first and validating the parsed values takes half the CPU of strict JSON
        # validation, which pydantic does item by item (a third of a cold open). The lax mode this
        # needs (JSON arrays for tuples) also takes a few mistyped values, such as "5" for 5, as
        # what they spell: still every constraint checked, and served only if the bytes hash as
        # read, so no more than whoever wrote the hash could have written typed; `verify`, which
        # decodes strictly, reports them.
        return cls.model_validate(pydantic_core.from_json(data, cache_strings="keys"), strict=False)


def _reason(model: type[Signed], data: bytes, error: ValueError) -> str:
    """Why an object failed to decode, in the words an operator needs."""
    try:
        parsed = pydantic_core.from_json(data)
    except ValueError:
        return "not a JSON document the store writes (truncated, overwritten or nested too deep?)"
    kind = model.model_fields["kind"].default
    if not isinstance(parsed, dict) or parsed.get("kind") != kind:
        return f"not a bucket-memory {kind}"
    readable = typing.get_args(model.model_fields["format"].annotation)
    if parsed.get("format") not in readable:
        return f"format {parsed.get('format')!r}; this bucket-memory reads format {readable[-1]} (upgrade it?)"
    if not isinstance(error, ValidationError):
        return f"malformed {kind}: {error}"
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"malformed {kind}: {where}: {first['msg']}"
